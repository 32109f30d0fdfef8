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

import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import DagError, StoreError
from ..model import Call
from ._shared import (
    check_edges,
    check_reads,
    continuing,
    decode_node,
    fork_chain,
    is_visible_in,
    merged_metadata,
    node_body,
    not_found,
    unknown_keys,
)
from ._sqlite_commits import Commits
from ._sqlite_guard import GuardAndKv
from ._sqlite_open import (
    APPLICATION_ID,
    create_store_file,
    inspect_store_file,
    write_lock_holder,
)
from .base import Edge, NewSession, SessionInfo
from .migrations import apply_pending, up_to_date

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["BUSY_TIMEOUT_S", "DB_NAME", "ENV_BUSY_TIMEOUT", "SQLiteStore"]

DB_NAME = "ctxrules.db"
#: How long a writer waits for another process's transaction before giving up (seconds).
BUSY_TIMEOUT_S = 60.0
#: Environment variable overriding ``BUSY_TIMEOUT_S``.
ENV_BUSY_TIMEOUT = "CTXRULES_BUSY_TIMEOUT"

_SESSION_COLS = (
    "id, created_at, head, source, import_key, base_session, base_node, base_seq, next_seq, "
    "metadata"
)


def _node_row(stored: Call) -> tuple[Any, ...]:
    """The ``nodes`` row of a node (``node_body`` checks it would read back)."""
    return (
        stored.id,
        stored.session_id,
        stored.seq,
        stored.role,
        stored.predecessor,
        stored.caller,
        node_body(stored),
    )


def _busy_timeout(value: float | None = None) -> float:
    """The busy timeout to use: ``value``, else ``$CTXRULES_BUSY_TIMEOUT``, else 60 s."""
    where, raw = "busy_timeout", repr(value)
    if value is None:
        raw = os.environ.get(ENV_BUSY_TIMEOUT, "").strip()
        if not raw:
            return BUSY_TIMEOUT_S
        where = ENV_BUSY_TIMEOUT
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
    if not math.isfinite(value) or value < 0:
        raise StoreError(
            f"the busy timeout must be a finite number of seconds >= 0, got {raw}",
            where=where,
            hint=f"e.g. {ENV_BUSY_TIMEOUT}=5",
        )
    return float(value)


def _session(row: tuple[Any, ...]) -> SessionInfo:
    sid, created, head, source, key, base_s, base_n, base_seq, next_seq, meta = row
    return SessionInfo(
        id=sid,
        created_at=created,
        head=head,
        source=source,
        import_key=key,
        base_session=base_s,
        base_node=base_n,
        base_seq=base_seq,
        metadata=msgspec.json.decode(meta),
        # seq values are assigned contiguously from base_seq + 1 inside the insert's
        # transaction, so the count of owned nodes needs no scan.
        calls=next_seq - 1 - base_seq,
    )


