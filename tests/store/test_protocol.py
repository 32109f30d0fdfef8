"""The store Protocols are all their callers need, on every backend: the DAG operations,
the importers, commit generation and the CLI run over the SQLite, the in-memory and
the PostgreSQL store seen through a wrapper that forwards only the Protocol's members
(conftest.py), and the backends give the same answers, commit ids included."""

from __future__ import annotations

import json

import pytest

import ctxrules.cli._store
import ctxrules.store
from ctxrules import dag
from ctxrules.cli import main
from ctxrules.commit import load_commit, make_commit, persist
from ctxrules.errors import NotFoundError
from ctxrules.importers import import_paths
from ctxrules.model import ToolUseBlock
from ctxrules.store import CommitRow, CommitStore, MemoryStore, Store, open_store

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def test_both_backends_implement_both_protocols(any_store, backend):
    assert isinstance(any_store, Store) and isinstance(any_store, CommitStore)
    assert any_store.location.startswith("memory:") == (backend == "memory")
    with pytest.raises(AttributeError, match="schema_versions"):
        any_store.schema_versions()
    with pytest.raises(TypeError, match="sesion_id"):
        any_store.create_session(sesion_id="typo")


def test_dag_operations_and_import_use_only_the_protocol(any_store, corpus):
    st = any_store
    s = dag.create_session(st)
    u = dag.append(st, s.id, "user", "hi")
    a = dag.append(st, s.id, "assistant", [ToolUseBlock(id="t", name="ls")])
    t = dag.append(st, s.id, "tool", "x", name="ls", caller=a.id)
    dag.retry(st, s.id, t.id)
    e = dag.edit(st, s.id, u.id, output="hello")
    dag.checkout(st, s.id, u.id, to_leaf=True)
    assert dag.siblings(st, s.id, e.id) == (2, 2)
    f = dag.fork(st, s.id, a.id)
    assert [n.id for n in dag.branch_path(st, f.id)][:2] == [u.id, a.id]
    with dag.agent_run(st, s.id, ttl=5):
        pass
    (res,) = import_paths(st, [str(corpus / CC)])
    assert dag.branch_path(st, res.id, nested=True)
    assert {"append", "transaction", "create_session", "is_visible"} <= st.used


def test_commits_are_the_same_on_every_backend(tmp_path, corpus, protocol_only, pg_server):
    """Import, commit turn by turn, load back: SQLite, PostgreSQL and the memory store
    agree exactly."""
    made = {}
    pg = pg_server.new_store()
    for st in (
        protocol_only(open_store(tmp_path / "s")),
        protocol_only(MemoryStore()),
        protocol_only(open_store(pg)),
    ):
        (res,) = import_paths(st, [str(corpus / CC)])
        heads = [c for c in dag.branch_path(st, res.id) if c.caller is None]
        commits = [make_commit(res.id, h.id, now=h.created_at, store=st) for h in heads[::3]]
        commits.append(make_commit(res.id, now=heads[-1].created_at + 7200, store=st, rerun=True))
        persist.clear_cache(st)
        assert [load_commit(c.id, store=st) for c in commits] == commits
        assert {"put_commit", "latest_commit", "commit_chain"} <= st.used
        made[type(st._inner).__name__] = commits
        st.close()
    assert made["SQLiteStore"] == made["MemoryStore"] == made["PostgresStore"]
    assert len(made["MemoryStore"]) > 4
    pg_server.drop_store(pg)


def test_a_commit_cached_from_one_store_is_not_served_by_another(make_store):
    a, b = make_store("a"), make_store("b")
    for st in (a, b):
        s = st.create_session(session_id="same")
        dag.append(st, s.id, "user", "hello", node_id="u1", created_at=1.0)
    made = make_commit("same", now=5.0, store=a)  # saved and cached for a
    assert load_commit(made.id, store=a) == made
    with pytest.raises(NotFoundError, match=made.id):
        load_commit(made.id, store=b)
    # b makes the same commit (content ids) and then serves its own copy
    assert make_commit("same", now=5.0, store=b).id == made.id


def row(cid: str, parent: str | None = None, head: str = "h", created: float = 1.0) -> CommitRow:
    return CommitRow(
        id=cid,
        session_id="s",
        parent_id=parent,
        head_node_id=head,
        rules_version="rv",
        created_at=created,
        total_tokens=1,
        n_items=1,
        meta=b"\x80",
        delta=cid.encode(),
    )


def test_commit_rows_chain_order_and_compare_and_set(any_store):
    st = any_store
    assert st.latest_commit("s", "h", "rv") is None
    assert st.put_commit(row("c1"), if_latest=None) == "c1"
    assert st.put_commit(row("c2", "c1"), if_latest="c1") == "c2"
    # a writer that planned before c2 was stored loses, and is told who won
    assert st.put_commit(row("c3", "c1"), if_latest="c1") == "c2"
    assert st.put_commit(row("c4", "c2", head="other")) == "c4"  # no compare: just stored
    assert st.latest_commit("s", "h", "rv") == "c2"
    assert st.latest_commit("s", "h", "other-rules") is None
    assert [r.id for r in st.commit_chain("c4")] == ["c1", "c2", "c4"]
    assert [r.id for r in st.session_commits("s")] == ["c1", "c2", "c4"]
    assert st.session_commits("nobody") == []
    with pytest.raises(NotFoundError, match="c3"):
        st.commit_chain("c3")  # the loser was never written


