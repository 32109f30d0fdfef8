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

Every driver error is a one-line ``StoreError`` (or ``ValidationError``) saying what it
means for the caller.  A read outside a transaction that finds the connection lost
(a server restart) reconnects and runs again; a write reconnects at its next
transaction (whether one in flight was committed cannot be known, so it is not
repeated).  Timeouts come from the one busy timeout ``T``: ``lock_timeout`` is ``T``,
``statement_timeout`` ``2T + 10`` s (unless the URL or the role set one), TCP
keepalives find a server that went away, and a call the server does not answer within
the statement timeout and ``WATCHDOG_SLACK_S`` more (a frozen server, whose kernel
still answers keepalives) is ended by closing the connection's socket.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg.errors
from psycopg import conninfo

from ..errors import StoreError, ValidationError
from ._pg_schema import open_schema, recorded, redact
from ._sql import ENV_BUSY_TIMEOUT, SQLStore, resolve_busy_timeout

__all__ = [
    "CONNECT_TIMEOUT_S",
    "KEEPALIVES",
    "WATCHDOG_SLACK_S",
    "PostgresStore",
    "statement_timeout_s",
]

#: Seconds to wait for the server to accept a connection (unless the URL says).
CONNECT_TIMEOUT_S = 10
#: libpq TCP keepalive settings (each unless the URL says): a server that went away
#: is noticed after about a minute of silence.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
              "keepalives_count": 3}  # fmt: skip
#: Seconds past the statement timeout after which a call the server never answered is
#: ended by the client (the server ends a slow statement itself before that).
WATCHDOG_SLACK_S = 5.0
#: Rows sent per ``executemany`` call: each call is watched on its own.
_MANY = 1000


def statement_timeout_s(busy_timeout: float) -> float:
    """The statement timeout a store sets for a busy timeout: a statement may wait that
    long for a lock and then needs time to run."""
    return 2 * busy_timeout + 10


class _Watch:
    """One store's armed call: the socket to shut and when (see ``_Watchdog``)."""

    __slots__ = ("deadline", "fd", "fired")

    def __init__(self) -> None:
        self.deadline = 0.0
        self.fd = -1
        self.fired = False


class _Watchdog:
    """Ends a call to the server that outlasts its deadline by shutting the connection's
    socket down (the driver's wait then fails and the connection is broken).  One
    thread for the process, started at the first call, asleep while nothing is armed."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: set[_Watch] = set()
        self._thread: threading.Thread | None = None

    def arm(self, watch: _Watch, fd: int, seconds: float) -> None:
        with self._cond:
            watch.deadline, watch.fd, watch.fired = time.monotonic() + seconds, fd, False
            self._armed.add(watch)
            if self._thread is None or not self._thread.is_alive():  # also after a fork
                self._thread = threading.Thread(
                    target=self._run, name="ctxrules-postgres-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def disarm(self, watch: _Watch) -> None:
        with self._cond:
            self._armed.discard(watch)

    def _run(self) -> None:
        with self._cond:
            while True:
                if not self._armed:
                    self._cond.wait()
                    continue
                now = time.monotonic()
                due = [w for w in self._armed if w.deadline <= now]
                if not due:
                    self._cond.wait(min(w.deadline for w in self._armed) - now)
                    continue
                for watch in due:
                    self._armed.discard(watch)
                    watch.fired = True
                    _shut(watch.fd)


def _shut(fd: int) -> None:
    """Shut a socket down for both directions without closing its descriptor."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.detach()  # the driver owns the descriptor


