"""Merge: peers' heads attached to a target, one turn over them with a recorded-style
answer (no network), the multi-parent merge commit, the peers marked merged.

The scene is a real Claude Code session (the target), a fork of it that tried another
way from its fifth answer (peer ``alt``) and another real session (peer ``init``).
"""

from __future__ import annotations

import pytest
from tests.presets import EVERY_RULE

from ctxrules import dag
from ctxrules.commit import derive_with_summaries, load_commit, make_commit
from ctxrules.commit.persist import clear_cache, load
from ctxrules.engine import MERGED_KEY, merge, merged_into, record_merge
from ctxrules.errors import DagError, ValidationError
from ctxrules.testing import check_commits

from .test_attach import ANSWER, INIT, RELIABILITY, T0, block, chat, engine_for, imported, texts

MERGE_ANSWER = {
    **ANSWER,
    "id": "msg_merge",
    "content": [{"type": "text", "text": "Merged: keep multiply_numbers, add the CLAUDE.md."}],
}
INSTRUCTION = "Combine what both attempts found into one plan."


def make_scene(store, corpus, preset="default"):
    """``(engine, target, alt, init)`` under ``preset``."""
    engine = engine_for(store, preset)
    target = imported(store, corpus, RELIABILITY)
    init = imported(store, corpus, INIT)
    answers = [c for c in dag.branch_path(store, target) if c.role == "assistant"]
    alt = dag.fork(store, target, answers[4].id).id
    chat(engine, 2, session=alt)
    return engine, target, alt, init


@pytest.fixture
def scene(store, corpus):
    """The scene under the default rules."""
    return make_scene(store, corpus)


def state(store, sessions, *, commits=True):
    """What a merge could write: nodes, HEADs, metadata (the history) and, with
    ``commits``, the stored commits of each session."""
    out = {}
    for sid in sessions:
        info = store.get_session(sid)
        out[sid] = (
            [n.id for n in store.nodes(sid)],
            info.head,
            info.metadata,
            [r.id for r in store.session_commits(sid)] if commits else None,
        )
    return out


def test_merge_turn_commit_and_marks(scene, store):
    engine, target, alt, init = scene
    prev = store.get_session(target).head
    target_prev = make_commit(target, prev, store=store, config=engine.pipeline, now=T0)
    peers = {
        sid: make_commit(sid, store=store, config=engine.pipeline, now=T0) for sid in (alt, init)
    }
    sent = []

    def call(prep):
        sent.append(prep)
        return MERGE_ANSWER

    result = merge(
        engine, target, [alt, init], instruction=INSTRUCTION, base=alt, call=call, now=T0 + 5
    )
    (prep,) = sent
    # the staged nodes: one pointer per peer (the base last, locked), then the instruction
    ptrs = [store.get_node(p) for p in result.pointers]
    assert [p.metadata["attach"]["session"] for p in ptrs] == [init, alt]
    assert [p.metadata.get("locked", False) for p in ptrs] == [False, True]
    node = store.get_node(result.node)
    assert node.output == INSTRUCTION and node.predecessor == ptrs[-1].id
    assert ptrs[0].predecessor == prev
    assert node.metadata["merge"]["base"] == peers[alt].id

    # the request carries each peer's block between its markers, then the instruction
    body = texts(prep.body)
    for sid in (init, alt):
        cid = peers[sid].id
        opening = f"<attached session {sid} at {store.get_session(sid).head} (commit {cid})>"
        assert body.count(opening) == 1 and body.count(f"</attached {cid}>") == 1
    assert body[-1] == INSTRUCTION
    alt_from = body.index(next(t for t in body if t.startswith(f"<attached session {alt}")))
    assert body[alt_from + 1 : body.index(f"</attached {peers[alt].id}>")] == [
        "question 0: keep going",
        ANSWER["content"][0]["text"],
        "question 1: keep going",
        ANSWER["content"][0]["text"],
    ]

    # the merge commit: the commit the turn was sent with, with real items and parents
    merged = load_commit(result.commit, store=store)
    assert merged == prep.commit and merged.head_node_id == result.node
    assert (
        result.parent_ids
        == merged.parent_ids
        == (
            target_prev.id,
            peers[init].id,
            peers[alt].id,
        )
    )
    assert len(merged.items) > len(target_prev.items) and merged.total_tokens > 0
    assert all(it.locked for it in block(merged, peers[alt].id))
    assert not any(it.locked for it in block(merged, peers[init].id))

    # the answer is recorded after the instruction, and the peers know where they went
    assert result.recorded is not None
    answer = result.recorded.node
    assert answer.predecessor == result.node and store.get_session(target).head == answer.id
    assert answer.metadata["request"]["commit"] == result.commit
    for sid in (alt, init):
        (entry,) = merged_into(store, sid)
        assert entry == {
            "head": store.get_session(sid).head,
            "commit": peers[sid].id,
            "into": target,
            "node": result.node,
            "answer": answer.id,
            "merge_commit": result.commit,
            "base": sid == alt,
            "at": T0 + 5,
        }
    assert MERGED_KEY not in store.get_session(target).metadata

    # the store keeps every parent: read back without the loaded-commit cache, the row
    # names the first (what its delta is against) and the commit all of them
    clear_cache(store)
    assert load_commit(result.commit, store=store).parent_ids == merged.parent_ids
    (row,) = [r for r in store.session_commits(target) if r.id == result.commit]
    assert row.parent_id == target_prev.id

    # the next commit builds on the merge commit with one parent, like any other
    after = make_commit(target, store=store, config=engine.pipeline, now=T0 + 6)
    assert after.parent_ids == (result.commit,)