class SQLiteStore(GuardAndKv, Commits):
    """The ``CommitStore`` backed by one SQLite file (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float | None = None):
        self.location = str(path)
        self.busy_timeout = _busy_timeout(busy_timeout)
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
        self._chains: dict[str, list[tuple[str, int | None]]] = {}
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

    # -- sessions ------------------------------------------------------------------
    def _session_row(self, session_id: str) -> tuple[Any, ...]:
        row = self._conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise not_found("session", session_id, self.location)
        return row

    def create_session(self, **spec: Unpack[NewSession]) -> SessionInfo:
        """Create a session with its nodes and HEAD in one transaction (see ``Store``)."""
        unknown_keys(dict(spec), NewSession.__annotations__)
        sid = spec.get("session_id") or f"s_{os.urandom(8).hex()}"
        base_session, base_node = spec.get("base_session"), spec.get("base_node")
        import_key, nodes, head = spec.get("import_key"), spec.get("nodes", ()), spec.get("head")
        with self.transaction() as conn:
            base_seq = 0
            if base_session is not None:
                base = _session(self._session_row(base_session))
                base_seq = base.base_seq + base.calls
                if base_node is not None and not self.is_visible(base_session, base_node):
                    raise DagError(
                        f"node {base_node!r} is not part of session {base_session!r}",
                        hint="fork from a node that `ctxrules log` shows for that session",
                    )
            try:
                conn.execute(
                    "INSERT INTO sessions (id, created_at, head, source, import_key, base_session,"
                    " base_node, base_seq, next_seq, metadata) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        sid,
                        time.time(),
                        None,
                        spec.get("source", ""),
                        import_key,
                        base_session,
                        base_node,
                        base_seq,
                        base_seq + 1,
                        msgspec.json.encode(spec.get("metadata") or {}),
                    ),
                )
            except sqlite3.IntegrityError:
                raise StoreError(
                    f"session {sid!r} or import key {import_key!r} exists already",
                    where=self.location,
                ) from None
            self._chains.pop(sid, None)
            if nodes:
                self._insert_batch(conn, sid, base_seq + 1, nodes)
            if head is not None:
                self._set_head(conn, sid, head)
            return _session(self._session_row(sid))

    def _insert_batch(
        self, conn: sqlite3.Connection, sid: str, first_seq: int, nodes: Sequence[Call]
    ) -> None:
        seen: set[str] = set()
        rows = []
        for offset, call in enumerate(nodes):
            check_edges(sid, call, lambda e: e in seen or self.is_visible(sid, e))
            check_reads(call, self._exists, batch=seen)
            stored = msgspec.structs.replace(call, seq=first_seq + offset, session_id=sid)
            seen.add(call.id)
            rows.append(_node_row(stored))
        try:
            conn.executemany("INSERT INTO nodes VALUES (?,?,?,?,?,?,?)", rows)
        except sqlite3.IntegrityError as exc:
            raise DagError(f"duplicate node id in session {sid!r}: {exc}") from None
        conn.execute("UPDATE sessions SET next_seq = ? WHERE id = ?", (first_seq + len(nodes), sid))

    def _exists(self, node_id: str) -> bool:
        return (
            self._conn.execute("SELECT 1 FROM nodes WHERE id = ?", (node_id,)).fetchone()
            is not None
        )

    def get_session(self, session_id: str) -> SessionInfo:
        """The session row; ``NotFoundError`` if unknown."""
        return _session(self._session_row(session_id))

    def find_session(self, import_key: str) -> SessionInfo | None:
        """The session created with ``import_key``, if any."""
        row = self._conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE import_key = ?", (import_key,)
        ).fetchone()
        return _session(row) if row else None

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, oldest first."""
        rows = self._conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions ORDER BY created_at, rowid"
        ).fetchall()
        return [_session(r) for r in rows]

    def _set_head(self, conn: sqlite3.Connection, sid: str, node_id: str | None) -> None:
        if node_id is not None and not self.is_visible(sid, node_id):
            raise DagError(
                f"node {node_id!r} is not part of session {sid!r}",
                hint="`ctxrules log SESSION` lists the nodes you can check out",
            )
        conn.execute("UPDATE sessions SET head = ? WHERE id = ?", (node_id, sid))

    def set_head(self, session_id: str, node_id: str | None) -> None:
        """Move HEAD to a node visible in the session."""
        with self.transaction() as conn:
            self._session_row(session_id)
            self._set_head(conn, session_id, node_id)

    def update_metadata(self, session_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the session metadata; a ``None`` value deletes the key."""
        with self.transaction() as conn:
            merged = merged_metadata(_session(self._session_row(session_id)).metadata, patch)
            conn.execute(
                "UPDATE sessions SET metadata = ? WHERE id = ?",
                (msgspec.json.encode(merged), session_id),
            )
            return merged

    # -- nodes -----------------------------------------------------------------------
    def _chain(self, session_id: str) -> list[tuple[str, int | None]]:
        # (session, highest visible seq) from the session down its fork bases.  Base
        # links never change once written, so the chain is cached per store object.
        chain = self._chains.get(session_id)
        if chain is None:
            chain = fork_chain(session_id, self._base_of)
            if chain:  # a session another process has yet to create is looked up again
                self._chains[session_id] = chain
        return chain

    def _base_of(self, sid: str) -> tuple[str | None, int] | None:
        row = self._conn.execute(
            "SELECT base_session, base_seq FROM sessions WHERE id = ?", (sid,)
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def _visible_sql(self, session_id: str) -> tuple[str, list[Any]]:
        parts: list[str] = []
        args: list[Any] = []
        for sid, limit in self._chain(session_id):
            if limit is None:
                parts.append("session_id = ?")
                args.append(sid)
            else:
                parts.append("(session_id = ? AND seq <= ?)")
                args.extend((sid, limit))
        return "(" + " OR ".join(parts or ["0"]) + ")", args

    def append(
        self, session_id: str, call: Call, *, at_head: bool = False, set_head: bool = False
    ) -> Call:
        """Append one node; ``seq`` and, with ``at_head``, the predecessor are set here."""
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT head, next_seq FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                self._session_row(session_id)  # raises NotFoundError
            head, seq = row
            if at_head:
                call = continuing(call, head)
            check_edges(session_id, call, lambda e: self.is_visible(session_id, e))
            check_reads(call, self._exists)
            stored = msgspec.structs.replace(call, seq=seq, session_id=session_id)
            try:
                conn.execute("INSERT INTO nodes VALUES (?,?,?,?,?,?,?)", _node_row(stored))
            except sqlite3.IntegrityError:
                raise DagError(f"node id {stored.id!r} exists already") from None
            conn.execute(
                "UPDATE sessions SET next_seq = ?"
                + (", head = ?" if at_head or set_head else "")
                + " WHERE id = ?",
                (seq + 1, stored.id, session_id) if at_head or set_head else (seq + 1, session_id),
            )
            return stored

    def get_node(self, node_id: str) -> Call:
        """A node by id; ``NotFoundError`` if unknown."""
        row = self._conn.execute("SELECT body FROM nodes WHERE id = ?", (node_id,)).fetchone()
        if row is None:
            raise not_found("node", node_id, self.location)
        return decode_node(row[0])

    def nodes(self, session_id: str, *, inherited: bool = False) -> list[Call]:
        """The session's nodes in ``seq`` order; ``inherited`` adds a fork's base nodes."""
        self._session_row(session_id)
        if inherited:
            where, args = self._visible_sql(session_id)
        else:
            where, args = "session_id = ?", [session_id]
        rows = self._conn.execute(
            f"SELECT body FROM nodes WHERE {where} ORDER BY seq", args
        ).fetchall()
        return [decode_node(r[0]) for r in rows]

    def iter_nodes(self, session_id: str) -> Iterator[Call]:
        """The session's own nodes in ``seq`` order, streamed."""
        cur = self._conn.execute(
            "SELECT body FROM nodes WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        for (body,) in cur:
            yield decode_node(body)

    def children(self, node_id: str, *, session_id: str, edge: Edge) -> list[Call]:
        """Visible nodes whose ``edge`` is ``node_id``, in ``seq`` order."""
        if edge not in ("predecessor", "caller"):
            raise StoreError(f"unknown edge {edge!r}", hint="use 'predecessor' or 'caller'")
        where, args = self._visible_sql(session_id)
        rows = self._conn.execute(
            f"SELECT body FROM nodes WHERE {edge} = ? AND {where} ORDER BY seq",
            [node_id, *args],
        ).fetchall()
        return [decode_node(r[0]) for r in rows]

    def is_visible(self, session_id: str, node_id: str) -> bool:
        """Whether the node is the session's own or inherited from its fork base."""
        row = self._conn.execute(
            "SELECT session_id, seq FROM nodes WHERE id = ?", (node_id,)
        ).fetchone()
        if row is None:
            return False
        return is_visible_in(self._chain(session_id), row[0], row[1])


def database_path(location: str | os.PathLike[str]) -> Path:
    """The SQLite file for a store location: a directory holds ``ctxrules.db``.

    An existing file, or a name ending in ``.db`` / ``.sqlite`` / ``.sqlite3``, is the
    database file itself.
    """
    p = Path(location)
    if p.is_file() or p.suffix in (".db", ".sqlite", ".sqlite3"):
        return p
    return p / DB_NAME
