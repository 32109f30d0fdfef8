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

import re
import time
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import StoreError
from ._shared import no_store
from .migrations import (
    COMMIT_TABLES,
    HISTORY_GRAPH_TABLES,
    POSTGRES_MIGRATIONS,
    pending,
    register_migration,
)

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
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL (e.g. an unclosed IPv6 bracket): hide what may be one
        url = re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)
        return re.sub(r"(password=)[^&]*", r"\1***", url)
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


# SQLite's column types as PostgreSQL spells them (the JSON bodies stay bytes: jsonb
# would reorder their keys).
_TYPES = {" REAL": " DOUBLE PRECISION", " INTEGER": " BIGINT", " BLOB": " BYTEA"}


def _create(conn: Any, statements: tuple[str, ...], ordered: str) -> None:
    """Run SQLite's statements of a version with PostgreSQL's types; ``ordered`` gets
    the column ``n`` giving the insertion order SQLite's rowid gives."""
    for statement in statements:
        for sqlite_type, pg_type in _TYPES.items():
            statement = statement.replace(sqlite_type, pg_type)
        conn.execute(statement)
    conn.execute(f"ALTER TABLE {ordered} ADD COLUMN n BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE")


@register_migration(1, "history_graph", backend="postgresql")
def _history_graph(conn: Any) -> None:
    _create(conn, HISTORY_GRAPH_TABLES, "sessions")
    # One function raising the trigger's argument serves every append-only table.
    conn.execute(
        """CREATE FUNCTION ctxrules_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0];
END
$$"""
    )
    # Invariant 1 (docs/rules.md) enforced by the database itself: nodes are never changed.
    _refuse_changes(conn, "nodes", "history nodes are append-only")


@register_migration(2, "context_commits", backend="postgresql")
def _context_commits(conn: Any) -> None:
    _create(conn, COMMIT_TABLES, "commits")
    # Invariant 2 (docs/rules.md) enforced by the database: a saved commit is never rewritten.
    _refuse_changes(conn, "commits", "context commits are never rewritten")
