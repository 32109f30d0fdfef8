"""Attach: another session's context staged at HEAD and sent, between markers, with the
next request — once — on real corpus sessions.

Oracles: the transcripts read with plain JSON (the user's prompt, the tool results the
agent got), the source commit as it is stored, and the request body the engine renders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.presets import EVERY_RULE

from ctxrules import dag
from ctxrules.commit import Pipeline, load_commit, make_commit
from ctxrules.config import PipelineConfig
from ctxrules.engine import Engine, EngineConfig, attach
from ctxrules.errors import DagError, NotFoundError, ValidationError
from ctxrules.importers import import_paths
from providers.conftest import CORPUS_CASSETTES, load_cassette

from .conftest import QUIET

RELIABILITY = "claude-code-jsonl/reliability_coverage-test-fix.jsonl"
INIT = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
T0 = 1_800_000_000.0
#: A real answer: the last response of a recorded Anthropic exchange.
ANSWER = load_cassette(CORPUS_CASSETTES / "anthropic" / "test_anthropic_cache_real_api.yaml")[1]


def imported(store, corpus: Path, rel: str) -> str:
    (result,) = import_paths(store, [str(corpus / rel)])
    return result.id


def transcript_lines(corpus: Path, rel: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (corpus / rel).read_text().splitlines() if line.strip()]


def texts(body: dict[str, Any]) -> list[str]:
    """Every text the request carries in its messages, in order (text blocks and tool
    results), read from the body as the SDK would send it."""
    out = []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        for b in content:
            if b["type"] == "text":
                out.append(b["text"])
            elif b["type"] == "tool_result":
                c = b["content"]
                out += [c] if isinstance(c, str) else [x["text"] for x in c if x["type"] == "text"]
    return out


def chat(engine: Engine, turns: int = 1, *, start: float = T0, session: str | None = None) -> str:
    """A session (new, or ``session``) with ``turns`` more user turns answered by ANSWER."""
    sid = session or dag.create_session(engine.store).id
    for k in range(turns):
        prep = engine.prepare(sid, f"question {k}: keep going", now=start + 2 * k)
        engine.record(prep, ANSWER, now=start + 2 * k + 1)
    return sid


def engine_for(store, preset: str | PipelineConfig = "default", **aging) -> Engine:
    config = preset if isinstance(preset, PipelineConfig) else PipelineConfig.preset(preset)
    if aging:
        config = config.with_params("tool_aging", **aging)
    return Engine(
        store,
        EngineConfig(provider="anthropic", sources=QUIET),
        pipeline=Pipeline.from_config(config),
    )


def block(commit, source_commit: str):
    return [it for it in commit.items if it.attached_from == source_commit]


def test_attached_session_is_sent_between_markers_once(store, corpus):
    src = imported(store, corpus, RELIABILITY)
    engine = engine_for(store)
    target = chat(engine)
    before = store.get_session(target).head
    ptr = attach(store, target, src, config=engine.pipeline, now=T0 + 10)
    # staged: the pointer is HEAD, nothing was sent or expanded yet
    assert store.get_session(target).head == ptr.id and ptr.predecessor == before
    ref = ptr.metadata["attach"]
    source = make_commit(src, store=store, config=engine.pipeline, now=T0 + 10)
    assert ref == {"session": src, "head": store.get_session(src).head, "commit": source.id}

    prep = engine.prepare(target, "What did the other session change?", now=T0 + 11)
    sent = texts(prep.body)
    opening = f"<attached session {src} at {ref['head']} (commit {source.id})>"
    assert sent.count(opening) == 1
    inside = sent[sent.index(opening) + 1 : sent.index(f"</attached {source.id}>")]
    lines = transcript_lines(corpus, RELIABILITY)
    prompt = next(
        d["message"]["content"]
        for d in lines
        if d.get("type") == "user" and isinstance(d["message"]["content"], str)
    )
    assert prompt.startswith("Add a function called multiply_numbers")
    assert prompt in inside
    # the last tool result the agent got, full in the source commit, is sent as it was
    results = [
        b
        for d in lines
        if d.get("type") == "user" and isinstance(d["message"]["content"], list)
        for b in d["message"]["content"]
        if b.get("type") == "tool_result"
    ]
    last = results[-1]["content"]
    last = last if isinstance(last, str) else "\n".join(x["text"] for x in last)
    assert last in inside
    # every item of the block is marked with its source commit, markers first and last
    items = block(prep.commit, source.id)
    shown = [it for it in source.items if it.state != "summarized"]
    assert [it.source_node_id for it in items] == [
        ptr.id,
        *(it.source_node_id for it in shown),
        f"{ptr.id}/end",
    ]
    assert {it.reason for it in items} == {f"attached_from:{source.id}"}
    assert [it.state for it in items[1:-1]] == [it.state for it in shown]
    assert not any(it.locked or it.is_anchor for it in items)

    # expanded once: the next turns, and a second pointer to the same commit, add nothing
    engine.record(prep, ANSWER, now=T0 + 12)
    again = attach(store, target, src, config=engine.pipeline, now=T0 + 13)
    assert again.metadata["attach"]["commit"] == source.id
    prep = engine.prepare(target, "And then?", now=T0 + 14)
    assert texts(prep.body).count(opening) == 1
    assert len(block(prep.commit, source.id)) == len(items)
    assert again.id not in {it.source_node_id for it in prep.commit.items}


def test_an_unloadable_source_is_one_user_item(store, corpus):
    engine = engine_for(store)
    target = chat(engine)
    ref = {"session": "s_elsewhere", "head": "n_gone", "commit": "cc_0123456789abcdef"}
    ptr = dag.append(store, target, "user", "attach", metadata={"attach": ref}, created_at=T0 + 5)
    prep = engine.prepare(target, "Use what was attached.", now=T0 + 6)
    (item,) = [it for it in prep.commit.items if it.source_node_id == ptr.id]
    assert item.reason == "attach_unavailable" and item.role == "user"
    assert item.attached_from is None
    expected = (
        "[attached: session s_elsewhere at n_gone (commit cc_0123456789abcdef) could not be loaded]"
    )
    assert texts(prep.body).count(expected) == 1
    assert not any(t.startswith("<attached") for t in texts(prep.body))


def test_rules_compress_attached_items(store, corpus):
    # Tool aging treats a block's turns like the session's own: once enough turns follow,
    # a tool result the source commit showed in full is aged in this session's commit —
    # and the source commit itself stays as it was (commits are never rewritten).
    src = imported(store, corpus, RELIABILITY)
    # (Not cache-aware: the few short turns here would never pay for a rewrite; a tail
    # of 3 turns, so the source commit shows some of its results in full.)
    engine = engine_for(store, cache_aware=False, tail_turns=3)
    target = chat(engine)
    ptr = attach(store, target, src, config=engine.pipeline, now=T0 + 10)
    cid = ptr.metadata["attach"]["commit"]
    source = load_commit(cid, store=store)
    full = {it.source_node_id for it in source.items if it.role == "tool" and it.state == "full"}
    assert full  # the source's tail window
    aged: list[Any] = []
    for k in range(8):
        chat(engine, session=target, start=T0 + 20 + 10 * k)
        commit = make_commit(target, store=store, config=engine.pipeline, now=T0 + 99)
        aged = [
            it
            for it in block(commit, cid)
            if it.source_node_id in full and it.state == "aged" and it.reason == "tail_window"
        ]
        if aged:
            break
    assert aged, "tool aging never reached the attached results"
    prep = engine.prepare(target, "What is left?", now=T0 + 200)
    sent = texts(prep.body)
    assert any(t == aged[0].rendered and t.startswith("[tool ") for t in sent)
    assert load_commit(cid, store=store) == source


def test_summarize_folds_a_block_whole_and_never_a_locked_one(store, corpus):
    # Under aggressive's budgets the session soon goes over its 2,000-token threshold:
    # an unlocked block folds all at once (never split), a locked one is never folded.
    # (Without the cache ledger: folding at once, not when a rewrite pays.)
    engine = engine_for(store, EVERY_RULE)
    free_src = imported(store, corpus, RELIABILITY)
    locked_src = imported(store, corpus, INIT)
    target = chat(engine)
    free = attach(store, target, free_src, config=engine.pipeline, now=T0 + 10)
    kept = attach(store, target, locked_src, locked=True, config=engine.pipeline, now=T0 + 11)
    free_id, kept_id = free.metadata["attach"]["commit"], kept.metadata["attach"]["commit"]
    kept_source = load_commit(kept_id, store=store)
    folded_whole = False
    for k in range(4):
        chat(engine, session=target, start=T0 + 20 + 10 * k)
        commit = make_commit(target, store=store, config=engine.pipeline, now=T0 + 99)
        states = {it.state == "summarized" for it in block(commit, free_id)}
        assert len(states) == 1, f"the block of {free_id} was split by a fold"
        folded_whole = folded_whole or states == {True}
        locked = block(commit, kept_id)
        assert all(it.locked for it in locked)
        assert [(it.source_node_id, it.state, it.rendered) for it in locked[1:-1]] == [
            (it.source_node_id, it.state, it.rendered)
            for it in kept_source.items
            if it.state != "summarized"
        ]
    assert folded_whole
    merged = {it.merged_into for it in block(commit, free_id)}
    assert len(merged) == 1 and next(iter(merged)).startswith("sm_")


def test_attach_refuses_what_it_cannot_stage(store, corpus):
    src = imported(store, corpus, RELIABILITY)
    engine = engine_for(store)
    target = chat(engine, 2)
    info = store.get_session(target)
    nodes = len(store.nodes(target))
    with pytest.raises(NotFoundError):
        attach(store, target, "s_no_such_session", now=T0)
    with pytest.raises(DagError, match="is not part of session"):
        attach(store, target, src, info.head, now=T0)  # a node of another session
    with pytest.raises(DagError, match="on the current branch"):
        # its own history (an earlier turn): it is sent already
        attach(store, target, target, store.get_node(info.head).predecessor, now=T0)
    with pytest.raises(DagError, match="no nodes"):
        attach(store, target, dag.create_session(store).id, now=T0)
    with pytest.raises(ValidationError, match="now must be"):
        attach(store, target, src, now=float("nan"))
    # an answer whose tool calls wait for their results: nothing may come between them
    asking = {
        **ANSWER,
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}],
        "stop_reason": "tool_use",
    }
    prep = engine.prepare(target, "read it", now=T0 + 50)
    engine.record(prep, asking, now=T0 + 51)
    waiting = len(store.nodes(target))
    with pytest.raises(DagError, match="waiting for results"):
        attach(store, target, src, now=T0 + 52)
    assert len(store.nodes(target)) == waiting == nodes + 2


def test_a_sibling_branch_is_attached_without_the_history_it_shares(store, corpus):
    # A fork shares the history up to where it was made: its block holds only what it
    # added (the shared turns are the session's own already, sent once).
    src = imported(store, corpus, RELIABILITY)
    engine = engine_for(store)
    answers = [c for c in dag.branch_path(store, src) if c.role == "assistant"]
    fork = dag.fork(store, src, answers[4].id).id
    chat(engine, session=fork)
    ptr = attach(store, src, fork, config=engine.pipeline, now=T0 + 10)
    cid = ptr.metadata["attach"]["commit"]
    prep = engine.prepare(src, "Compare the two attempts.", now=T0 + 11)
    items = block(prep.commit, cid)
    added = [n.id for n in store.nodes(fork)]  # the fork's own nodes: its one turn
    assert [it.source_node_id for it in items[1:-1]] == added
    sent = texts(prep.body)
    opening = sent.index(next(t for t in sent if t.startswith("<attached session")))
    assert sent[opening + 1 : sent.index(f"</attached {cid}>")] == [
        "question 0: keep going",
        ANSWER["content"][0]["text"],
    ]
