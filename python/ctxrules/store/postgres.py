"""The PostgreSQL store: the same ``CommitStore`` on a server, for fleets of agents that
write to one shared store.

``open_store("postgresql://USER@HOST:PORT/DB")`` (or ``postgres://``, any libpq URL)
opens the store in the connection's current schema (``_pg_schema``: created on first
use in an empty schema, refused untouched in another program's).  The statements are
SQLite's (``_sql``); what PostgreSQL adds is finer locking, so writers of different
sessions do not wait for each other:

- ``seq``: an append locks its session row (``SELECT … FOR UPDATE``), reads and bumps
  the row's ``next_seq`` and inserts the node in one transaction.  Appenders to one
  session queue on that row; a transaction that fails or whose client dies is rolled
  back by the server with its bump, so ``seq`` stays dense and unique (and
  ``UNIQUE (session_id, seq)`` backs it up).  A sequence would leave gaps on rollback
  and could not count per session.
- read-modify-writes (metadata, the run guard, HEAD) lock the session row; a fork
  locks its base row for share, so the base cannot grow while the fork reads its seq.
- a commit put takes a transaction-scoped advisory lock on its (session, head, rule
  set), which makes the compare-and-set of ``put_commit(if_latest=…)`` atomic; the
  lock goes with the transaction, also when the client dies.

Reads take no locks (MVCC) and see what was committed when they run.  Every write is
committed with ``synchronous_commit = on`` (durable when acknowledged).  A lock wait
longer than ``busy_timeout`` (``CTXRULES_BUSY_TIMEOUT``, default 60 s) fails with a
``StoreError`` naming the oldest open transaction; a deadlock or a lost connection is
a ``StoreError`` saying what happened to the write; a value PostgreSQL cannot hold
(a NUL character in an id, which SQLite takes) a ``ValidationError``.  Nested
``transaction()`` blocks are savepoints: a nested block that fails is undone alone
(PostgreSQL cannot go on with a transaction after a failed statement otherwise), the
outermost block commits.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg.errors
from psycopg import conninfo

from ..errors import StoreError, ValidationError
from ._pg_schema import open_schema, recorded, redact
from ._sql import ENV_BUSY_TIMEOUT, SQLStore, resolve_busy_timeout

__all__ = ["CONNECT_TIMEOUT_S", "PostgresStore"]

#: Seconds to wait for the server to accept a connection (unless the URL says).
CONNECT_TIMEOUT_S = 10


class _Conn:
    """The psycopg connection as the shared SQL code uses it: ``?`` placeholders, and
    errors outside a transaction turned into ``StoreError``s on the spot."""

    def __init__(self, store: PostgresStore):
        self._store = store
        self._sql: dict[str, str] = {}

    def _query(self, sql: str) -> str:
        query = self._sql.get(sql)
        if query is None:
            # Our statements hold no literal '?'; a literal '%' must be doubled.
            query = self._sql[sql] = sql.replace("%", "%%").replace("?", "%s")
        return query

    def execute(self, sql: str, args: Sequence[Any] | None = None) -> psycopg.Cursor[Any]:
        """Run one statement; ``?`` placeholders take ``args``."""
        raw = self._store._raw
        try:
            if args is None:
                return raw.execute(sql.encode())  # as written: no placeholders to parse
            return raw.execute(self._query(sql), args)
        except psycopg.Error as exc:
            if self._store._depth:
                raise  # the transaction maps it once it has rolled back
            raise self._store._mapped(exc) from None

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each row (pipelined: one round trip for all)."""
        with self._store._raw.cursor() as cur:
            cur.executemany(self._query(sql), rows)


