"""The stores: location, seq assignment, edge and write validation, the run guard and the
key/value table on every backend; durability settings, append-only rows, migrations
and a dead holder of the run guard on SQLite."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import pytest

from ctxrules.errors import (
    AgentRunActiveError,
    DagError,
    NotFoundError,
    StoreError,
    ValidationError,
)
from ctxrules.model import Node
from ctxrules.store import MIGRATIONS, Store, open_store, register_migration, store_location


def node(nid: str, **kw) -> Node:
    return Node(id=nid, seq=0, created_at=1.0, role=kw.pop("role", "user"), **kw)


@pytest.fixture
def store(any_store) -> Store:
    """Tests taking ``store`` run over each backend (tests/conftest.py)."""
    return any_store


@pytest.fixture
def sqlite_store(tmp_path) -> Store:
    st = open_store(tmp_path / "st")
    yield st
    st.close()


def test_location_comes_from_argument_then_env_then_default(tmp_path, monkeypatch):
    monkeypatch.delenv("CTXRULES_STORE", raising=False)
    assert str(store_location()) == ".ctxrules"
    monkeypatch.setenv("CTXRULES_STORE", str(tmp_path / "env"))
    assert store_location() == tmp_path / "env"
    assert store_location(tmp_path / "arg") == tmp_path / "arg"
    st = open_store()
    try:
        assert st.location == str(tmp_path / "env" / "ctxrules.db")
        assert (tmp_path / "env" / "ctxrules.db").is_file()
    finally:
        st.close()


def test_wal_and_full_sync_are_on(sqlite_store):
    store = sqlite_store
    conn = sqlite3.connect(store.location)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # synchronous is per connection: check the store's own connection.
    with store.transaction() as own:
        assert own.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    conn.close()


def test_sqlite_store_implements_the_protocol(sqlite_store):
    assert isinstance(sqlite_store, Store)


def test_seq_is_assigned_contiguously_from_one(store):
    s = store.create_session(session_id="s1")
    seqs = [store.append("s1", node(f"n{i}"), at_head=True).seq for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    got = store.nodes("s1")
    assert [n.seq for n in got] == seqs
    assert got[3].predecessor == "n2"  # at_head chains each append under the previous
    assert store.get_session(s.id).calls == 5
    assert store.get_session(s.id).head == "n4"


def test_stored_rows_cannot_be_updated_or_deleted(sqlite_store):
    store = sqlite_store
    store.create_session(session_id="s1")
    store.append("s1", node("n1", output="original"))
    conn = sqlite3.connect(store.location)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE nodes SET body = x'00' WHERE id = 'n1'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM nodes")
    conn.close()
    assert store.get_node("n1").output == "original"


def test_edges_must_name_nodes_of_the_same_session(store):
    store.create_session(session_id="a")
    store.create_session(session_id="b")
    store.append("a", node("a1"))
    with pytest.raises(DagError, match="a1"):
        store.append("b", node("b1", predecessor="a1"))
    with pytest.raises(DagError, match="same session"):
        store.append("b", node("b2", role="tool", caller="a1"))  # exists, other session
    with pytest.raises(DagError, match="a1"):
        store.create_session(session_id="c", nodes=[node("c1", predecessor="a1")])
    with pytest.raises(DagError, match="nope"):
        store.append("a", node("a2", role="tool", caller="nope"))
    with pytest.raises(DagError, match="does not exist"):
        store.append("a", node("a3", reads=("ghost",)))
    assert [n.id for n in store.nodes("a")] == ["a1"]
    assert store.nodes("b") == [] and [s.id for s in store.list_sessions()] == ["a", "b"]


def test_both_edges_are_rejected_before_any_write():
    with pytest.raises(ValidationError, match="both"):
        node("x", predecessor="p", caller="c")


def test_a_node_that_would_not_read_back_is_refused_at_write(store):
    store.create_session(session_id="s")
    with pytest.raises(ValidationError, match=r"'bad'.*output"):
        store.append("s", node("bad", output={"not": "content"}))
    with pytest.raises(ValidationError, match="metadata must be a dict"):
        store.append("s", node("meta", metadata=["x"]))
    with pytest.raises(ValidationError, match=r"'robot'.*\$\.role"):
        store.append("s", node("who", role="robot"))
    with pytest.raises(ValidationError, match="'odd'"):
        store.create_session(session_id="t", nodes=[node("ok"), node("odd", input=object())])
    assert store.nodes("s") == [] and [s.id for s in store.list_sessions()] == ["s"]


def test_duplicate_ids_and_unknown_sessions_are_typed_errors(store):
    store.create_session(session_id="s1")
    store.append("s1", node("n1"))
    with pytest.raises(DagError, match="exists"):
        store.append("s1", node("n1"))
    with pytest.raises(NotFoundError):
        store.append("nope", node("n2"))
    with pytest.raises(NotFoundError):
        store.get_node("nope")
    with pytest.raises(StoreError):
        store.create_session(session_id="s1")


def test_batch_create_is_all_or_nothing(store):
    good = node("g1")
    bad = node("g2", predecessor="missing")
    with pytest.raises(DagError):
        store.create_session(session_id="s1", import_key="k", nodes=[good, bad], head="g1")
    assert store.list_sessions() == []
    assert store.find_session("k") is None


def test_batch_reads_may_name_earlier_nodes_of_the_batch_only(store):
    first = node("b1")
    reader = node("b2", role="assistant", predecessor="b1", reads=("b1",))
    store.create_session(session_id="ok", nodes=[first, reader], head="b2")
    assert store.get_node("b2").reads == ("b1",)
    early = node("c1", reads=("c2",))  # names a node that comes later in the batch
    with pytest.raises(DagError, match="c2"):
        store.create_session(session_id="bad", nodes=[early, node("c2")])
    assert [s.id for s in store.list_sessions()] == ["ok"]


def test_children_by_edge_in_seq_order(store):
    store.create_session(session_id="s")
    store.append("s", node("u"))
    store.append("s", node("a", role="assistant", predecessor="u"))
    store.append("s", node("t2", role="tool", caller="a"))
    store.append("s", node("t1", role="tool", caller="a"))
    store.append("s", node("b", role="assistant", predecessor="u"))
    assert [c.id for c in store.children("a", session_id="s", edge="caller")] == ["t2", "t1"]
    assert [c.id for c in store.children("u", session_id="s", edge="predecessor")] == ["a", "b"]


def test_unknown_file_is_a_store_error(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError):
        open_store(bad)


def test_another_programs_sqlite_file_is_refused_untouched(tmp_path):
    other = tmp_path / "app.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"not a ctxrules store.*users"):
        open_store(other)
    conn = sqlite3.connect(other)
    tables = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    conn.close()
    assert tables == [("users",)]


@pytest.fixture
def extra_migration():
    saved = dict(MIGRATIONS)
    yield
    MIGRATIONS.clear()
    MIGRATIONS.update(saved)


def test_migrations_run_once_in_order_and_conflicts_are_refused(tmp_path, extra_migration):
    st = open_store(tmp_path / "m")
    st.close()

    @register_migration(97, "test_extra")
    def _extra(conn):
        conn.execute("CREATE TABLE test_extra (x INTEGER)")

    st = open_store(tmp_path / "m")  # applies 97 on open
    assert st.migrate() == []  # nothing left to apply
    conn = sqlite3.connect(st.location)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 97
    assert conn.execute("SELECT name FROM schema_migrations WHERE version = 97").fetchone() == (
        "test_extra",
    )
    conn.close()
    st.close()
    with pytest.raises(StoreError, match="twice"):
        register_migration(97, "other_name")(lambda conn: None)
    MIGRATIONS[97] = type(MIGRATIONS[97])(97, "renamed", lambda conn: None)
    with pytest.raises(StoreError, match="schema version 97"):
        open_store(tmp_path / "m")


def test_update_metadata_merges_and_deletes(store):
    store.create_session(session_id="s", metadata={"a": 1, "b": 2})
    assert store.update_metadata("s", {"b": None, "c": 3}) == {"a": 1, "c": 3}
    assert store.get_session("s").metadata == {"a": 1, "c": 3}


def test_kv_table(store):
    assert store.kv_get("ns", "k") is None
    store.kv_put("ns", "k1", b"one")
    store.kv_put("ns", "k2", b"two")
    store.kv_put("other", "k1", b"x")
    store.kv_put("ns", "k1", b"uno")
    assert store.kv_get("ns", "k1") == b"uno"
    assert store.kv_keys("ns") == ["k1", "k2"]
    assert store.kv_keys("ns", "k2") == ["k2"]


def test_run_guard_expires_and_ignores_dead_processes(store):
    store.create_session(session_id="s")
    store.start_run("s", "r1", ttl=0.2)
    with pytest.raises(AgentRunActiveError, match="r1"):
        store.start_run("s", "r2", ttl=10)
    time.sleep(0.3)
    assert store.active_run("s") is None
    store.start_run("s", "r2", ttl=60)
    store.renew_run("s", "r2", ttl=120)
    assert store.active_run("s").expires_at > time.time() + 100
    store.end_run("s", "r2")
    assert store.active_run("s") is None


def test_a_run_left_by_a_dead_process_is_not_live(sqlite_store):
    store = sqlite_store
    store.create_session(session_id="s")
    # A run left behind by a process that died is not live.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with store.transaction() as conn:
        conn.execute(
            "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?)",
            ("s", "ghost", dead.pid, os.uname().nodename, time.time(), time.time() + 600),
        )
    assert store.active_run("s") is None
