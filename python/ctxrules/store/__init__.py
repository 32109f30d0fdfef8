"""Where the history graph and its commits live: the ``Store`` / ``CommitStore``
interfaces, the embedded SQLite backend, the PostgreSQL one and the in-memory one.

``open_store()`` finds the store location from its argument, then ``$CTXRULES_STORE``
(an empty value counts as unset), then ``./.ctxrules/``.  A directory holds one SQLite
file (``ctxrules.db``), created complete on first use; an existing file is inspected
before anything writes to it and refused, untouched, unless it is a ctxrules store.
A location ``memory:NAME`` opens the in-memory store of that name in this process
(``memory:`` alone: a private one), for batch workers and tests.  With
``create=False`` (what read-only commands use) a store that does not exist yet is an
error and nothing is made: no directory, no file, no named memory store.  A location
``postgresql://…`` (or ``postgres://…``, any libpq URL) opens the store in that
database's current schema on a PostgreSQL server (``ctxrules.store.postgres``; needs
``pip install 'ctxrules[postgresql]'``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import StoreError
from ._pg_schema import PREFIXES as POSTGRES_PREFIXES  # (also registers its migrations)
from ._shared import DAMAGE, damaged, no_store
from ._sqlite_open import APPLICATION_ID
from .base import CommitRow, CommitStore, Edge, NewSession, RunInfo, SessionInfo, Store
from .memory import PREFIX as MEMORY_PREFIX
from .memory import MemoryStore
from .memory import exists as _memory_exists
from .migrations import MIGRATIONS, POSTGRES_MIGRATIONS, Migration, register_migration
from .readonly import ReadOnlyView
from .sqlite import BUSY_TIMEOUT_S, DB_NAME, ENV_BUSY_TIMEOUT, SQLiteStore, database_path

__all__ = [
    "APPLICATION_ID",
    "BUSY_TIMEOUT_S",
    "DAMAGE",
    "DB_NAME",
    "DEFAULT_LOCATION",
    "ENV_BUSY_TIMEOUT",
    "ENV_STORE",
    "MEMORY_PREFIX",
    "MIGRATIONS",
    "POSTGRES_MIGRATIONS",
    "POSTGRES_PREFIXES",
    "CommitRow",
    "CommitStore",
    "Edge",
    "MemoryStore",
    "Migration",
    "NewSession",
    "ReadOnlyView",
    "RunInfo",
    "SQLiteStore",
    "SessionInfo",
    "Store",
    "damaged",
    "open_store",
    "register_migration",
    "store_location",
]

ENV_STORE = "CTXRULES_STORE"
DEFAULT_LOCATION = ".ctxrules"
_NAMED = (MEMORY_PREFIX, *POSTGRES_PREFIXES)  # locations that are no paths


def store_location(path: str | os.PathLike[str] | None = None) -> Path:
    """The store location: ``path``, else ``$CTXRULES_STORE``, else ``./.ctxrules``.

    ``StoreError`` for an empty ``path`` or an empty ``$CTXRULES_STORE`` (say what you
    mean: leave it out, or unset it, for the default).
    """
    if path is not None and str(path) == "":
        raise StoreError(
            "the store location is empty",
            where="--store",
            hint="pass --store PATH (a directory or a .db file), or leave it out for "
            f"${ENV_STORE} or ./{DEFAULT_LOCATION}",
        )
    if path is None:
        path = os.environ.get(ENV_STORE)
        if path is not None and not path.strip():
            raise StoreError(
                f"${ENV_STORE} is set but empty",
                where=ENV_STORE,
                hint=f"unset it for ./{DEFAULT_LOCATION}, or set it to a store directory",
            )
        path = path or DEFAULT_LOCATION
    return Path(path)


def open_store(
    path: str | os.PathLike[str] | None = None,
    *,
    busy_timeout: float | None = None,
    create: bool = True,
) -> CommitStore:
    """Open (creating if needed) the store at ``path`` (see ``store_location``).

    ``path`` may also be ``memory:NAME`` or a ``postgresql://`` URL (see the module
    docstring).  ``busy_timeout`` (SQLite, PostgreSQL): seconds a write waits for
    another process's lock (default ``$CTXRULES_BUSY_TIMEOUT``, else 60).  ``StoreError``
    if the location cannot hold a store (not writable, another program's file or
    schema, a schema this ctxrules does not know, no server at the URL).
    With ``create=False`` a location holding no store yet is a ``StoreError`` naming it,
    and nothing is created there.
    """
    if path is None and os.environ.get(ENV_STORE, "").startswith(_NAMED):
        path = os.environ[ENV_STORE]
    if isinstance(path, str) and path.startswith(POSTGRES_PREFIXES):
        return _open_postgres(path, busy_timeout=busy_timeout, create=create)
    if isinstance(path, str) and path.startswith(MEMORY_PREFIX):
        name = path[len(MEMORY_PREFIX) :]
        if not create and name and not _memory_exists(name):
            raise no_store(
                path,
                "no ctxrules store of that name in this process (memory stores end with it)",
            )
        return MemoryStore(name)
    location = store_location(path)
    db = database_path(location)
    if not create and not db.exists():
        what = "holds no ctxrules store" if location.is_dir() else "no ctxrules store there"
        raise no_store(str(location), what)
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the store directory: {exc.strerror}",
            where=str(db.parent),
            hint=f"pass --store PATH or set {ENV_STORE} to a writable place",
        ) from None
    return SQLiteStore(db, busy_timeout=busy_timeout)


def _open_postgres(url: str, *, busy_timeout: float | None, create: bool) -> CommitStore:
    try:
        # deferred: psycopg is the optional extra ctxrules[postgresql]
        from .postgres import PostgresStore
    except ImportError as exc:  # the driver is an optional dependency
        raise StoreError(
            f"PostgreSQL stores need the psycopg driver ({exc})",
            where=ENV_STORE if url == os.environ.get(ENV_STORE) else "--store",
            hint="pip install 'ctxrules[postgresql]'",
        ) from None
    return PostgresStore(url, busy_timeout=busy_timeout, create=create)