def test_the_base_stays_full_while_another_peer_folds(store, corpus):
    # Under aggressive's budgets the merge request is far over the 2,000-token
    # threshold: summarize folds the other peer's block whole in the merge commit
    # itself, while the base's block, locked, is sent as the base commit shows it.
    # (Without the cache ledger: the fold is made at once, not when it pays.)
    engine, target, alt, init = make_scene(store, corpus, EVERY_RULE)
    result = merge(engine, target, [alt, init], instruction=INSTRUCTION, base=alt, now=T0 + 5)
    merged = load_commit(result.commit, store=store)
    base_commit = load_commit(result.peers[-1].commit, store=store)
    assert result.peers[-1].session == alt and result.peers[-1].base
    shared = {it.source_node_id for it in load_commit(merged.parent_ids[0], store=store).items}
    base = block(merged, base_commit.id)
    assert all(it.locked and it.state != "summarized" for it in base)
    assert [(it.source_node_id, it.state, it.rendered) for it in base[1:-1]] == [
        (it.source_node_id, it.state, it.rendered)
        for it in base_commit.items
        if it.state != "summarized" and it.source_node_id not in shared
    ]
    other = block(merged, result.peers[0].commit)
    assert other and {it.state for it in other} == {"summarized"}
    (summary,) = {it.merged_into for it in other}
    assert any(it.source_node_id == summary and it.state == "summary" for it in merged.items)
    sent = texts(result.prep.body)
    assert sum(t.startswith(f"<attached session {alt}") for t in sent) == 1
    assert not any(t.startswith(f"<attached session {init}") for t in sent)
    assert any(t.startswith("[Summary]") for t in sent)


def test_the_merge_commit_is_derived_from_the_graph_again(scene, store):
    # The merge commit's id depends on the graph only: derived again from its first
    # parent and the staged nodes (no parent list handed in), it comes out the same,
    # and the test kit finds every invariant kept, invariant 7 included.
    engine, target, alt, init = scene
    result = merge(
        engine,
        target,
        [init, alt],
        instruction=INSTRUCTION,
        call=lambda p: MERGE_ANSWER,
        now=T0 + 5,
    )
    merged = load(store, result.commit)
    parent = load(store, merged.parent_ids[0])
    calls = [store.get_node(n) for n in (*result.pointers, result.node)]
    marks = {k: v for k, v in merged.cursors.items() if k.startswith(("seq:", "variants:"))}
    # The rules of the merge turn: priced for the model it goes to (the ledger records it).
    pipeline = engine.pipeline_for(result.prep.model)
    again = derive_with_summaries(
        parent,
        calls,
        session_id=target,
        head_node_id=result.node,
        pipeline=pipeline,
        now=T0 + 5,
        load_commit=lambda cid: load(store, cid),
        marks=marks,
    )
    assert again.commit.id == merged.id and again.commit.parent_ids == merged.parent_ids
    nodes = {n.id: n for sid in (target, alt, init) for n in store.nodes(sid, inherited=True)}
    assert check_commits([(parent, again, nodes)], pipeline) == 1


