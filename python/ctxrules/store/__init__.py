"""Where the history graph lives: the ``Store`` interface and the embedded SQLite backend.

``open_store()`` finds the store location from its argument, then ``$CTXRULES_STORE``,
then ``./.ctxrules/``; a directory holds one SQLite file (``ctxrules.db``).  Opening
creates the file on first use and applies the registered schema migrations.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import StoreError
from .base import Edge, NewSession, RunInfo, SessionInfo, Store
from .migrations import MIGRATIONS, Migration, register_migration
from .sqlite import DB_NAME, SQLiteStore, database_path

__all__ = [
    "DB_NAME",
    "DEFAULT_LOCATION",
    "ENV_STORE",
    "MIGRATIONS",
    "Edge",
    "Migration",
    "NewSession",
    "RunInfo",
    "SQLiteStore",
    "SessionInfo",
    "Store",
    "open_store",
    "register_migration",
    "store_location",
]

ENV_STORE = "CTXRULES_STORE"
DEFAULT_LOCATION = ".ctxrules"


def store_location(path: str | os.PathLike[str] | None = None) -> Path:
    """The store location: ``path``, else ``$CTXRULES_STORE``, else ``./.ctxrules``."""
    if path is None or str(path) == "":
        path = os.environ.get(ENV_STORE) or DEFAULT_LOCATION
    return Path(path)


def open_store(path: str | os.PathLike[str] | None = None) -> Store:
    """Open (creating if needed) the store at ``path`` (see ``store_location``).

    ``StoreError`` if the location cannot hold a store (not writable, not a SQLite
    file, a schema this ctxrules does not understand).
    """
    db = database_path(store_location(path))
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the store directory: {exc.strerror}",
            where=str(db.parent),
            hint=f"pass --store PATH or set {ENV_STORE} to a writable place",
        ) from None
    return SQLiteStore(db)
