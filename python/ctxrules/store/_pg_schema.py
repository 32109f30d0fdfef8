"""The PostgreSQL store's location and schema: URLs, its migrations, and opening a
schema without touching what is not ours.

A PostgreSQL store is the set of tables in one schema of a database: the connection's
current schema (``public`` unless the URL sets ``search_path``).  ctxrules creates
neither databases nor schemas.  A store carries the marker table ``ctxrules_store``
(the counterpart of SQLite's ``application_id``); a schema holding anything else and
no marker is another program's and is refused, left as it was.  An empty schema is
made a store in one transaction (PostgreSQL's DDL is transactional), under an
advisory lock so that processes opening it together create it once.

Nodes and commits are append-only in the database itself: triggers refuse UPDATE,
DELETE and TRUNCATE on them, whoever connects.
"""

from __future__ import annotations

import time
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import StoreError
from ._shared import no_store
from .migrations import POSTGRES_MIGRATIONS, pending, register_migration

__all__ = ["MARKER", "PREFIXES", "open_schema", "recorded", "redact"]

#: Store locations starting with one of these are PostgreSQL URLs.
PREFIXES = ("postgresql://", "postgres://")

#: The table that makes a schema a ctxrules store.
MARKER = "ctxrules_store"
_HINT = (
    "point --store / CTXRULES_STORE at an empty schema or a ctxrules store, e.g. "
    "postgresql://HOST/DB?options=-csearch_path%3Dctxrules after CREATE SCHEMA ctxrules"
)
# Relation kinds that make a schema someone's: tables, partitioned and foreign tables,
# views, materialized views, sequences.
_KINDS = ("r", "p", "f", "v", "m", "S")


def redact(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***`` (for messages)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        if ":" in user:
            user = user.split(":", 1)[0] + ":***"
        netloc = f"{user}@{host}"
    query = parts.query
    if "password" in query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, "***" if k == "password" else v) for k, v in pairs], safe="%=-*")
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _contents(conn: Any) -> list[str]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE n.nspname = current_schema() AND c.relkind IN {_KINDS!r} ORDER BY c.relname"
    ).fetchall()
    return [r[0] for r in rows]


def _state(conn: Any, location: str) -> Literal["empty", "ours"]:
    """Whether the current schema is empty or a store of ours; ``StoreError`` otherwise."""
    schema = conn.execute("SELECT current_schema(), current_database()").fetchone()
    if schema[0] is None:
        path = conn.execute("SHOW search_path").fetchone()[0]
        raise StoreError(
            f"no schema of search_path ({path}) exists in database {schema[1]!r}",
            where=location,
            hint="create it first (CREATE SCHEMA name), or fix options=-csearch_path in the URL",
        )
    names = _contents(conn)
    if not names:
        return "empty"
    where = f"schema {schema[0]!r} of database {schema[1]!r}"
    if MARKER not in names:
        shown = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
        raise StoreError(
            f"not a ctxrules store: {where} holds other tables ({shown})",
            where=location,
            hint=_HINT,
        )
    mark = conn.execute(f"SELECT application FROM {MARKER}").fetchall()
    if mark != [("ctxrules",)]:
        raise StoreError(
            f"not a ctxrules store: the {MARKER} table of {where} is another tool's",
            where=location,
            hint=_HINT,
        )
    return "ours"


def recorded(conn: Any) -> dict[int, str]:
    """The applied migrations of a store: version → name."""
    return dict(conn.execute("SELECT version, name FROM schema_migrations").fetchall())


