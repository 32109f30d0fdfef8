"""What only the PostgreSQL store has to show (the protocol suite runs on it too): the
database refuses changes to nodes and commits, a schema that is not ours is refused
untouched, migrations, lock waits that end in a clear error while other sessions'
writers go on, durability forced on, a lost connection, URLs and passwords."""

from __future__ import annotations

import sys
import threading

import psycopg
import pytest

from ctxrules import dag
from ctxrules.errors import DagError, StoreError, ValidationError
from ctxrules.model import Node
from ctxrules.store import CommitRow, open_store, register_migration
from ctxrules.store._pg_schema import redact
from ctxrules.store.migrations import MIGRATIONS, POSTGRES_MIGRATIONS


def node(nid: str, **kw) -> Node:
    return Node(id=nid, seq=0, created_at=1.0, role=kw.pop("role", "user"), **kw)


@pytest.fixture
def url(pg_server):
    """The URL of a new, empty schema (dropped afterwards)."""
    made = pg_server.new_store()
    yield made
    pg_server.drop_store(made)


@pytest.fixture
def raw(url):
    """A plain psycopg connection to that schema, as any other client would have."""
    conn = psycopg.connect(url, autocommit=True)
    yield conn
    conn.close()


def tables(conn) -> list[str]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


def test_the_database_refuses_changes_to_nodes_and_commits(url, raw):
    st = open_store(url)
    st.create_session(session_id="s")
    st.append("s", node("n1", output="original"))
    st.put_commit(
        CommitRow(
            id="c1",
            session_id="s",
            parent_id=None,
            head_node_id="n1",
            rules_version="rv",
            created_at=1.0,
            total_tokens=1,
            n_items=1,
            meta=b"m",
            delta=b"d",
        )
    )
    for table, message in (
        ("nodes", "history nodes are append-only"),
        ("commits", "context commits are never rewritten"),
    ):
        for statement in (
            f"UPDATE {table} SET id = id || 'x'",
            f"DELETE FROM {table}",
            f"TRUNCATE {table} CASCADE",
        ):
            with pytest.raises(psycopg.errors.RaiseException, match=message):
                raw.execute(statement)
    assert st.get_node("n1").output == "original"
    assert [r.id for r in st.session_commits("s")] == ["c1"]
    st.close()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (["CREATE TABLE users (name TEXT)", "INSERT INTO users VALUES ('ada')"], "users"),
        (["CREATE TABLE schema_migrations (version TEXT PRIMARY KEY)"], "schema_migrations"),
        (["CREATE VIEW answer AS SELECT 42 AS x"], "answer"),
        (["CREATE SEQUENCE counter"], "counter"),
        (
            [
                "CREATE TABLE ctxrules_store (application TEXT)",
                "INSERT INTO ctxrules_store VALUES ('someone else')",
            ],
            "another tool's",
        ),
    ],
    ids=["table", "rails", "view", "sequence", "marker"],
)
def test_a_schema_that_is_not_ours_is_refused_untouched(url, raw, setup, message):
    for statement in setup:
        raw.execute(statement)
    before = tables(raw), raw.execute("SELECT count(*) FROM pg_class").fetchone()
    with pytest.raises(StoreError, match=f"not a ctxrules store.*{message}"):
        open_store(url)
    with pytest.raises(StoreError, match="not a ctxrules store"):
        open_store(url, create=False)
    assert (tables(raw), raw.execute("SELECT count(*) FROM pg_class").fetchone()) == before


def test_an_empty_schema_is_made_a_store_only_when_asked(url, raw):
    with pytest.raises(StoreError, match="holds no ctxrules store"):
        open_store(url, create=False)
    assert tables(raw) == []
    st = open_store(url)
    assert set(tables(raw)) >= {"ctxrules_store", "schema_migrations", "sessions", "nodes"}
    assert st.schema_versions() == {1: "history_graph", 2: "context_commits"}
    st.close()
    open_store(url, create=False).close()  # now there is one


def test_stores_opened_at_once_create_the_schema_once(url):
    errors: list[BaseException] = []

    def opener():
        try:
            open_store(url).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    st = open_store(url)
    assert st.schema_versions() == {1: "history_graph", 2: "context_commits"}
    st.close()


def test_missing_schema_database_or_server_are_clear_errors(pg_server):
    with pytest.raises(StoreError, match=r"no schema of search_path.*CREATE SCHEMA"):
        open_store(pg_server.url(schema="no_such_schema"))
    with pytest.raises(StoreError, match=r"cannot connect.*createdb"):
        open_store(pg_server.url(database="no_such_db"))
    closed = f"postgresql://postgres@127.0.0.1:{pg_server.port}/x?connect_timeout=2&port=1"
    with pytest.raises(StoreError, match="cannot connect to the PostgreSQL server"):
        open_store(closed)


