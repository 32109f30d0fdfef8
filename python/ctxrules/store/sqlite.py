"""The embedded default store: one SQLite file in WAL mode with ``synchronous=FULL``.

WAL lets readers run while one writer appends; ``synchronous=FULL`` makes SQLite sync
the WAL on every commit, so an append that returned is on disk even if the process is
killed or the machine loses power the next moment.  Writers take the lock up front
(``BEGIN IMMEDIATE``) so concurrent processes queue instead of failing half-way; the
``seq`` counter lives in the session row and is read and bumped in the same
transaction as the insert, which is what makes ``seq`` gap-free and never reused.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import DagError, NotFoundError, StoreError, ValidationError
from ..model import Call
from ._sqlite_guard import GuardAndKv
from .base import Edge, NewSession, SessionInfo

if TYPE_CHECKING:
    from typing_extensions import Unpack
from .migrations import apply_pending, up_to_date

__all__ = ["DB_NAME", "SQLiteStore"]

DB_NAME = "ctxrules.db"
# How long a writer waits for another process's transaction before giving up.
BUSY_TIMEOUT_S = 60.0

_SESSION_COLS = (
    "id, created_at, head, source, import_key, base_session, base_node, base_seq, next_seq, "
    "metadata"
)
_json_decoder = msgspec.json.Decoder(Call)
# What a write checks: a body decodes back into a Call.  ``input`` and ``metadata`` are
# free JSON (any value reads back), and decoding them is most of the cost, so the check
# decodes a struct derived from Call without them (derived, so it cannot drift).
_checked_decoder = msgspec.json.Decoder(
    msgspec.defstruct(
        "_CheckedCall",
        [
            (f.name, f.type) if f.required else (f.name, f.type, f.default)
            for f in msgspec.structs.fields(Call)
            if f.name not in ("input", "metadata")
        ],
    )
)


def _decode_call(body: bytes) -> Call:
    return _json_decoder.decode(body)


def _row(stored: Call) -> tuple[Any, ...]:
    """The ``nodes`` row of a node; ``ValidationError`` if it would not read back.

    ``Call(...)`` does not type-check its fields, and a stored node can never be fixed
    or deleted, so a body that fails to decode (a dict as ``output``, say) is refused
    here instead of breaking every later read of the session.
    """
    try:
        if not isinstance(stored.metadata, dict):
            raise TypeError(f"metadata must be a dict, got {type(stored.metadata).__name__}")
        body = msgspec.json.encode(stored)
        _checked_decoder.decode(body)
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError, ValueError) as exc:
        raise ValidationError(
            f"node {stored.id!r} cannot be stored: {exc}",
            where=f"session {stored.session_id}",
            hint="content is text or a list of content blocks; input and metadata are JSON",
        ) from None
    return (
        stored.id,
        stored.session_id,
        stored.seq,
        stored.role,
        stored.predecessor,
        stored.caller,
        body,
    )


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


class SQLiteStore(GuardAndKv):
    """The ``Store`` backed by one SQLite file (see the module docstring for durability)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.location = str(path)
        try:
            self._conn = sqlite3.connect(
                self.location,
                timeout=BUSY_TIMEOUT_S,
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
                raise StoreError(f"cannot start a write: {exc}", where=self.location) from None
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
        """Apply registered migrations this store lacks, in version order."""
        if up_to_date(self._conn):
            return []  # the common case: no write lock needed just to open
        with self.transaction() as conn:
            return apply_pending(conn, self.location)

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
            raise NotFoundError(
                f"no session {session_id!r}",
                where=self.location,
                hint="`ctxrules sessions` lists the sessions of this store",
            )
        return row

    def create_session(self, **spec: Unpack[NewSession]) -> SessionInfo:
        """Create a session with its nodes and HEAD in one transaction (see ``Store``)."""
        unknown = set(spec) - set(NewSession.__annotations__)
        if unknown:  # what a keyword-only signature would have refused
            raise TypeError(f"create_session() got unexpected arguments {sorted(unknown)}")
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
            for edge in (call.predecessor, call.caller):
                if edge is not None and edge not in seen and not self.is_visible(sid, edge):
                    raise DagError(
                        f"node {call.id!r} points at {edge!r}, which is not an earlier node "
                        f"of session {sid!r}",
                        hint="append nodes after the nodes they answer or call",
                    )
            self._check_reads(call, batch=seen)
            stored = msgspec.structs.replace(call, seq=first_seq + offset, session_id=sid)
            seen.add(call.id)
            rows.append(_row(stored))
        try:
            conn.executemany("INSERT INTO nodes VALUES (?,?,?,?,?,?,?)", rows)
        except sqlite3.IntegrityError as exc:
            raise DagError(f"duplicate node id in session {sid!r}: {exc}") from None
        conn.execute("UPDATE sessions SET next_seq = ? WHERE id = ?", (first_seq + len(nodes), sid))

    def _check_reads(self, call: Call, batch: set[str] | frozenset[str] = frozenset()) -> None:
        # ``batch``: ids inserted earlier in the same create_session, not yet in the table.
        for rid in call.reads:
            if rid in batch:
                continue
            if self._conn.execute("SELECT 1 FROM nodes WHERE id = ?", (rid,)).fetchone() is None:
                raise DagError(
                    f"node {call.id!r} declares it read {rid!r}, which does not exist",
                    hint="'reads' may only name stored nodes",
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
            meta = _session(self._session_row(session_id)).metadata
            merged = dict(meta)
            for key, value in patch.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
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
        if chain is not None:
            return chain
        chain = []
        sid: str | None = session_id
        limit: int | None = None
        while sid is not None:
            row = self._conn.execute(
                "SELECT base_session, base_seq FROM sessions WHERE id = ?", (sid,)
            ).fetchone()
            if row is None:
                break
            chain.append((sid, limit))
            sid, limit = row[0], row[1]
        self._chains[session_id] = chain
        return chain

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
                if call.caller is not None:
                    raise DagError(
                        f"node {call.id!r} has a caller; it cannot also continue HEAD",
                        hint="append tool and sub-LLM calls under their caller, not at HEAD",
                    )
                call = msgspec.structs.replace(call, predecessor=head)
            for edge in (call.predecessor, call.caller):
                if edge is not None and not self.is_visible(session_id, edge):
                    raise DagError(
                        f"node {call.id!r} points at {edge!r}, which is not a node of "
                        f"session {session_id!r}",
                        hint="a predecessor or caller must be a node of the same session",
                    )
            self._check_reads(call)
            stored = msgspec.structs.replace(call, seq=seq, session_id=session_id)
            try:
                conn.execute("INSERT INTO nodes VALUES (?,?,?,?,?,?,?)", _row(stored))
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
            raise NotFoundError(
                f"no node {node_id!r}",
                where=self.location,
                hint="`ctxrules log SESSION` lists node ids",
            )
        return _decode_call(row[0])

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
        return [_decode_call(r[0]) for r in rows]

    def iter_nodes(self, session_id: str) -> Iterator[Call]:
        """The session's own nodes in ``seq`` order, streamed."""
        cur = self._conn.execute(
            "SELECT body FROM nodes WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        for (body,) in cur:
            yield _decode_call(body)

    def children(self, node_id: str, *, session_id: str, edge: Edge) -> list[Call]:
        """Visible nodes whose ``edge`` is ``node_id``, in ``seq`` order."""
        if edge not in ("predecessor", "caller"):
            raise StoreError(f"unknown edge {edge!r}", hint="use 'predecessor' or 'caller'")
        where, args = self._visible_sql(session_id)
        rows = self._conn.execute(
            f"SELECT body FROM nodes WHERE {edge} = ? AND {where} ORDER BY seq",
            [node_id, *args],
        ).fetchall()
        return [_decode_call(r[0]) for r in rows]

    def is_visible(self, session_id: str, node_id: str) -> bool:
        """Whether the node is the session's own or inherited from its fork base."""
        row = self._conn.execute(
            "SELECT session_id, seq FROM nodes WHERE id = ?", (node_id,)
        ).fetchone()
        if row is None:
            return False
        owner, seq = row
        for sid, limit in self._chain(session_id):
            if sid == owner:
                return limit is None or seq <= limit
        return False


def database_path(location: str | os.PathLike[str]) -> Path:
    """The SQLite file for a store location: a directory holds ``ctxrules.db``.

    An existing file, or a name ending in ``.db`` / ``.sqlite`` / ``.sqlite3``, is the
    database file itself.
    """
    p = Path(location)
    if p.is_file() or p.suffix in (".db", ".sqlite", ".sqlite3"):
        return p
    return p / DB_NAME