_WATCHDOG = _Watchdog()


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
        store = self._store
        query: Any = sql.encode() if args is None else self._query(sql)  # bytes: as written
        if store._depth:  # the transaction maps an error once it has rolled back
            with store._watched():
                return store._raw.execute(query, args)
        # Outside a transaction a statement is a read: after a lost connection it is
        # run again on a new one (a server restart does not end a long-running viewer).
        for attempt in (1, 2):
            if store._raw.broken:
                store._raw = store._connect()
            try:
                with store._watched():
                    return store._raw.execute(query, args)
            except psycopg.Error as exc:
                lost = isinstance(exc, psycopg.OperationalError) and store._raw.broken
                if attempt == 2 or not lost or store._watch.fired:
                    raise store._mapped(exc) from None
        raise AssertionError("unreachable")

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each row (pipelined: a round trip per ``_MANY`` rows)."""
        store = self._store
        with store._raw.cursor() as cur:
            for start in range(0, len(rows), _MANY):
                with store._watched():
                    cur.executemany(self._query(sql), rows[start : start + _MANY])


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
        self._watch = _Watch()
        self._deadline_s = statement_timeout_s(self.busy_timeout) + WATCHDOG_SLACK_S
        self._raw = self._connect()
        try:
            open_schema(self._conn, self.transaction, self.location, create=create)
        except BaseException:
            self.close()
            raise

    # -- connection, transactions and schema -----------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        try:
            params = conninfo.conninfo_to_dict(self._url)
        except (psycopg.ProgrammingError, ValueError) as exc:
            raise StoreError(
                f"not a PostgreSQL URL: {exc}",
                where=self.location,
                hint="write it as postgresql://USER@HOST:PORT/DATABASE",
            ) from None
        extra: dict[str, Any] = {k: v for k, v in KEEPALIVES.items() if k not in params}
        if "connect_timeout" not in params:
            extra["connect_timeout"] = CONNECT_TIMEOUT_S
        if "application_name" not in params:
            # Names this process to whoever finds it holding a lock (pg_stat_activity).
            extra["application_name"] = f"ctxrules pid {os.getpid()} on {socket.gethostname()}"
        try:
            raw = psycopg.connect(self._url, autocommit=True, **extra)
        except (psycopg.Error, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(
                f"cannot connect to the PostgreSQL server: {first}",
                where=self.location,
                hint="check that the server runs and the URL's host, port, user and database; "
                "ctxrules creates no databases (createdb NAME makes one)",
            ) from None
        wait_ms = max(1, round(self.busy_timeout * 1000))  # 0 would mean: wait forever
        statement_ms = round(statement_timeout_s(self.busy_timeout) * 1000)
        try:
            with self._watched(raw):
                # Durable on acknowledgement whatever the server's default, as SQLite's
                # FULL sync; a statement timeout unless the URL or the role set one.
                raw.execute(
                    f"SET synchronous_commit = on; SET lock_timeout = {wait_ms}; "
                    "SELECT set_config('statement_timeout', "
                    f"'{statement_ms}', false) WHERE current_setting('statement_timeout') = '0'"
                    .encode()
                )  # fmt: skip
                own = raw.execute("SELECT current_setting('statement_timeout')").fetchone()
        except psycopg.Error as exc:
            raw.close()
            raise StoreError(
                f"the PostgreSQL server did not take the connection's settings: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
                where=self.location,
                hint="check the server and the URL's options, then run it again",
            ) from None
        self._deadline_s = _seconds(own[0] if own else "0", statement_ms / 1000) + WATCHDOG_SLACK_S
        return raw

    @contextmanager
    def _watched(self, raw: psycopg.Connection[Any] | None = None) -> Iterator[None]:
        """Run a call to the server under the watchdog (see the module docstring)."""
        conn = raw if raw is not None else self._raw
        _WATCHDOG.arm(self._watch, conn.fileno(), self._deadline_s)
        try:
            yield
        finally:
            _WATCHDOG.disarm(self._watch)

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
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if self._watch.fired:
            return StoreError(
                f"the PostgreSQL server did not answer within {self._deadline_s:g} s "
                "(frozen or unreachable): the connection was closed; a write in flight may "
                "or may not have been committed",
                where=self.location,
                hint="check the server, then open the store again and check what is there",
            )
        if isinstance(exc, psycopg.OperationalError) and self._raw.broken:
            return StoreError(
                f"lost the connection to the PostgreSQL server ({first}); "
                "a write in flight may or may not have been committed",
                where=self.location,
                hint="check the server, then open the store again and check what is there",
            )
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return StoreError(
                f"the PostgreSQL server cancelled a statement ({first}); nothing of this write "
                "was committed",
                where=self.location,
                hint="a statement_timeout of the role or the URL may be too short for this; "
                "raise it or run it again",
            )
        return StoreError(
            f"the PostgreSQL server refused a statement: {type(exc).__name__}: {first}",
            where=self.location,
            hint="check the server's log; nothing of this write was committed",
        )

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
                with self._watched():  # BEGIN or SAVEPOINT
                    tx = self._raw.transaction()
                    tx.__enter__()
                try:
                    yield self._conn
                except BaseException as exc:
                    with self._watched():  # ROLLBACK
                        if not tx.__exit__(type(exc), exc, exc.__traceback__):
                            raise
                else:
                    with self._watched():  # COMMIT or RELEASE
                        tx.__exit__(None, None, None)
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
        if getattr(self, "_raw", None) is not None:
            self._raw.close()


def _seconds(setting: str, default: float) -> float:
    """A PostgreSQL duration setting (``"30s"``, ``"1min"``, ``"250"`` ms) in seconds."""
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
    number = setting.rstrip("abcdefghijklmnopqrstuvwxyz")
    try:
        value = float(number) * units.get(setting[len(number) :] or "ms", 1e-3)
    except ValueError:
        return default
    return value if value > 0 else default
