"""DAG operations: append, retry, edit, checkout, fork, the branch path and the
agent-run guard, plus property tests of the graph invariants after random operations."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxrules import dag
from ctxrules.errors import AgentRunActiveError, DagError, NotFoundError, ValidationError
from ctxrules.model import TextBlock, ToolUseBlock
from ctxrules.store import open_store


@pytest.fixture
def store(any_store):
    """Every test here runs over each backend (tests/conftest.py)."""
    return any_store


def conversation(store):
    """user → assistant(2 tool calls) → user → assistant; returns (session, nodes)."""
    s = dag.create_session(store)
    u1 = dag.append(store, s.id, "user", "list files")
    a1 = dag.append(
        store,
        s.id,
        "assistant",
        [TextBlock(text="ok"), ToolUseBlock(id="t1", name="ls"), ToolUseBlock(id="t2", name="pwd")],
    )
    t1 = dag.append(
        store, s.id, "tool", "a b", name="ls", caller=a1.id, metadata={"tool_use_id": "t1"}
    )
    t2 = dag.append(
        store, s.id, "tool", "/x", name="pwd", caller=a1.id, metadata={"tool_use_id": "t2"}
    )
    u2 = dag.append(store, s.id, "user", "thanks")
    a2 = dag.append(store, s.id, "assistant", "bye")
    return s, [u1, a1, t1, t2, u2, a2]


def test_append_chains_under_head_and_tools_hang_off_their_caller(store):
    s, (u1, a1, t1, _t2, u2, a2) = conversation(store)
    assert a1.predecessor == u1.id and u2.predecessor == a1.id  # tools do not move HEAD
    assert t1.caller == a1.id and t1.predecessor is None
    assert store.get_session(s.id).head == a2.id
    assert [n.seq for n in store.nodes(s.id)] == [1, 2, 3, 4, 5, 6]


def test_branch_path_puts_each_call_right_after_its_caller(store):
    s, nodes = conversation(store)
    assert [n.id for n in dag.branch_path(store, s.id)] == [n.id for n in nodes]


def test_retry_and_edit_make_siblings_and_checkout_switches_between_them(store):
    s, (_u1, _a1, _t1, _t2, u2, a2) = conversation(store)
    before = len(store.nodes(s.id))
    r = dag.retry(store, s.id, a2.id)
    assert (r.output, r.predecessor, r.role) == (a2.output, a2.predecessor, a2.role)
    e = dag.edit(store, s.id, u2.id, output="thanks a lot")
    assert e.predecessor == u2.predecessor and e.output == "thanks a lot"
    assert store.get_session(s.id).head == e.id
    assert dag.siblings(store, s.id, a2.id) == (1, 2)
    assert dag.siblings(store, s.id, r.id) == (2, 2)
    assert dag.siblings(store, s.id, e.id) == (2, 2)
    dag.checkout(store, s.id, u2.id, to_leaf=True)  # back to the original branch's end
    assert store.get_session(s.id).head == r.id  # the newest answer under u2
    dag.checkout(store, s.id, a2.id)
    assert len(store.nodes(s.id)) == before + 2  # checkout appended nothing
    assert dag.branch_path(store, s.id)[-1].id == a2.id
    # The originals are untouched.
    assert store.get_node(u2.id).output == "thanks"


def test_both_edges_at_once_are_refused_and_nothing_is_written(store):
    s, (u1, a1, *_rest) = conversation(store)
    before = store.nodes(s.id)
    with pytest.raises(ValidationError, match="both"):
        dag.append(store, s.id, "tool", "x", caller=a1.id, predecessor=u1.id)
    assert store.nodes(s.id) == before


def test_unknown_session_or_node_is_named(store):
    s, nodes = conversation(store)
    with pytest.raises(NotFoundError, match="no session 's_nope'"):
        dag.checkout(store, "s_nope", nodes[0].id)
    with pytest.raises(NotFoundError, match="no node 'n_nope'"):
        dag.checkout(store, s.id, "n_nope")
    with pytest.raises(NotFoundError, match="no session 's_nope'"):
        dag.retry(store, "s_nope", nodes[0].id)


def test_edit_without_a_change_is_refused(store):
    s, nodes = conversation(store)
    with pytest.raises(DagError, match="retry"):
        dag.edit(store, s.id, nodes[0].id, output=nodes[0].output)


def test_retried_tool_call_replaces_the_shown_variant_only(store):
    s, (_u1, a1, t1, t2, _u2, a2) = conversation(store)
    r = dag.retry(store, s.id, t1.id)
    assert r.caller == a1.id
    path = [n.id for n in dag.branch_path(store, s.id)]
    assert r.id in path and t1.id not in path and path.index(r.id) < path.index(t2.id)
    assert dag.siblings(store, s.id, t1.id) == (1, 2)
    dag.checkout(store, s.id, t1.id)
    path = [n.id for n in dag.branch_path(store, s.id)]
    assert t1.id in path and r.id not in path
    assert store.get_session(s.id).head == a2.id  # HEAD stays: a1 is on the branch


def test_fork_shares_history_without_copying_and_diverges(store):
    s, (u1, a1, t1, t2, _u2, a2) = conversation(store)
    f = dag.fork(store, s.id, a1.id)
    assert f.head == a1.id and f.calls == 0
    assert [n.id for n in dag.branch_path(store, f.id)] == [u1.id, a1.id, t1.id, t2.id]
    mine = dag.append(store, f.id, "user", "fork only")
    theirs = dag.append(store, s.id, "user", "base only")
    assert mine.predecessor == a1.id and mine.session_id == f.id
    assert mine.seq > a2.seq  # seq continues after the inherited nodes
    assert not store.is_visible(s.id, mine.id)
    assert not store.is_visible(f.id, theirs.id)
    assert store.get_session(f.id).calls == 1
    assert len(store.nodes(s.id)) == 7  # nothing was copied into or out of the base
    with pytest.raises(DagError):
        dag.checkout(store, f.id, theirs.id)


def test_fork_shows_the_tool_call_variants_its_base_showed(store):
    s, (_u1, _a1, t1, _t2, _u2, _a2) = conversation(store)
    r = dag.retry(store, s.id, t1.id)
    dag.checkout(store, s.id, t1.id)  # the base shows the original result again
    f = dag.fork(store, s.id)
    assert [n.id for n in dag.branch_path(store, f.id)] == [
        n.id for n in dag.branch_path(store, s.id)
    ]
    assert t1.id in [n.id for n in dag.branch_path(store, f.id)]
    dag.checkout(store, f.id, r.id)  # choosing in the fork leaves the base alone
    assert r.id in [n.id for n in dag.branch_path(store, f.id)]
    assert t1.id in [n.id for n in dag.branch_path(store, s.id)]


def test_nested_branch_path_includes_sub_conversations(store):
    s = dag.create_session(store)
    dag.append(store, s.id, "user", "go")
    a = dag.append(store, s.id, "assistant", [ToolUseBlock(id="k", name="Task")])
    task = dag.append(store, s.id, "tool", "done", name="Task", caller=a.id)
    sub1 = dag.append(store, s.id, "user", "sub prompt", caller=task.id)
    sub2 = dag.append(store, s.id, "assistant", "sub answer", predecessor=sub1.id)
    dag.checkout(store, s.id, a.id)
    flat = [n.id for n in dag.branch_path(store, s.id)]
    nested = [n.id for n in dag.branch_path(store, s.id, nested=True)]
    assert sub1.id not in flat and flat[-1] == task.id
    assert nested[-3:] == [task.id, sub1.id, sub2.id]


def test_agent_run_guard_holds_across_processes(tmp_path):
    path = tmp_path / "store"
    st = open_store(path)
    s, (u1, *_rest) = conversation(st)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from ctxrules import dag
            from ctxrules.store import open_store
            st = open_store({str(path)!r})
            with dag.agent_run(st, {s.id!r}, ttl=5):
                print("running", flush=True)
                sys.stdin.readline()
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "running"
        with pytest.raises(AgentRunActiveError, match="active"):
            dag.edit(st, s.id, u1.id, output="changed")
        with pytest.raises(AgentRunActiveError):
            dag.retry(st, s.id, u1.id)
        dag.checkout(st, s.id, u1.id)  # allowed: display only
        assert st.get_session(s.id).head == u1.id
    finally:
        child.stdin.write("\n")
        child.stdin.close()
        child.wait(timeout=30)
    assert st.active_run(s.id) is None
    dag.retry(st, s.id, u1.id)  # allowed again once the run ended
    st.close()


# -- property tests ------------------------------------------------------------------

_examples = itertools.count()
OPS = st.lists(
    st.tuples(
        st.sampled_from(["append", "tool", "retry", "edit", "checkout", "fork"]),
        st.integers(min_value=0, max_value=10_000),
    ),
    min_size=1,
    max_size=25,
)


def check_invariants(store, sessions, snapshots):
    for sid in sessions:
        info = store.get_session(sid)
        own = store.nodes(sid)
        # seq: strictly increasing, contiguous from the fork point, never reused.
        assert [n.seq for n in own] == list(range(info.base_seq + 1, info.base_seq + 1 + len(own)))
        for n in store.nodes(sid, inherited=True):
            assert not (n.predecessor and n.caller)
            for edge in (n.predecessor, n.caller):
                if edge is not None:
                    assert store.is_visible(sid, edge)
                    assert store.get_node(edge).seq < n.seq
        path = dag.branch_path(store, sid)
        if info.head is not None:
            assert store.is_visible(sid, info.head)
            conv = [n for n in path if n.caller is None]
            assert conv[-1].id == info.head
            for prev, nxt in itertools.pairwise(conv):
                assert nxt.predecessor == prev.id
        for n in path:
            if n.caller is not None:
                assert n.caller in {p.id for p in path}
    # Nothing stored ever changes (append-only).
    for nid, body in snapshots.items():
        assert msgspec.json.encode(store.get_node(nid)) == body


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=OPS)
def test_invariants_hold_after_any_sequence_of_operations(make_store, ops):
    store = make_store(f"prop{next(_examples)}")  # each backend, a fresh store per example
    try:
        sessions = [dag.create_session(store).id]
        snapshots: dict[str, bytes] = {}
        for kind, pick in ops:
            sid = sessions[pick % len(sessions)]
            visible = store.nodes(sid, inherited=True)
            conv = [n for n in visible if n.caller is None]
            target = visible[pick % len(visible)] if visible else None
            if kind == "append" or target is None:
                role = "user" if pick % 2 else "assistant"
                made = dag.append(store, sid, role, f"m{pick}")
            elif kind == "tool" and conv:
                made = dag.append(
                    store, sid, "tool", f"r{pick}", name="t", caller=conv[pick % len(conv)].id
                )
            elif kind == "retry":
                made = dag.retry(store, sid, target.id)
                assert (made.output, made.input, made.name) == (
                    target.output,
                    target.input,
                    target.name,
                )
                assert (made.predecessor, made.caller) == (target.predecessor, target.caller)
            elif kind == "edit":
                made = dag.edit(store, sid, target.id, output=f"{target.output}+{pick}")
                assert made.output != target.output
                assert (made.predecessor, made.caller) == (target.predecessor, target.caller)
            elif kind == "checkout":
                count = len(store.nodes(sid))
                dag.checkout(store, sid, target.id)
                assert len(store.nodes(sid)) == count  # display only: nothing appended
                pos, total = dag.siblings(store, sid, target.id)
                assert 1 <= pos <= total
                continue
            elif kind == "fork":
                at = conv[pick % len(conv)].id if conv else None
                forked = dag.fork(store, sid, at)
                assert (forked.head, forked.calls) == (at, 0)  # shares, copies nothing
                sessions.append(forked.id)
                continue
            else:
                continue
            snapshots[made.id] = msgspec.json.encode(made)
        check_invariants(store, sessions, snapshots)
    finally:
        store.close()
