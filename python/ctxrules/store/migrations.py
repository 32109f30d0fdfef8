"""Schema versions of the stores and the registry later layers add theirs to.

Each migration has a unique integer version and a name and runs inside the store's
transaction.  Every backend with a schema keeps its own registry (``MIGRATIONS`` for
SQLite, ``POSTGRES_MIGRATIONS`` for PostgreSQL: the DDL differs), and a version means
the same step on each: registering it under another name than another backend has is
refused.  Applied migrations are recorded in the store's ``schema_migrations`` table
(SQLite also puts the highest version in ``PRAGMA user_version`` for outside tools).  A
store may hold migrations this process does not know (a newer layer's tables); that is
fine, since each layer only touches its own tables.  A version recorded under a
different name is refused: it means two incompatible schemas claimed the same number.

The history graph is version 1 and the commit rows version 2 (both here and in
``_pg_schema``: the store owns its tables); a later layer with tables of its own
registers the next version for each backend it supports::

    from ctxrules.store import register_migration

    @register_migration(3, "my_layer")
    def _mine(conn): conn.execute("CREATE TABLE my_layer (...)")

    @register_migration(3, "my_layer", backend="postgresql")
    def _mine_pg(conn): conn.execute("CREATE TABLE my_layer (...)")
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import StoreError

__all__ = [
    "BACKENDS",
    "COMMIT_TABLES",
    "HISTORY_GRAPH_TABLES",
    "MIGRATIONS",
    "POSTGRES_MIGRATIONS",
    "Migration",
    "SchemaBackend",
    "apply_pending",
    "pending",
    "register_migration",
    "up_to_date",
]

#: The backends that keep a schema, each with its registry of migrations.
SchemaBackend = Literal["sqlite", "postgresql"]


@dataclass(frozen=True)
class Migration:
    """One schema step: ``apply(conn)`` runs inside a transaction on the backend's
    connection (SQLite: ``sqlite3.Connection``; PostgreSQL: the store's connection,
    whose ``execute`` takes ``?`` placeholders)."""

    version: int
    name: str
    apply: Callable[[Any], None]


#: Registered SQLite migrations by version.
MIGRATIONS: dict[int, Migration] = {}
#: Registered PostgreSQL migrations by version.
POSTGRES_MIGRATIONS: dict[int, Migration] = {}
#: The registry of each backend.
BACKENDS: dict[str, dict[int, Migration]] = {
    "sqlite": MIGRATIONS,
    "postgresql": POSTGRES_MIGRATIONS,
}


def register_migration(
    version: int, name: str, *, backend: SchemaBackend = "sqlite"
) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    """Decorator registering ``fn(conn)`` as schema migration ``version`` of ``backend``.

    Registering a version under a different name than it has (on this or another
    backend) raises ``StoreError``; re-registering the same name (a module imported
    twice) is harmless.
    """
    if backend not in BACKENDS:
        raise StoreError(
            f"no backend {backend!r} keeps migrations",
            hint=f"use one of {', '.join(BACKENDS)}",
        )

    def deco(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        for registry in BACKENDS.values():
            old = registry.get(version)
            if old is not None and old.name != name:
                raise StoreError(
                    f"migration version {version} registered twice: {old.name!r} and {name!r}",
                    hint="give each layer's migration its own version number",
                )
        BACKENDS[backend][version] = Migration(version, name, fn)
        return fn

    return deco


def pending(done: dict[int, str], registry: dict[int, Migration], location: str) -> list[Migration]:
    """The migrations of ``registry`` that a store with ``done`` (version → name) lacks,
    in version order.

    ``StoreError`` if a version is recorded under another name than registered.
    """
    todo: list[Migration] = []
    for version in sorted(registry):
        mig = registry[version]
        if version not in done:
            todo.append(mig)
        elif done[version] != mig.name:
            raise StoreError(
                f"schema version {version} is {done[version]!r} in this store "
                f"but {mig.name!r} in this ctxrules",
                where=location,
                hint="use the ctxrules version (and plugins) that created the store",
            )
    return todo


def up_to_date(conn: sqlite3.Connection) -> bool:
    """Whether every registered SQLite migration is recorded (read-only: no write lock)."""
    try:
        done = dict(conn.execute("SELECT version, name FROM schema_migrations").fetchall())
    except sqlite3.OperationalError:
        return False  # a new file: no table yet
    return all(done.get(v) == m.name for v, m in MIGRATIONS.items())


def apply_pending(conn: sqlite3.Connection, location: str) -> list[int]:
    """Apply the registered SQLite migrations ``conn`` lacks, in version order; returns them.

    Runs inside the caller's write transaction.  ``StoreError`` for another program's
    database (tables but no ``schema_migrations``) and for a version recorded under
    another name; nothing is written then.
    """
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if tables and "schema_migrations" not in tables:
        # Adding our tables would write to a file the user did not mean to give us.
        raise StoreError(
            "this SQLite file is not a ctxrules store "
            f"(it holds other tables: {', '.join(sorted(tables)[:5])})",
            where=location,
            hint="point --store / CTXRULES_STORE at a new directory or a ctxrules store",
        )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    done = dict(conn.execute("SELECT version, name FROM schema_migrations").fetchall())
    applied: list[int] = []
    for mig in pending(done, MIGRATIONS, location):
        mig.apply(conn)
        conn.execute(
            "INSERT INTO schema_migrations VALUES (?, ?, ?)", (mig.version, mig.name, time.time())
        )
        applied.append(mig.version)
    top = max([*done, *applied], default=0)
    conn.execute(f"PRAGMA user_version={int(top)}")
    return applied


# The tables and indexes of versions 1 and 2, in SQLite's words; the PostgreSQL store
# runs the same statements with its own types (``_pg_schema``), so both hold one schema.
# Node rows keep the edges as columns (for the child lookups) and the whole Node as
# JSON in ``body``: the JSON is the permanent original, the columns an index.
HISTORY_GRAPH_TABLES = (
    """CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    head TEXT,
    source TEXT NOT NULL DEFAULT '',
    import_key TEXT UNIQUE,
    base_session TEXT REFERENCES sessions(id),
    base_node TEXT,
    base_seq INTEGER NOT NULL DEFAULT 0,
    next_seq INTEGER NOT NULL DEFAULT 1,
    metadata BLOB NOT NULL DEFAULT '{}'
)""",
    """CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    predecessor TEXT,
    caller TEXT,
    body BLOB NOT NULL,
    UNIQUE (session_id, seq)
)""",
    """CREATE INDEX nodes_predecessor ON nodes(predecessor) WHERE predecessor IS NOT NULL""",
    """CREATE INDEX nodes_caller ON nodes(caller) WHERE caller IS NOT NULL""",
    """CREATE TABLE runs (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id),
    run_id TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    started_at REAL NOT NULL,
    expires_at REAL NOT NULL
)""",
    """CREATE TABLE kv (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (namespace, key)
)""",
)
# A row holds a commit's header and its delta against the first parent (the commit
# layer's bytes), so storage grows with what a commit changes, not with its length.
COMMIT_TABLES = (
    """CREATE TABLE commits (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    parent_id TEXT REFERENCES commits(id),
    head_node_id TEXT NOT NULL,
    rules_version TEXT NOT NULL,
    created_at REAL NOT NULL,
    total_tokens INTEGER NOT NULL,
    n_items INTEGER NOT NULL,
    meta BLOB NOT NULL,
    delta BLOB NOT NULL
)""",
    # "The commit for this node" is an indexed lookup.
    "CREATE INDEX commits_head ON commits(head_node_id, rules_version)",
    "CREATE INDEX commits_session ON commits(session_id)",
    # For the history graph's table (additive): generation asks for the calls of each
    # node it walks (``Store.children``, ``WHERE caller = ? … ORDER BY seq``).  With
    # only ``nodes_caller`` the planner prefers UNIQUE(session_id, seq) for the ORDER
    # BY and scans the whole session — 16 ms per lookup at 30k nodes; this index
    # serves both the filter and the order.
    "CREATE INDEX IF NOT EXISTS nodes_caller_seq ON nodes(caller, seq) WHERE caller IS NOT NULL",
)


def _append_only(conn: sqlite3.Connection, table: str, message: str) -> None:
    """Triggers refusing UPDATE and DELETE on ``table`` with ``message``."""
    for op in ("update", "delete"):
        conn.execute(
            f"""CREATE TRIGGER {table}_no_{op} BEFORE {op.upper()} ON {table}
    BEGIN SELECT RAISE(ABORT, '{message}'); END"""
        )


@register_migration(1, "history_graph")
def _history_graph(conn: sqlite3.Connection) -> None:
    # A list, not executescript(): executescript would commit the surrounding transaction.
    for statement in HISTORY_GRAPH_TABLES:
        conn.execute(statement)
    # Invariant 1 (docs/rules.md) enforced by the database itself: nodes are never changed.
    _append_only(conn, "nodes", "history nodes are append-only")


@register_migration(2, "context_commits")
def _context_commits(conn: sqlite3.Connection) -> None:
    for statement in COMMIT_TABLES:
        conn.execute(statement)
    # Invariant 2 (docs/rules.md) enforced by the database: a saved commit is never rewritten.
    _append_only(conn, "commits", "context commits are never rewritten")