def test_without_call_the_merge_waits_for_the_answer(scene, store):
    engine, target, alt, _ = scene
    staged = merge(engine, target, [alt], instruction=INSTRUCTION, now=T0 + 5)
    assert staged.recorded is None and not merged_into(store, alt)
    assert store.get_session(target).head == staged.node
    done = record_merge(engine, staged.prep, MERGE_ANSWER, now=T0 + 6)
    assert done.commit == staged.commit and done.node == staged.node
    assert done.pointers == staged.pointers
    assert [e["answer"] for e in merged_into(store, alt)] == [done.recorded.node.id]
    # a request that is not a merge turn's is refused, and nothing is recorded
    plain = engine.prepare(target, "thanks", now=T0 + 7)
    with pytest.raises(ValidationError, match="not a merge turn"):
        record_merge(engine, plain, MERGE_ANSWER, now=T0 + 8)
    assert store.get_session(target).head == plain.head


def test_a_failed_call_leaves_the_merge_staged_to_finish(scene, store):
    engine, target, alt, _ = scene

    def failing(prep):
        raise ConnectionError("no network in tests")

    with pytest.raises(ConnectionError):
        merge(engine, target, [alt], instruction=INSTRUCTION, call=failing, now=T0 + 5)
    assert not merged_into(store, alt)
    head = store.get_session(target).head
    assert "merge" in store.get_node(head).metadata
    prep = engine.prepare(target, now=T0 + 6)  # the same request, due at HEAD
    done = record_merge(engine, prep, MERGE_ANSWER, now=T0 + 7)
    assert done.node == head and len(done.parent_ids) == 2
    assert merged_into(store, alt)[0]["answer"] == done.recorded.node.id


def test_dry_run_stores_nothing(scene, store):
    engine, target, alt, init = scene
    before = state(store, (target, alt, init))
    result = merge(engine, target, [alt, init], instruction=INSTRUCTION, now=T0 + 5, dry_run=True)
    assert result.dry_run and result.recorded is None
    assert state(store, (target, alt, init)) == before
    body = texts(result.prep.body)
    assert body[-1] == INSTRUCTION
    assert sum(t.startswith("<attached session") for t in body) == 2
    assert len(result.parent_ids) == 3
    # the real merge then makes the same request (the same commit, the same bytes)
    real = merge(engine, target, [alt, init], instruction=INSTRUCTION, now=T0 + 5)
    assert real.prep.request.body == result.prep.request.body


def test_bad_merges_are_refused_and_store_nothing(scene, store):
    engine, target, alt, init = scene
    before = state(store, (target, alt, init))
    head = store.get_session(target).head
    earlier = store.nodes(alt)[1].id  # the fork's first answer, before its HEAD
    cases = [
        (ValidationError, "several of the peers", dict(peers=[alt, (alt, earlier)], base=alt)),
        (ValidationError, "needs an instruction", dict(peers=[alt], instruction="  ")),
        (ValidationError, "at least one peer", dict(peers=[])),
        (ValidationError, "named twice", dict(peers=[alt, (alt, None)])),
        (ValidationError, "not one of the peers", dict(peers=[alt], base=init)),
        (
            DagError,
            "on the current branch",
            dict(peers=[(target, store.get_node(head).predecessor)]),
        ),
        (DagError, "on the current branch", dict(peers=[alt, (target, head)])),
    ]
    for error, message, kwargs in cases:
        kwargs.setdefault("instruction", INSTRUCTION)
        with pytest.raises(error, match=message):
            merge(engine, target, kwargs.pop("peers"), now=T0 + 5, **kwargs)
    assert state(store, (target, alt, init)) == before
    # a base named by its head picks that one
    dry = merge(
        engine,
        target,
        [alt, (alt, earlier[:-3])],
        base=(alt, earlier),
        instruction=INSTRUCTION,
        now=T0 + 5,
        dry_run=True,
    )
    assert [(p.head, p.base) for p in dry.peers] == [
        (store.get_session(alt).head, False),
        (earlier, True),
    ]
    with pytest.raises(DagError, match="nothing to merge into"):
        merge(engine, dag.create_session(store).id, [alt], instruction=INSTRUCTION, now=T0)
    # a peer merged once is attached already: merging the same head again is refused
    # (after reading the commits of the heads, which may be stored, as by any read)
    merge(engine, target, [alt], instruction=INSTRUCTION, call=lambda p: MERGE_ANSWER, now=T0 + 5)
    after = state(store, (target, alt, init), commits=False)
    with pytest.raises(DagError, match="attached in session"):
        merge(engine, target, [alt], instruction=INSTRUCTION, now=T0 + 9)
    assert state(store, (target, alt, init), commits=False) == after
