"""Schema versions of the SQLite store and the registry later layers add theirs to.

Each migration has a unique integer version and a name and runs inside the store's
transaction.  Applied migrations are recorded in ``schema_migrations`` (and the highest
version in ``PRAGMA user_version`` for outside tools).  A store may hold migrations this
process does not know (a newer layer's tables); that is fine, since each layer only
touches its own tables.  A version recorded under a different name is refused: it
means two incompatible schemas claimed the same number.

The history graph is version 1; ContextCommits (another layer) registers version 2::

    from ctxrules.store import register_migration

    @register_migration(2, "context_commits")
    def _commits(conn): conn.execute("CREATE TABLE commits (...)")
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import StoreError

__all__ = ["MIGRATIONS", "Migration", "register_migration"]


@dataclass(frozen=True)
class Migration:
    """One schema step: ``apply(conn)`` runs inside a transaction."""

    version: int
    name: str
    apply: Callable[[sqlite3.Connection], None]


#: Registered migrations by version.
MIGRATIONS: dict[int, Migration] = {}


def register_migration(
    version: int, name: str
) -> Callable[[Callable[[sqlite3.Connection], None]], Callable[[sqlite3.Connection], None]]:
    """Decorator registering ``fn(conn)`` as schema migration ``version``.

    Registering the same version twice under a different name raises ``StoreError``;
    re-registering the same name (a module imported twice) is harmless.
    """

    def deco(fn: Callable[[sqlite3.Connection], None]) -> Callable[[sqlite3.Connection], None]:
        old = MIGRATIONS.get(version)
        if old is not None and old.name != name:
            raise StoreError(
                f"migration version {version} registered twice: {old.name!r} and {name!r}",
                hint="give each layer's migration its own version number",
            )
        MIGRATIONS[version] = Migration(version, name, fn)
        return fn

    return deco


@register_migration(1, "history_graph")
def _history_graph(conn: sqlite3.Connection) -> None:
    # Node rows keep the edges as columns (for the child lookups) and the whole Call
    # as JSON in ``body``: the JSON is the permanent original, the columns an index.
    # A list, not executescript(): executescript would commit the surrounding transaction.
    statements = [
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
        # SPEC §2 invariant 1 enforced by the database itself: nodes are never changed.
        """CREATE TRIGGER nodes_no_update BEFORE UPDATE ON nodes
    BEGIN SELECT RAISE(ABORT, 'history nodes are append-only'); END""",
        """CREATE TRIGGER nodes_no_delete BEFORE DELETE ON nodes
    BEGIN SELECT RAISE(ABORT, 'history nodes are append-only'); END""",
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
    ]
    for statement in statements:
        conn.execute(statement)