def test_calls_since_lists_own_calls_above_a_seq(any_store):
    st = any_store
    s = dag.create_session(st)
    dag.append(st, s.id, "user", "go")
    a = dag.append(st, s.id, "assistant", [ToolUseBlock(id="t", name="ls")])
    t1 = dag.append(st, s.id, "tool", "1", name="ls", caller=a.id)
    dag.append(st, s.id, "user", "more")
    t2 = dag.append(st, s.id, "tool", "2", name="ls", caller=a.id)
    assert [c.id for c in st.calls_since(s.id, 0)] == [t1.id, t2.id]
    assert [c.id for c in st.calls_since(s.id, t1.seq)] == [t2.id]
    f = dag.fork(st, s.id)
    assert st.calls_since(f.id, 0) == []  # inherited calls are the base's


def test_a_failed_transaction_leaves_nothing(any_store):
    st = any_store
    keep = dag.create_session(st)
    dag.append(st, keep.id, "user", "kept")
    before = [(s, st.nodes(s.id)) for s in st.list_sessions()]
    with pytest.raises(RuntimeError):
        with st.transaction():
            s = dag.create_session(st, metadata={"x": 1})
            dag.append(st, s.id, "user", "lost")
            dag.append(st, keep.id, "user", "lost too")
            st.update_metadata(keep.id, {"y": 2})
            st.kv_put("ns", "k", b"v")
            st.put_commit(row("c1"))
            raise RuntimeError("abort")
    assert [(s, st.nodes(s.id)) for s in st.list_sessions()] == before
    assert st.kv_get("ns", "k") is None and st.session_commits("s") == []
    assert dag.append(st, keep.id, "user", "next").seq == 2  # the seq was not used up


@pytest.fixture
def cli(store_location, monkeypatch, capsys, protocol_only):
    """``cli(*argv)``: run a command on this backend's store; every store it opens is
    seen only through the Protocol."""
    real = ctxrules.store.open_store
    opened = []

    def wrapped(path=None, **kw):
        opened.append(protocol_only(real(path, **kw)))
        return opened[-1]

    monkeypatch.setattr(ctxrules.store, "open_store", wrapped)
    monkeypatch.setattr(ctxrules.cli._store, "open_store", wrapped)  # imported by name there
    location = store_location("cli")

    def run(*argv, code=0):
        assert main([*argv, "--store", location]) == code, capsys.readouterr().err
        return capsys.readouterr().out

    run.opened = opened
    return run


def test_cli_commands_use_only_the_protocol(cli, corpus):
    (s,) = json.loads(cli("import", str(corpus / CC), "--json"))["sessions"]
    assert json.loads(cli("sessions", "--json"))[0]["id"] == s["id"]
    nodes = json.loads(cli("log", s["id"], "--json"))
    assert "<- HEAD" in cli("log", s["id"])
    made = json.loads(cli("commit", s["id"], "--now", "100", "--json"))
    assert json.loads(cli("commit", s["id"], "--json"))["id"] == made["id"]  # found again
    # HEAD is the recorded final answer: render the request that produced it.
    head = nodes[-1]["id"]
    body = json.loads(cli("render", s["id"], "--provider", "anthropic", "--for", head))
    assert body["messages"]
    cli("checkout", s["id"], nodes[0]["id"])
    assert json.loads(cli("fork", s["id"], nodes[0]["id"], "--json"))["head"] == nodes[0]["id"]
    assert len(cli.opened) == 9 and all(w.used for w in cli.opened)


def test_a_named_memory_store_is_shared_in_the_process_and_private_otherwise():
    a = open_store("memory:shared-test")
    try:
        a.create_session(session_id="x")
        assert [s.id for s in open_store("memory:shared-test").list_sessions()] == ["x"]
        assert open_store("memory:").list_sessions() == []
        assert open_store("memory:other-test").list_sessions() == []
    finally:
        ctxrules.store.memory.forget("shared-test")
    assert open_store("memory:shared-test").list_sessions() == []


class Racing:
    """A store where another writer commits the same head just before the first put."""

    def __init__(self, inner, race):
        self._inner, self._race = inner, race

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def put_commit(self, row, **kw):
        race, self._race = self._race, None
        if race is not None:
            race()
        return self._inner.put_commit(row, **kw)


def test_a_commit_lost_to_another_writer_is_planned_again(any_store):
    s = dag.create_session(any_store)
    dag.append(any_store, s.id, "user", "hi")
    theirs = []
    racing = Racing(any_store, lambda: theirs.append(make_commit(s.id, now=1.0, store=any_store)))
    mine = make_commit(s.id, now=2.0, store=racing)
    assert theirs and mine == theirs[0]  # the head's commit, made once, by whoever came first
    assert [r.id for r in any_store.session_commits(s.id)] == [mine.id]


def test_generating_at_the_same_now_again_finds_the_commit(any_store):
    s = dag.create_session(any_store)
    dag.append(any_store, s.id, "user", "hi")
    first = make_commit(s.id, now=10.0, store=any_store, rerun=True)
    assert make_commit(s.id, now=10.0, store=any_store, rerun=True) == first
    assert make_commit(s.id, now=99.0, store=any_store) == first
    later = make_commit(s.id, now=20.0, store=any_store, rerun=True)
    assert later.parent_ids == (first.id,) and later.created_at == 20.0
    assert [r.id for r in any_store.session_commits(s.id)] == [first.id, later.id]
