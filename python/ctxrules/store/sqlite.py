"""The embedded default store: one SQLite file in WAL mode with ``synchronous=FULL``.

WAL lets readers run while one writer appends; ``synchronous=FULL`` makes SQLite sync
the WAL on every commit, so an append that returned is on disk even if the process is
killed or the machine loses power the next moment.  Writers take the lock up front
(``BEGIN IMMEDIATE``) so concurrent processes queue instead of failing half-way; the
``seq`` counter lives in the session row and is read and bumped in the same
transaction as the insert, which is what makes ``seq`` gap-free and never reused.
Reads never take the write lock.  A writer waits ``busy_timeout`` seconds for another
one (``CTXRULES_BUSY_TIMEOUT``, default 60), then fails naming the holder.

A file is inspected before it is opened for writing, and a new store is created
complete (``_sqlite_open``): another program's database is refused untouched.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError
from ._sql import BUSY_TIMEOUT_S, ENV_BUSY_TIMEOUT, SQLStore, resolve_busy_timeout
from ._sqlite_open import (
    APPLICATION_ID,
    create_store_file,
    inspect_store_file,
    write_lock_holder,
)
from .migrations import apply_pending, up_to_date

__all__ = ["BUSY_TIMEOUT_S", "DB_NAME", "ENV_BUSY_TIMEOUT", "SQLiteStore", "database_path"]

DB_NAME = "ctxrules.db"


class SQLiteStore(SQLStore):
    """The ``CommitStore`` backed by one SQLite file (see the module docstring).

    ``busy_timeout``: seconds a write waits for another process's (see
    ``resolve_busy_timeout``).
    """

    _INTEGRITY = (sqlite3.IntegrityError,)

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float | None = None):
        self.location = str(path)
        self.busy_timeout = resolve_busy_timeout(busy_timeout)
        db = Path(path)
        if not inspect_store_file(db):  # refuses a file that is not ours, untouched
            create_store_file(db)
        try:
            self._conn = sqlite3.connect(
                self.location,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"cannot open the store: {exc}",
                where=self.location,
                hint="point --store / CTXRULES_STORE at a ctxrules store directory",
            ) from None
        self._lock = threading.RLock()
        self._depth = 0
        self._chains = {}
        try:
            self.migrate()
        except BaseException:
            self._conn.close()
            raise

    # -- transactions and schema -------------------------------------------------
    def _busy(self, exc: sqlite3.OperationalError) -> StoreError:
        if "locked" not in str(exc) and "busy" not in str(exc):
            return StoreError(f"cannot start a write: {exc}", where=self.location)
        holder = write_lock_holder(self.location)
        who = f"another process ({holder})" if holder else "another process"
        return StoreError(
            f"the store is busy: {who} holds its write lock and did not release it "
            f"within {self.busy_timeout:g} s",
            where=self.location,
            hint=f"wait for that writer to finish and run this again, or set "
            f"{ENV_BUSY_TIMEOUT}=SECONDS to wait longer",
        )

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``); nested use joins the outer one."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self._conn
                finally:
                    self._depth -= 1
                return
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise self._busy(exc) from None
            self._depth = 1
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.OperationalError as exc:
                    self._conn.execute("ROLLBACK")
                    raise StoreError(f"commit failed: {exc}", where=self.location) from None
            finally:
                self._depth = 0

    def migrate(self) -> list[int]:
        """Apply registered migrations this store lacks, in version order; stamp a store
        made before stores carried an ``application_id`` with ours."""
        stamped = self._conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        if stamped and up_to_date(self._conn):
            return []  # the common case: no write lock needed just to open
        with self.transaction() as conn:
            applied = apply_pending(conn, self.location)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            return applied

    def schema_versions(self) -> dict[int, str]:
        """Applied migrations: version → name."""
        return dict(self._conn.execute("SELECT version, name FROM schema_migrations").fetchall())

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


def database_path(location: str | os.PathLike[str]) -> Path:
    """The SQLite file for a store location: a directory holds ``ctxrules.db``.

    An existing file, or a name ending in ``.db`` / ``.sqlite`` / ``.sqlite3``, is the
    database file itself.
    """
    p = Path(location)
    if p.is_file() or p.suffix in (".db", ".sqlite", ".sqlite3"):
        return p
    return p / DB_NAME