@pytest.fixture
def extra_migration():
    saved = dict(MIGRATIONS), dict(POSTGRES_MIGRATIONS)
    yield
    for registry, kept in zip((MIGRATIONS, POSTGRES_MIGRATIONS), saved):
        registry.clear()
        registry.update(kept)


def test_migrations_run_once_and_conflicts_are_refused(url, raw, extra_migration):
    open_store(url).close()

    @register_migration(97, "test_extra", backend="postgresql")
    def _extra(conn):
        conn.execute("CREATE TABLE test_extra (x INTEGER)")

    st = open_store(url)  # applies 97 on open
    assert st.migrate() == [] and st.schema_versions()[97] == "test_extra"
    st.close()
    assert "test_extra" in tables(raw)
    with pytest.raises(StoreError, match="twice"):
        register_migration(97, "other_name")(lambda conn: None)  # the SQLite side too
    POSTGRES_MIGRATIONS[97] = type(POSTGRES_MIGRATIONS[97])(97, "renamed", lambda conn: None)
    with pytest.raises(StoreError, match="schema version 97"):
        open_store(url)


def test_a_lock_wait_ends_in_a_clear_error_and_other_sessions_go_on(url, raw):
    st = open_store(url, busy_timeout=0.3)
    for sid in ("held", "free"):
        st.create_session(session_id=sid)
    raw.execute("BEGIN")
    raw.execute("SELECT * FROM sessions WHERE id = 'held' FOR UPDATE")  # as an appender would
    try:
        with pytest.raises(StoreError, match="busy") as exc:
            st.append("held", node("h1"))
        text = str(exc.value)
        assert f"server process {raw.info.backend_pid}" in text
        assert "CTXRULES_BUSY_TIMEOUT" in text and "nothing was written" in text
        # Row locks: a writer of another session does not wait for that one.
        assert st.append("free", node("f1")).seq == 1
    finally:
        raw.execute("ROLLBACK")
    assert st.append("held", node("h1")).seq == 1  # released: it goes through
    st.close()


def test_a_caught_error_inside_a_transaction_leaves_it_usable(url):
    st = open_store(url)
    st.create_session(session_id="s")
    with st.transaction():
        st.append("s", node("a"))
        with pytest.raises(DagError, match="exists"):
            st.append("s", node("a"))  # refused by the database: a savepoint is undone
        st.append("s", node("b"))
    assert [(n.id, n.seq) for n in st.nodes("s")] == [("a", 1), ("b", 2)]
    st.close()


def test_a_value_postgresql_cannot_hold_is_a_validation_error(url):
    st = open_store(url)
    with pytest.raises(ValidationError, match="NUL"):
        st.create_session(session_id="a\x00b")
    with pytest.raises(ValidationError, match="NUL"):
        st.get_session("a\x00b")
    assert st.list_sessions() == []
    st.create_session(session_id="fine")  # the connection is still usable
    st.close()


def test_writes_are_durable_whatever_the_server_default(pg_server):
    made = pg_server.new_store()
    lax = made + "%20-csynchronous_commit%3Doff"  # this connection's default: off
    with psycopg.connect(lax) as conn:
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "off"
    st = open_store(lax)
    with st.transaction() as conn:
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
    st.close()
    pg_server.drop_store(made)


def test_a_lost_connection_reconnects_a_read_and_is_a_clear_error_for_a_write(url, raw):
    st = open_store(url)
    st.create_session(session_id="s")
    with st.transaction() as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    raw.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert st.get_session("s").id == "s"  # a read runs again on a new connection
    with pytest.raises(StoreError, match="lost the connection"):
        with st.transaction() as conn:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            raw.execute("SELECT pg_terminate_backend(%s)", (pid,))
            st.append("s", node("lost"))
    assert dag.append(st, "s", "user", "again").seq == 1  # the next write reconnects
    st.close()


def test_urls_from_the_environment_either_scheme_and_no_password_shown(url, monkeypatch):
    monkeypatch.setenv("CTXRULES_STORE", url.replace("postgresql://", "postgres://"))
    st = open_store()
    assert st.location.startswith("postgres://") and st.list_sessions() == []
    st.close()
    secret = "postgresql://ada:s3cret@127.0.0.1:1/db?password=s3cret&connect_timeout=2"
    assert "s3cret" not in redact(secret) and "ada:***@" in redact(secret)
    with pytest.raises(StoreError) as exc:
        open_store(secret)
    assert "s3cret" not in str(exc.value)


def test_without_the_driver_the_error_says_what_to_install(url, monkeypatch):
    for name in [m for m in sys.modules if m == "psycopg" or m.startswith("psycopg.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(sys.modules, "ctxrules.store.postgres", raising=False)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg fails
    with pytest.raises(StoreError, match=r"psycopg.*ctxrules\[postgresql\]"):
        open_store(url)