class PostgresStore(SQLStore):
    """The ``CommitStore`` on a PostgreSQL server (see the module docstring).

    ``busy_timeout``: seconds a write waits for a lock another transaction holds.  With
    ``create=False`` an empty schema is a ``StoreError`` and nothing is created.
    """

    _INTEGRITY = (psycopg.IntegrityError,)
    _ORDER = "n"
    _FOR_UPDATE = " FOR UPDATE"
    _FOR_SHARE = " FOR SHARE"

    def __init__(self, url: str, *, busy_timeout: float | None = None, create: bool = True):
        self._url = url
        self.location = redact(url)
        self.busy_timeout = resolve_busy_timeout(busy_timeout)
        self._lock = threading.RLock()
        self._depth = 0
        self._chains = {}
        self._conn = _Conn(self)
        self._raw = self._connect()
        try:
            open_schema(self._conn, self.transaction, self.location, create=create)
        except BaseException:
            self._raw.close()
            raise

    # -- connection, transactions and schema -----------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        try:
            params = conninfo.conninfo_to_dict(self._url)
        except psycopg.ProgrammingError as exc:
            raise StoreError(
                f"not a PostgreSQL URL: {exc}",
                where=self.location,
                hint="write it as postgresql://USER@HOST:PORT/DATABASE",
            ) from None
        extra: dict[str, Any] = {}
        if "connect_timeout" not in params:
            extra["connect_timeout"] = CONNECT_TIMEOUT_S
        if "application_name" not in params:
            # Names this process to whoever finds it holding a lock (pg_stat_activity).
            extra["application_name"] = f"ctxrules pid {os.getpid()} on {socket.gethostname()}"
        try:
            raw = psycopg.connect(self._url, autocommit=True, **extra)
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(
                f"cannot connect to the PostgreSQL server: {first}",
                where=self.location,
                hint="check that the server runs and the URL's host, port, user and database; "
                "ctxrules creates no databases (createdb NAME makes one)",
            ) from None
        wait_ms = max(1, round(self.busy_timeout * 1000))  # 0 would mean: wait forever
        # Durable on acknowledgement whatever the server's default, as SQLite's FULL sync.
        raw.execute(f"SET synchronous_commit = on; SET lock_timeout = {wait_ms}".encode())
        return raw

    def _mapped(self, exc: psycopg.Error) -> Exception:
        """The ``StoreError`` saying what ``exc`` means for the caller (else ``exc``)."""
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return StoreError(
                f"the store is busy: {self._holder()} holds a lock this write needs and "
                f"did not release it within {self.busy_timeout:g} s; nothing was written",
                where=self.location,
                hint=f"wait for that writer to finish and run this again, or set "
                f"{ENV_BUSY_TIMEOUT}=SECONDS to wait longer",
            )
        if isinstance(exc, psycopg.DataError):  # e.g. a NUL character, which SQLite takes
            return ValidationError(
                f"the PostgreSQL store cannot hold this value: {str(exc).strip()}",
                where=self.location,
                hint="PostgreSQL text cannot contain NUL characters; numbers must fit 64 bits",
            )
        if isinstance(exc, psycopg.errors.DeadlockDetected):
            return StoreError(
                "a deadlock with another writer: the server rolled this transaction back",
                where=self.location,
                hint="run it again",
            )
        if isinstance(exc, psycopg.OperationalError) and self._raw.broken:
            return StoreError(
                f"lost the connection to the PostgreSQL server ({str(exc).strip() or exc!r}); "
                "a write in flight may or may not have been committed",
                where=self.location,
                hint="check the server, then open the store again and check what is there",
            )
        return exc

    def _holder(self) -> str:
        # Our own transaction was rolled back, so ask on a connection of its own.
        try:
            with psycopg.connect(self._url, autocommit=True, connect_timeout=5) as conn:
                row = conn.execute(
                    "SELECT pid, application_name, client_addr::text, "
                    "extract(epoch FROM now() - xact_start) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND xact_start IS NOT NULL ORDER BY xact_start LIMIT 1"
                ).fetchone()
        except psycopg.Error:
            row = None
        if row is None:
            return "another transaction"
        pid, app, addr, age = row
        who = ", ".join(
            x for x in (app or "", f"from {addr}" if addr else "", f"open {float(age):.0f} s") if x
        )
        return f"the transaction of server process {pid} ({who})"

    @contextmanager
    def transaction(self) -> Iterator[_Conn]:
        """A write transaction; a nested one is a savepoint of the outer one."""
        with self._lock:
            outer = self._depth == 0
            if outer and self._raw.broken:
                self._raw = self._connect()  # e.g. after a server restart
            self._depth += 1
            try:
                with self._raw.transaction():
                    yield self._conn
            except psycopg.Error as exc:
                if not outer:
                    raise
                raise self._mapped(exc) from None
            finally:
                self._depth -= 1

    def migrate(self) -> list[int]:
        """Apply registered PostgreSQL migrations this store lacks, in version order."""
        return open_schema(self._conn, self.transaction, self.location, create=True)

    def schema_versions(self) -> dict[int, str]:
        """Applied migrations: version → name."""
        return recorded(self._conn)

    def _lock_key(self, conn: Any, key: str) -> None:
        """Hold a transaction-scoped advisory lock on ``key`` (see the module docstring)."""
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (key,))

    def close(self) -> None:
        """Close the connection."""
        self._raw.close()
