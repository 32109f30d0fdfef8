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

Every SQLite error is a one-line ``StoreError`` naming the store and what to do
(``sqlite_error``): a full disk (nothing of the write was stored: the transaction is
rolled back, or SQLite rolled it back itself), a damaged file, an I/O error, a store
that cannot be written.  A read outside a transaction is mapped where it fails; a
failure inside one is mapped once the transaction is rolled back.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ._sql import BUSY_TIMEOUT_S, ENV_BUSY_TIMEOUT, SQLStore, resolve_busy_timeout
from ._sqlite_open import (
    APPLICATION_ID,
    create_store_file,
    inspect_store_file,
    sqlite_error,
    write_lock_holder,
)
from .migrations import apply_pending, up_to_date

__all__ = [
    "BUSY_TIMEOUT_S",
    "DB_NAME",
    "ENV_BUSY_TIMEOUT",
    "SQLiteStore",
    "database_path",
    "sqlite_error",
]

DB_NAME = "ctxrules.db"


class _Cursor:
    """A cursor whose fetches map SQLite errors like ``_Conn`` does."""

    def __init__(self, cur: sqlite3.Cursor, store: SQLiteStore):
        self._cur = cur
        self._store = store

    def _call(self, fetch: Any) -> Any:
        try:
            return fetch()
        except sqlite3.Error as exc:
            raise self._store._outside(exc) from None

    def fetchone(self) -> Any:
        return self._call(self._cur.fetchone)

    def fetchall(self) -> list[Any]:
        return list(self._call(self._cur.fetchall))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount


class _Conn:
    """The sqlite3 connection as the shared SQL code uses it: an error outside a
    transaction becomes a ``StoreError`` where it happens; inside one it goes to the
    transaction (which rolls back, then maps it), so the code inside can still catch
    a constraint violation."""

    def __init__(self, raw: sqlite3.Connection, store: SQLiteStore):
        self.raw = raw
        self._store = store

    def execute(self, sql: str, args: Sequence[Any] = ()) -> _Cursor:
        try:
            return _Cursor(self.raw.execute(sql, args), self._store)
        except sqlite3.Error as exc:
            raise self._store._outside(exc) from None

    def executemany(self, sql: str, rows: Any) -> _Cursor:
        try:
            return _Cursor(self.raw.executemany(sql, rows), self._store)
        except sqlite3.Error as exc:
            raise self._store._outside(exc) from None

    def close(self) -> None:
        self.raw.close()


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
        self._lock = threading.RLock()
        self._depth = 0
        try:
            raw = sqlite3.connect(
                self.location,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            raw.execute("PRAGMA journal_mode=WAL")
            raw.execute("PRAGMA synchronous=FULL")
            raw.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            mapped = sqlite_error(exc, self.location, "opening it")
            raise StoreError(
                f"cannot open the store: {mapped.message}",
                where=self.location,
                hint=mapped.hint,
            ) from None
        self._conn = _Conn(raw, self)
        self._chains = {}
        try:
            self.migrate()
        except BaseException:
            self._conn.close()
            raise

    # -- transactions and schema -------------------------------------------------
    def _outside(self, exc: sqlite3.Error) -> Exception:
        """``exc`` as it leaves a statement: mapped outside a transaction, raw inside."""
        return exc if self._depth else sqlite_error(exc, self.location, "reading it")

    def _rollback(self) -> None:
        # SQLite rolls a transaction back itself on some errors (a full disk): then
        # there is none left to roll back.
        if self._conn.raw.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.raw.execute("ROLLBACK")

    def _busy(self, exc: sqlite3.Error) -> StoreError:
        if "locked" not in str(exc) and "busy" not in str(exc):
            return sqlite_error(exc, self.location, "starting a write")
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
    def transaction(self) -> Iterator[_Conn]:
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
                self._conn.raw.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._busy(exc) from None
            self._depth = 1
            try:
                yield self._conn
            except sqlite3.Error as exc:
                self._rollback()
                raise sqlite_error(exc, self.location, "writing it") from None
            except BaseException:
                self._rollback()
                raise
            else:
                try:
                    self._conn.raw.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._rollback()
                    raise sqlite_error(exc, self.location, "committing a write") from None
            finally:
                self._depth = 0

    def migrate(self) -> list[int]:
        """Apply registered migrations this store lacks, in version order; stamp a store
        made before stores carried an ``application_id`` with ours."""
        stamped = self._conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        if stamped and up_to_date(self._conn.raw):
            return []  # the common case: no write lock needed just to open
        with self.transaction() as conn:
            applied = apply_pending(conn.raw, self.location)
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
