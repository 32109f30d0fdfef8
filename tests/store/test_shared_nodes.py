"""``MemoryStore(shared_nodes=True)``: every read answers what a fresh-decoding store
answers, the same ``Node`` object again on a later read, and never a node whose row was
undone or replaced."""

from __future__ import annotations

import pytest

from ctxrules import dag
from ctxrules.model import Node, ToolUseBlock
from ctxrules.store import MemoryStore
from ctxrules.store.memory import forget


def _fill(store: MemoryStore) -> list[str]:
    """A session with answers, tool calls under them and a fork; its node ids."""
    store.create_session(session_id="s", metadata={"model": "m"})
    ids = []
    for turn in range(4):
        ids.append(dag.append(store, "s", "user", f"question {turn}", node_id=f"u{turn}", created_at=1.0).id)
        answer = dag.append(
            store,
            "s",
            "assistant",
            [ToolUseBlock(id=f"t{turn}", name="read", input={"path": f"f{turn}"})],
            node_id=f"a{turn}",
            created_at=2.0,
            metadata={"usage": {"input_tokens": 10 * turn}},
        )
        ids.append(answer.id)
        call = dag.append(
            store,
            "s",
            "tool",
            f"contents {turn}",
            name="read",
            caller=answer.id,
            node_id=f"r{turn}",
            created_at=3.0,
            metadata={"tool_use_id": f"t{turn}"},
        )
        ids.append(call.id)
    store.create_session(session_id="f", base_session="s", base_node="a1")
    ids.append(dag.append(store, "f", "user", "forked", predecessor="a1", node_id="fu", created_at=4.0).id)
    return ids


def _reads(store: MemoryStore, ids: list[str]) -> list[object]:
    out: list[object] = [store.get_node(i) for i in ids]
    for sid in ("s", "f"):
        out.append(store.nodes(sid))
        out.append(store.nodes(sid, inherited=True))
        out.append(list(store.iter_nodes(sid)))
        out.append(store.calls_since(sid, -1))
        out.append(store.calls_since(sid, 4))
        for i in ids:
            out.append(store.children(i, session_id=sid, edge="caller"))
            out.append(store.children(i, session_id=sid, edge="predecessor"))
    return out


def test_every_read_equals_a_fresh_decoding_store():
    fresh, shared = MemoryStore(), MemoryStore(shared_nodes=True)
    ids = _fill(fresh)
    assert _fill(shared) == ids
    first = _reads(shared, ids)
    assert first == _reads(fresh, ids)
    assert _reads(shared, ids) == first  # read again: from what was kept


@pytest.mark.parametrize("shared", [False, True])
def test_a_later_read_is_the_same_object_only_when_shared(shared):
    store = MemoryStore(shared_nodes=shared)
    _fill(store)
    a, b = store.get_node("a2"), store.get_node("a2")
    assert a == b
    assert (a is b) is shared
    # Every way in reads the same kept node.
    assert (store.children("u2", session_id="s", edge="predecessor")[0] is a) is shared
    assert (next(n for n in store.nodes("s") if n.id == "a2") is a) is shared


def test_a_node_undone_is_not_read_from_what_was_kept():
    store = MemoryStore(shared_nodes=True)
    _fill(store)
    with pytest.raises(RuntimeError), store.transaction():
        dag.append(store, "s", "user", "first try", node_id="late", created_at=5.0)
        assert store.get_node("late").output == "first try"  # read, so kept
        raise RuntimeError("the transaction fails: the append is undone")
    assert "late" not in {n.id for n in store.nodes("s")}
    again = dag.append(store, "s", "user", "second try", node_id="late", created_at=5.0)
    assert store.get_node("late").output == "second try" == again.output
    assert store.get_node("late").seq == again.seq


def test_a_handle_without_sharing_on_the_same_data_decodes_its_own():
    shared = MemoryStore("shared-nodes-test", shared_nodes=True)
    try:
        _fill(shared)
        kept = shared.get_node("u1")
        other = MemoryStore("shared-nodes-test")
        assert other.get_node("u1") == kept
        assert other.get_node("u1") is not kept
    finally:
        forget("shared-nodes-test")


def test_reads_return_nodes():
    store = MemoryStore(shared_nodes=True)
    _fill(store)
    assert all(isinstance(n, Node) for n in store.nodes("f", inherited=True))
