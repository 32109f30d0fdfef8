"""The history graph on a SQL database: one implementation for SQLite and PostgreSQL.

Both backends run the same statements (``?`` placeholders; the PostgreSQL connection
translates them), so they accept, refuse and answer alike.  What differs is declared
by the backend class: how a transaction starts and which locks it holds, the error
class of a constraint violation, the column giving insertion order, and the row locks
a read-modify-write takes.  SQLite's write transaction locks the whole file, so its
row locks are empty; PostgreSQL's lock only the rows (and keys) they name, so writers
of different sessions run side by side.

``seq`` comes from the counter ``next_seq`` in the session row, read (and locked) and
bumped in the same transaction as the insert: a failed or killed transaction bumps
nothing, so ``seq`` is gap-free and never reused, and ``UNIQUE (session_id, seq)``
backs that up in the database.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import DagError, StoreError
from ..model import Node
from ._shared import (
    DAMAGE,
    check_edges,
    check_reads,
    continuing,
    damaged,
    decode_node,
    fork_chain,
    is_visible_in,
    merged_metadata,
    node_body,
    not_found,
    unknown_keys,
)
from ._sql_commits import Commits
from ._sql_guard import GuardAndKv
from .base import Edge, NewSession, SessionInfo

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "BUSY_TIMEOUT_S",
    "ENV_BUSY_TIMEOUT",
    "MAX_BUSY_TIMEOUT_S",
    "SQLStore",
    "resolve_busy_timeout",
]

#: How long a writer waits for another process's lock before giving up (seconds).
BUSY_TIMEOUT_S = 60.0
#: Environment variable overriding ``BUSY_TIMEOUT_S``.
ENV_BUSY_TIMEOUT = "CTXRULES_BUSY_TIMEOUT"
#: The longest busy timeout taken (a day): past it SQLite's and PostgreSQL's own
#: timeouts (milliseconds in a C int) overflow.
MAX_BUSY_TIMEOUT_S = 86_400.0

_SESSION_COLS = (
    "id, created_at, head, source, import_key, base_session, base_node, base_seq, next_seq, "
    "metadata"
)
#: Nodes streamed by ``iter_nodes`` per query (keyset pages: no cursor stays open).
_PAGE = 1000


def resolve_busy_timeout(value: float | None = None) -> float:
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
    if not math.isfinite(value) or not 0 <= value <= MAX_BUSY_TIMEOUT_S:
        raise StoreError(
            f"the busy timeout must be a number of seconds from 0 to {MAX_BUSY_TIMEOUT_S:,.0f}"
            f" (a day), got {raw}",
            where=where,
            hint=f"e.g. {ENV_BUSY_TIMEOUT}=5",
        )
    return float(value)


def _node_row(stored: Node) -> tuple[Any, ...]:
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


def _session(row: tuple[Any, ...], location: str = "") -> SessionInfo:
    try:
        return _session_of(row)
    except DAMAGE as exc:
        raise damaged("a stored session", exc, location) from None


def _session_of(row: tuple[Any, ...]) -> SessionInfo:
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


class SQLStore(GuardAndKv, Commits):
    """The ``CommitStore`` methods over a SQL connection (see the module docstring).

    A backend sets ``location``, ``_conn`` (``execute(sql, args)`` returning a cursor,
    ``executemany``), ``_chains = {}``, ``_depth`` (how many ``transaction()`` blocks
    are open) and ``transaction()``, and overrides the class
    attributes below where its database differs from SQLite.
    """

    location: str
    _conn: Any
    _chains: dict[str, list[tuple[str, int | None]]]
    _depth: int
    #: Exceptions a violated UNIQUE / FOREIGN KEY constraint raises.
    _INTEGRITY: tuple[type[Exception], ...] = ()
    #: The column giving rows their insertion order (sessions, commits).
    _ORDER = "rowid"
    #: Suffixes locking the rows a read returns until the transaction ends.
    _FOR_UPDATE = ""
    _FOR_SHARE = ""

    def transaction(self) -> AbstractContextManager[Any]:
        raise NotImplementedError  # provided by the backend

    def _lock_key(self, conn: Any, key: str) -> None:
        """Hold a lock on ``key`` until the transaction ends (no-op where a write
        transaction locks the whole store)."""

    # -- sessions ------------------------------------------------------------------
    def _session_row(self, session_id: str, lock: str = "") -> tuple[Any, ...]:
        row = self._conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE id = ?{lock}", (session_id,)
        ).fetchone()
        if row is None:
            raise not_found("session", session_id, self.location)
        return tuple(row)

    def create_session(self, **spec: Unpack[NewSession]) -> SessionInfo:
        """Create a session with its nodes and HEAD in one transaction (see ``Store``)."""
        unknown_keys(dict(spec), NewSession.__annotations__)
        sid = spec.get("session_id") or f"s_{os.urandom(8).hex()}"
        base_session, base_node = spec.get("base_session"), spec.get("base_node")
        import_key, nodes, head = spec.get("import_key"), spec.get("nodes", ()), spec.get("head")
        with self.transaction() as conn:
            base_seq = 0
            if base_session is not None:
                # Locked for share: the base cannot grow between reading its seq and
                # committing the fork, so the fork sees the base as it is now.
                base = _session(self._session_row(base_session, self._FOR_SHARE), self.location)
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
            except self._INTEGRITY:
                raise StoreError(
                    f"session {sid!r} or import key {import_key!r} exists already",
                    where=self.location,
                ) from None
            self._chains.pop(sid, None)
            if nodes:
                self._insert_batch(conn, sid, base_seq + 1, nodes)
            if head is not None:
                self._set_head(conn, sid, head)
            return _session(self._session_row(sid), self.location)

    def _insert_batch(self, conn: Any, sid: str, first_seq: int, nodes: Sequence[Node]) -> None:
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
        except self._INTEGRITY as exc:
            raise DagError(f"duplicate node id in session {sid!r}: {exc}") from None
        conn.execute("UPDATE sessions SET next_seq = ? WHERE id = ?", (first_seq + len(nodes), sid))

    def _exists(self, node_id: str) -> bool:
        return (
            self._conn.execute("SELECT 1 FROM nodes WHERE id = ?", (node_id,)).fetchone()
            is not None
        )

    def get_session(self, session_id: str) -> SessionInfo:
        """The session row; ``NotFoundError`` if unknown."""
        return _session(self._session_row(session_id), self.location)

    def find_session(self, import_key: str) -> SessionInfo | None:
        """The session created with ``import_key``, if any.

        Inside a transaction the key stays locked until it ends, so of two imports of
        one file at once the second waits and then finds the first one's session."""
        if self._depth:
            self._lock_key(self._conn, "import\x1f" + import_key)
        row = self._conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE import_key = ?", (import_key,)
        ).fetchone()
        return _session(row, self.location) if row else None

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, oldest first."""
        rows = self._conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions ORDER BY created_at, {self._ORDER}"
        ).fetchall()
        return [_session(r, self.location) for r in rows]

    def _set_head(self, conn: Any, sid: str, node_id: str | None) -> None:
        if node_id is not None and not self.is_visible(sid, node_id):
            raise DagError(
                f"node {node_id!r} is not part of session {sid!r}",
                hint="`ctxrules log SESSION` lists the nodes you can check out",
            )
        conn.execute("UPDATE sessions SET head = ? WHERE id = ?", (node_id, sid))

    def set_head(self, session_id: str, node_id: str | None) -> None:
        """Move HEAD to a node visible in the session."""
        with self.transaction() as conn:
            self._session_row(session_id, self._FOR_UPDATE)
            self._set_head(conn, session_id, node_id)

    def update_metadata(self, session_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the session metadata; a ``None`` value deletes the key."""
        with self.transaction() as conn:
            row = self._session_row(session_id, self._FOR_UPDATE)  # read, merge, write
            merged = merged_metadata(_session(row, self.location).metadata, patch)
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
        return "(" + " OR ".join(parts or ["1 = 0"]) + ")", args

    def append(
        self, session_id: str, call: Node, *, at_head: bool = False, set_head: bool = False
    ) -> Node:
        """Append one node; ``seq`` and, with ``at_head``, the predecessor are set here."""
        with self.transaction() as conn:
            row = conn.execute(
                f"SELECT head, next_seq FROM sessions WHERE id = ?{self._FOR_UPDATE}",
                (session_id,),
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
            except self._INTEGRITY:
                raise DagError(f"node id {stored.id!r} exists already") from None
            conn.execute(
                "UPDATE sessions SET next_seq = ?"
                + (", head = ?" if at_head or set_head else "")
                + " WHERE id = ?",
                (seq + 1, stored.id, session_id) if at_head or set_head else (seq + 1, session_id),
            )
            return stored

    def get_node(self, node_id: str) -> Node:
        """A node by id; ``NotFoundError`` if unknown."""
        row = self._conn.execute("SELECT body FROM nodes WHERE id = ?", (node_id,)).fetchone()
        if row is None:
            raise not_found("node", node_id, self.location)
        return decode_node(row[0], self.location)

    def nodes(self, session_id: str, *, inherited: bool = False) -> list[Node]:
        """The session's nodes in ``seq`` order; ``inherited`` adds a fork's base nodes."""
        self._session_row(session_id)
        if inherited:
            where, args = self._visible_sql(session_id)
        else:
            where, args = "session_id = ?", [session_id]
        rows = self._conn.execute(
            f"SELECT body FROM nodes WHERE {where} ORDER BY seq", args
        ).fetchall()
        return [decode_node(r[0], self.location) for r in rows]

    def iter_nodes(self, session_id: str) -> Iterator[Node]:
        """The session's own nodes in ``seq`` order, streamed a page at a time."""
        after = 0
        while True:
            rows = self._conn.execute(
                "SELECT seq, body FROM nodes WHERE session_id = ? AND seq > ? ORDER BY seq "
                f"LIMIT {_PAGE}",
                (session_id, after),
            ).fetchall()
            for _, body in rows:
                yield decode_node(body, self.location)
            if len(rows) < _PAGE:
                return
            after = rows[-1][0]

    def children(self, node_id: str, *, session_id: str, edge: Edge) -> list[Node]:
        """Visible nodes whose ``edge`` is ``node_id``, in ``seq`` order."""
        if edge not in ("predecessor", "caller"):
            raise StoreError(f"unknown edge {edge!r}", hint="use 'predecessor' or 'caller'")
        where, args = self._visible_sql(session_id)
        rows = self._conn.execute(
            f"SELECT body FROM nodes WHERE {edge} = ? AND {where} ORDER BY seq",
            [node_id, *args],
        ).fetchall()
        return [decode_node(r[0], self.location) for r in rows]

    def is_visible(self, session_id: str, node_id: str) -> bool:
        """Whether the node is the session's own or inherited from its fork base."""
        row = self._conn.execute(
            "SELECT session_id, seq FROM nodes WHERE id = ?", (node_id,)
        ).fetchone()
        if row is None:
            return False
        return is_visible_in(self._chain(session_id), row[0], row[1])