def open_schema(conn: Any, transaction: Any, location: str, *, create: bool) -> list[int]:
    """Check the current schema and bring it up to date; returns the versions applied.

    ``transaction()`` opens the store's write transaction.  ``StoreError`` for a schema
    that is not ours, a missing schema, a version recorded under another name, or (with
    ``create=False``) an empty schema; nothing is written then.
    """
    state = _state(conn, location)
    if state == "empty" and not create:
        raise no_store(location, "holds no ctxrules store (an empty schema)")
    if state == "ours" and not pending(recorded(conn), POSTGRES_MIGRATIONS, location):
        return []  # the common case: nothing to lock just to open
    with transaction() as tx:
        # One process creates or migrates at a time; the others then find it done.
        tx.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", ("ctxrules migrate",))
        if _state(tx, location) == "empty":
            tx.execute(
                f"CREATE TABLE {MARKER} (application TEXT PRIMARY KEY, "
                "created_at DOUBLE PRECISION NOT NULL)"
            )
            tx.execute(f"INSERT INTO {MARKER} VALUES ('ctxrules', ?)", (time.time(),))
            tx.execute(
                "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
            )
        applied = []
        for mig in pending(recorded(tx), POSTGRES_MIGRATIONS, location):
            mig.apply(tx)
            tx.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                (mig.version, mig.name, time.time()),
            )
            applied.append(mig.version)
        return applied


def _refuse_changes(conn: Any, table: str, message: str) -> None:
    """Triggers making ``table`` append-only: no UPDATE, DELETE or TRUNCATE."""
    conn.execute(
        f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION ctxrules_refuse_change('{message}')"
    )
    conn.execute(
        f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION ctxrules_refuse_change('{message}')"
    )


@register_migration(1, "history_graph", backend="postgresql")
def _history_graph(conn: Any) -> None:
    # As in SQLite: the edges are columns (for the child lookups) and the whole Call is
    # JSON in ``body``, kept as bytes (jsonb would reorder its keys).  ``n`` gives the
    # insertion order SQLite's rowid gives.
    statements = [
        """CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    created_at DOUBLE PRECISION NOT NULL,
    head TEXT,
    source TEXT NOT NULL DEFAULT '',
    import_key TEXT UNIQUE,
    base_session TEXT REFERENCES sessions(id),
    base_node TEXT,
    base_seq BIGINT NOT NULL DEFAULT 0,
    next_seq BIGINT NOT NULL DEFAULT 1,
    metadata BYTEA NOT NULL,
    n BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
)""",
        """CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    seq BIGINT NOT NULL,
    role TEXT NOT NULL,
    predecessor TEXT,
    caller TEXT,
    body BYTEA NOT NULL,
    UNIQUE (session_id, seq)
)""",
        "CREATE INDEX nodes_predecessor ON nodes(predecessor) WHERE predecessor IS NOT NULL",
        "CREATE INDEX nodes_caller ON nodes(caller) WHERE caller IS NOT NULL",
        # One function raising the trigger's argument serves every append-only table.
        """CREATE FUNCTION ctxrules_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0];
END
$$""",
        """CREATE TABLE runs (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id),
    run_id TEXT NOT NULL,
    pid BIGINT NOT NULL,
    host TEXT NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
)""",
        """CREATE TABLE kv (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value BYTEA NOT NULL,
    PRIMARY KEY (namespace, key)
)""",
    ]
    for statement in statements:
        conn.execute(statement)
    # Invariant 1 (docs/rules.md) enforced by the database itself: nodes are never changed.
    _refuse_changes(conn, "nodes", "history nodes are append-only")


@register_migration(2, "context_commits", backend="postgresql")
def _context_commits(conn: Any) -> None:
    statements = [
        """CREATE TABLE commits (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    parent_id TEXT REFERENCES commits(id),
    head_node_id TEXT NOT NULL,
    rules_version TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    total_tokens BIGINT NOT NULL,
    n_items BIGINT NOT NULL,
    meta BYTEA NOT NULL,
    delta BYTEA NOT NULL,
    n BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE
)""",
        "CREATE INDEX commits_head ON commits(head_node_id, rules_version)",
        "CREATE INDEX commits_session ON commits(session_id)",
        # Serves both the filter and the order of "the calls of this node".
        "CREATE INDEX nodes_caller_seq ON nodes(caller, seq) WHERE caller IS NOT NULL",
    ]
    for statement in statements:
        conn.execute(statement)
    # Invariant 2 (docs/rules.md) enforced by the database: a saved commit is never rewritten.
    _refuse_changes(conn, "commits", "context commits are never rewritten")
