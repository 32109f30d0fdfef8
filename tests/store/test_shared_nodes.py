"""``MemoryStore(shared_nodes=SharedNodes())``: every read answers what a fresh-decoding
store answers, the same ``Node`` object again on a later read (through any handle
sharing it), never a node whose row was undone or stored differently; an append reuses
another handle's body only for the very same node."""

from __future__ import annotations

import pytest

from ctxrules import dag
from ctxrules.errors import ValidationError
from ctxrules.limits import MAX_NESTING
from ctxrules.model import Node, ToolUseBlock
from ctxrules.store import MemoryStore
from ctxrules.store.memory import SharedNodes, forget


def _fill(store: MemoryStore) -> list[str]:
    """A session with answers, tool calls under them and a fork; its node ids."""
    store.create_session(session_id="s", metadata={"model": "m"})
    ids = []
    for turn in range(4):
        ids.append(
            dag.append(
                store, "s", "user", f"question {turn}", node_id=f"u{turn}", created_at=1.0
            ).id
        )
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
    ids.append(
        dag.append(store, "f", "user", "forked", predecessor="a1", node_id="fu", created_at=4.0).id
    )
    return ids


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


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
    fresh, shared = MemoryStore(), MemoryStore(shared_nodes=SharedNodes())
    ids = _fill(fresh)
    assert _fill(shared) == ids
    first = _reads(shared, ids)
    assert first == _reads(fresh, ids)
    assert _reads(shared, ids) == first  # read again: from what was kept


@pytest.mark.parametrize("shared", [False, True])
def test_a_later_read_is_the_same_object_only_when_shared(shared):
    store = MemoryStore(shared_nodes=SharedNodes() if shared else None)
    _fill(store)
    a, b = store.get_node("a2"), store.get_node("a2")
    assert a == b
    assert (a is b) is shared
    # Every way in reads the same kept node.
    assert (store.children("u2", session_id="s", edge="predecessor")[0] is a) is shared
    assert (next(n for n in store.nodes("s") if n.id == "a2") is a) is shared


def test_a_node_undone_is_not_read_from_what_was_kept():
    store = MemoryStore(shared_nodes=SharedNodes())
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
    shared = MemoryStore("shared-nodes-test", shared_nodes=SharedNodes())
    try:
        _fill(shared)
        kept = shared.get_node("u1")
        other = MemoryStore("shared-nodes-test")
        assert other.get_node("u1") == kept
        assert other.get_node("u1") is not kept
    finally:
        forget("shared-nodes-test")


def test_two_handles_share_what_they_store_alike_and_only_that():
    shared = SharedNodes()
    one, two, fresh = (MemoryStore(shared_nodes=s) for s in (shared, shared, None))
    ids = _fill(one)
    assert _fill(two) == _fill(fresh) == ids
    assert _reads(two, ids) == _reads(fresh, ids) == _reads(one, ids)
    assert two.get_node("a3") is one.get_node("a3")
    # The same node appended to one and then the other (as a replay does): one body.
    same = Node(id="n", seq=0, created_at=5.0, role="user", output="next", metadata={"k": [1]})
    one.append("s", same, at_head=True)
    two.append("s", same, at_head=True)
    assert one._d.nodes["n"].body is two._d.nodes["n"].body
    # Another seq in the second store (a node the first does not hold): each its own.
    dag.append(two, "s", "user", "only in two", node_id="x", created_at=6.0)
    late = Node(id="late", seq=0, created_at=7.0, role="user", output="late")
    a, b = one.append("s", late, at_head=True), two.append("s", late, at_head=True)
    assert b.seq == a.seq + 1
    assert (one.get_node("late"), two.get_node("late")) == (a, b)
    assert (fresh.append("s", same, at_head=True), fresh.get_node("n")) == (
        one.get_node("n"),
        two.get_node("n"),
    )


def test_equal_values_of_another_type_are_encoded_again():
    shared = SharedNodes()
    one, two = MemoryStore(shared_nodes=shared), MemoryStore(shared_nodes=shared)
    for st in (one, two):
        st.create_session(session_id="s")
    dag.append(one, "s", "user", "q", node_id="n", created_at=1.0, metadata={"flag": 1})
    dag.append(two, "s", "user", "q", node_id="n", created_at=1.0, metadata={"flag": True})
    assert one.get_node("n").metadata == {"flag": 1}
    assert two.get_node("n").metadata["flag"] is True  # not the first store's body
    dag.append(one, "s", "user", "r", node_id="m", created_at=1)  # an int time
    dag.append(two, "s", "user", "r", node_id="m", created_at=1.0)
    assert one._d.nodes["m"].body != two._d.nodes["m"].body  # "1" and "1.0"


def test_a_node_refused_is_refused_through_every_handle():
    shared = SharedNodes()
    one, two = MemoryStore(shared_nodes=shared), MemoryStore(shared_nodes=shared)
    bad = Node(
        id="n", seq=0, created_at=1.0, role="user", metadata={"deep": _deep(MAX_NESTING + 1)}
    )
    for st in (one, two):
        st.create_session(session_id="s")
        with pytest.raises(ValidationError):
            st.append("s", bad, at_head=True)
        assert st.nodes("s") == []


def test_reads_return_nodes():
    store = MemoryStore(shared_nodes=SharedNodes())
    _fill(store)
    assert all(isinstance(n, Node) for n in store.nodes("f", inherited=True))
