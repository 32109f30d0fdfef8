"""make_commit (with and without rerun) over each store backend: lookup, incrementality,
immutability, content addressing, delta storage, branches and late tool results."""

from __future__ import annotations

import msgspec
import pytest
from tests.presets import EVERY_RULE

import ctxrules
from ctxrules import dag
from ctxrules.commit import Pipeline, diff_commits, load_commit, persist
from ctxrules.config import PipelineConfig
from ctxrules.errors import DagError, StoreError, ValidationError
from ctxrules.model import ContextItem, TextBlock, ToolUseBlock
from ctxrules.ruleapi import delta as _delta
from ctxrules.rules import Summarize
from ctxrules.store import open_store

DEFAULT = Pipeline.from_config(PipelineConfig.preset("default"))
OFF = Pipeline.from_config(PipelineConfig.preset("off"))


@pytest.fixture
def store(any_store):
    """Every test here that takes ``store`` runs over each backend (tests/conftest.py)."""
    return any_store


def add_turn(st, sid, i, *, tools=1, size=200):
    dag.append(st, sid, "user", f"request {i}")
    uses = [ToolUseBlock(id=f"t{i}_{k}", name="Read", input={"p": f"f{k}"}) for k in range(tools)]
    a = dag.append(st, sid, "assistant", [TextBlock(text=f"answer {i}"), *uses])
    for k in range(tools):
        dag.append(
            st,
            sid,
            "tool",
            " ".join(f"w{j}" for j in range(size // 4)),
            name="Read",
            input={"p": f"f{k}"},
            caller=a.id,
            metadata={"tool_use_id": f"t{i}_{k}"},
        )
    return a


def count_rows(st):
    return sum(len(st.session_commits(s.id)) for s in st.list_sessions())


def test_one_public_way_to_make_a_commit():
    assert "make_commit" in ctxrules.__all__
    assert not {"ensure_latest_commit", "generate_commit", "derive_commit"} & set(ctxrules.__all__)


def test_ensure_returns_the_stored_commit_for_an_unchanged_head(store):
    s = dag.create_session(store)
    a = add_turn(store, s.id, 0)
    c1 = ctxrules.make_commit(s.id, now=100.0, store=store, config=DEFAULT)
    c2 = ctxrules.make_commit(s.id, now=999.0, store=store, config=DEFAULT)
    assert c1.id == c2.id and c1.head_node_id == a.id and count_rows(store) == 1
    assert [it.role for it in c1.items] == ["user", "assistant", "tool"]


def test_new_turn_builds_on_the_nearest_ancestor_commit(store):
    s = dag.create_session(store)
    add_turn(store, s.id, 0)
    c1 = ctxrules.make_commit(s.id, now=1.0, store=store, config=DEFAULT)
    add_turn(store, s.id, 1)
    c2 = ctxrules.make_commit(s.id, now=2.0, store=store, config=DEFAULT)
    assert c2.parent_ids == (c1.id,)
    assert c2.items[: len(c1.items)] == c1.items  # unchanged items are shared as they are
    assert len(c2.items) == 6


def test_tool_results_added_after_the_commit_are_picked_up(store):
    s = dag.create_session(store)
    dag.append(store, s.id, "user", "go")
    a = dag.append(store, s.id, "assistant", [ToolUseBlock(id="t1", name="Bash", input={})])
    c1 = ctxrules.make_commit(s.id, now=1.0, store=store, config=DEFAULT)
    dag.append(
        store, s.id, "tool", "done", name="Bash", caller=a.id, metadata={"tool_use_id": "t1"}
    )
    c2 = ctxrules.make_commit(s.id, now=2.0, store=store, config=DEFAULT)
    assert c2.id != c1.id and c2.parent_ids == (c1.id,)
    assert [it.role for it in c2.items] == ["user", "assistant", "tool"]
    assert c2.items[2].tool_use_id == "t1" and c2.items[2].caller == a.id


def test_a_branch_builds_on_the_fork_point_not_on_the_other_branch(store):
    s = dag.create_session(store)
    add_turn(store, s.id, 0)
    base = ctxrules.make_commit(s.id, now=1.0, store=store, config=DEFAULT)
    u = dag.append(store, s.id, "user", "left")
    left_a = dag.append(store, s.id, "assistant", "left answer")
    left = ctxrules.make_commit(s.id, now=2.0, store=store, config=DEFAULT)
    right_u = dag.edit(store, s.id, u.id, output="right")
    dag.append(store, s.id, "assistant", "right answer")
    right = ctxrules.make_commit(s.id, now=3.0, store=store, config=DEFAULT)
    assert left.parent_ids == (base.id,) and right.parent_ids == (base.id,)
    texts = [it.rendered for it in right.items]
    assert (
        "right" in texts
        and "left" not in texts
        and right_u.id in {it.source_node_id for it in right.items}
    )
    # checkout back to the left head finds its commit again without generating
    dag.checkout(store, s.id, left_a.id)
    rows = count_rows(store)
    again = ctxrules.make_commit(s.id, now=4.0, store=store, config=DEFAULT)
    assert again.id == left.id and count_rows(store) == rows


def test_a_new_commit_counts_only_its_new_items(store):
    import dataclasses

    from ctxrules.tokenizers import get_tokenizer

    # No rules: nothing older changes, so nothing older may be counted again.
    s = dag.create_session(store)
    for i in range(20):
        add_turn(store, s.id, i)
    ctxrules.make_commit(s.id, now=1.0, store=store, config=OFF)
    real = get_tokenizer(OFF.encoding)
    counted: list[str] = []

    class Recording:
        def count(self, text):
            counted.append(text)
            return real.count(text)

        def count_batch(self, texts):
            counted.extend(texts)
            return real.count_batch(texts)

    recording = dataclasses.replace(OFF, tokenizer=Recording())  # the same rule set
    add_turn(store, s.id, 20)
    c = ctxrules.make_commit(s.id, now=2.0, store=store, config=recording)
    assert len(c.items) == 63
    # the new turn: request, answer, the result and its arguments; nothing older
    assert sorted(counted) == sorted(
        ["request 20", "answer 20", c.items[-1].rendered, '{"p":"f0"}']
    )


def test_saved_commits_cannot_be_rewritten(tmp_path):
    # The Protocol has no way to rewrite a row; SQLite also refuses it in the file itself
    # (its trigger's error reaches the caller as a StoreError, as every SQLite error).
    store = open_store(tmp_path / "s")
    s = dag.create_session(store)
    add_turn(store, s.id, 0)
    c = ctxrules.make_commit(s.id, now=1.0, store=store, config=DEFAULT)
    for sql in ("UPDATE commits SET total_tokens = 0", "DELETE FROM commits"):
        with pytest.raises(StoreError, match="never rewritten"):
            with store.transaction() as conn:
                conn.execute(sql)
    assert load_commit(c.id, store=store).total_tokens == c.total_tokens
    store.close()


def test_ids_are_content_addressed_across_stores_and_backends(tmp_path):
    ids = []
    for name in ("a", "b", "memory:"):
        st = open_store(tmp_path / name if name != "memory:" else name)
        s = st.create_session(session_id="same")
        for i in range(3):
            dag.append(st, s.id, "user", f"u{i}", node_id=f"u{i}", created_at=float(i))
            dag.append(st, s.id, "assistant", f"a{i}", node_id=f"a{i}", created_at=float(i))
            ids.append(
                (
                    name,
                    ctxrules.make_commit(
                        s.id, now=10.0 + i, store=st, config=DEFAULT, rerun=True
                    ).id,
                )
            )
        st.close()
    a = [i for n, i in ids if n == "a"]
    b = [i for n, i in ids if n == "b"]
    m = [i for n, i in ids if n == "memory:"]
    assert a == b == m and len(set(a)) == 3


def test_loading_replays_deltas_to_the_same_commit(store):
    s = dag.create_session(store)
    made = []
    aggressive = Pipeline.from_config(EVERY_RULE.with_params("summarize", threshold_tokens=800))
    for i in range(12):
        add_turn(store, s.id, i, tools=2, size=1500)
        made.append(ctxrules.make_commit(s.id, now=600.0 * i, store=store, config=aggressive))
    assert any(it.state == "summarized" for it in made[-1].items)
    persist.clear_cache()
    for c in (made[-1], made[4]):
        assert load_commit(c.id, store=store) == c
    # the running summary is stored in the delta that wrote it, not again in every row
    again = ctxrules.make_commit(s.id, now=1e9, store=store, config=aggressive, rerun=True)
    assert again.parent_ids == (made[-1].id,) and again.summary == made[-1].summary != ""
    row = store.commit_chain(again.id)[-1]
    assert again.summary.encode() not in row.meta + row.delta
    persist.clear_cache()
    assert load_commit(again.id, store=store) == again


def test_a_store_kept_longer_loads_each_commit_once(store):
    """``persist.keep``: a store told to keep more returns the same commit object when
    asked again (the core's render cache finds items by identity); the default keeps
    ``CACHE_SIZE``."""
    s = dag.create_session(store)
    made = []
    for i in range(persist.CACHE_SIZE + 4):
        add_turn(store, s.id, i)
        made.append(ctxrules.make_commit(s.id, now=float(i), store=store, config=DEFAULT))
    persist.clear_cache()
    first = [load_commit(c.id, store=store) for c in made]
    again = [load_commit(c.id, store=store) for c in made]
    assert sum(a is b for a, b in zip(first, again)) < len(made)  # the oldest were dropped
    persist.keep(store, len(made))
    first = [load_commit(c.id, store=store) for c in made]
    again = [load_commit(c.id, store=store) for c in made]
    assert all(a is b for a, b in zip(first, again)) and first == made
    persist.keep(store, 2)  # shrinking drops the oldest at once
    assert load_commit(made[0].id, store=store) is not first[0]
    with pytest.raises(ValidationError):
        persist.keep(store, -1)
    persist.keep(store, persist.CACHE_SIZE)


def test_storage_grows_with_changed_items_not_with_length(store):
    s = dag.create_session(store)
    sizes = []
    for i in range(150):
        add_turn(store, s.id, i)
        c = ctxrules.make_commit(s.id, now=float(i), store=store, config=DEFAULT)
        sizes.append(persist.stored_bytes(store, c.id))
    # the 150th commit has 50x the items of the 3rd but stores about the same delta
    assert max(sizes[100:]) < 2 * max(sizes[2:10])


def test_a_fold_stores_the_absorbed_ids_not_the_absorbed_items(store):
    s = dag.create_session(store)
    only_summarize = Pipeline.of([Summarize(threshold_tokens=3000)])
    prev = None
    for i in range(12):
        add_turn(store, s.id, i, tools=2, size=1500)
        c = ctxrules.make_commit(s.id, now=float(i), store=store, config=only_summarize)
        before = (
            {it.source_node_id for it in prev.items if it.state == "summarized"} if prev else set()
        )
        absorbed = [
            it for it in c.items if it.state == "summarized" and it.source_node_id not in before
        ]
        if absorbed:
            break
        prev = c
    assert absorbed and prev is not None
    summary = next(
        it
        for it in c.items
        if it.state == "summary" and it.source_node_id == absorbed[0].merged_into
    )
    absorbed_bytes = sum(len(it.rendered.encode()) for it in absorbed)
    # The fold commit appended a turn like its parent did, plus the summary and the fold.
    fold_cost = (
        persist.stored_bytes(store, c.id)
        - len(summary.rendered.encode())
        - persist.stored_bytes(store, prev.id)
    )
    assert absorbed_bytes > 3000
    assert fold_cost < absorbed_bytes / 4
    persist.clear_cache()
    assert load_commit(c.id, store=store) == c


def test_deltas_written_before_compact_folds_still_replay():
    item = ContextItem(source_node_id="n1", role="user", rendered="hi", tokens=1)
    old = msgspec.msgpack.encode(([0], [(0, item)]))
    items = []
    _delta.replay(items, old)
    assert items == [item]


def test_changing_a_parameter_changes_rules_version_and_regenerates(store):
    s = dag.create_session(store)
    add_turn(store, s.id, 0)
    c1 = ctxrules.make_commit(s.id, now=1.0, store=store, config=DEFAULT)
    other = PipelineConfig.preset("default").with_params("tool_aging", tail_turns=5)
    c2 = ctxrules.make_commit(s.id, now=2.0, store=store, config=other)
    assert c1.rules_version != c2.rules_version and c2.id != c1.id
    assert c2.parent_ids == ()  # a rule set starts its own chain; c1 is left as it was
    assert load_commit(c1.id, store=store) == c1


def test_a_rule_set_never_inherits_another_rule_sets_compression(store):
    s = dag.create_session(store)
    for i in range(6):
        add_turn(store, s.id, i)
    squeezed = ctxrules.make_commit(s.id, now=1.0, store=store, config=EVERY_RULE)
    plain = ctxrules.make_commit(s.id, now=1.0, store=store, config=PipelineConfig.preset("off"))
    assert any(it.state == "aged" for it in squeezed.items)
    assert {it.state for it in plain.items} == {"full"}


def test_empty_session_is_a_clear_error(store):
    s = dag.create_session(store)
    with pytest.raises(DagError, match="no nodes"):
        ctxrules.make_commit(s.id, now=1.0, store=store, config=DEFAULT)


def test_diff_reports_added_changed_and_the_shared_prefix(store):
    s = dag.create_session(store)
    cfg = PipelineConfig.preset("default").with_params(
        "tool_aging", tail_turns=1, step_turns=1, cache_aware=False
    )
    add_turn(store, s.id, 0)
    c1 = ctxrules.make_commit(s.id, now=1.0, store=store, config=cfg)
    a2 = add_turn(store, s.id, 1)
    c2 = ctxrules.make_commit(s.id, now=2.0, store=store, config=cfg)
    d = diff_commits(c1, c2)
    new_ids = {it.source_node_id for it in c2.items} - {it.source_node_id for it in c1.items}
    assert set(d.added) == new_ids and a2.id in d.added and d.removed == ()
    assert d.changed == ((c1.items[2].source_node_id, "full", "aged"),)
    # user and assistant of turn 0 are shared; the aged tool result ends the prefix
    assert d.prefix_items == 2
    assert d.prefix_tokens == c2.items[0].tokens + c2.items[1].tokens


def test_default_store_from_the_environment_is_opened_and_closed(store_location, monkeypatch):
    monkeypatch.setenv("CTXRULES_STORE", store_location("env-store"))
    st = open_store()
    s = dag.create_session(st)
    add_turn(st, s.id, 0)
    st.close()
    c = ctxrules.make_commit(s.id, now=1.0, config=DEFAULT)
    persist.clear_cache()
    assert load_commit(c.id) == c
    assert ctxrules.make_commit(s.id, now=2.0, config=DEFAULT, rerun=True).parent_ids == (c.id,)
