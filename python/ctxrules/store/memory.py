"""The in-memory store: the whole ``CommitStore`` in this process's memory, for batch
workers and tests.

It accepts and refuses exactly what the SQLite store does (the checks are shared,
``_shared``), keeps node bodies as the same JSON bytes (a read returns a fresh
``Node``, never an object another caller holds, unless the handle shares its nodes
with others: ``SharedNodes``, a batch replay's) and its transactions are all or
nothing: every write records how to undo itself, and a failed transaction undoes them
in reverse.  One lock serialises writers and readers of the same data, across threads.
Nothing survives the process.

``open_store("memory:NAME")`` gives a handle on the data named NAME in this process
(created on first use; every open of the name sees the same data, so a command line
run in-process can use it across commands); ``open_store("memory:")`` a private one.
``forget(NAME)`` drops named data.
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import EllipsisType
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from ..errors import DagError, StoreError
from ..model import Node
from ._shared import (
    check_commit_row,
    check_edges,
    check_reads,
    check_same_commit,
    continuing,
    decode_node,
    fork_chain,
    is_visible_in,
    live_run,
    merged_metadata,
    missing_parent,
    node_body,
    not_found,
    take_run,
    unknown_keys,
)
from .base import CommitRow, Edge, NewSession, RunInfo, SessionInfo

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["PREFIX", "MemoryStore", "SharedNodes", "exists", "forget"]

#: Store locations starting with this name in-memory data.
PREFIX = "memory:"


class _Session(NamedTuple):
    # A tuple: a batch replay appends thousands of nodes, each replacing its row.
    info: SessionInfo
    insertion: int
    next_seq: int


class _Node(NamedTuple):
    session_id: str
    seq: int
    body: bytes
    called: bool  # it has a caller: ``calls_since`` decodes only these


@dataclass
class _Data:
    """Everything one named memory store holds."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    undo: list[Callable[[], None]] | None = None  # set while a transaction is open
    sessions: dict[str, _Session] = field(default_factory=dict)
    import_keys: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, _Node] = field(default_factory=dict)
    own: dict[str, list[str]] = field(default_factory=dict)  # session → node ids, seq order
    edges: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (edge, target)
    runs: dict[str, RunInfo] = field(default_factory=dict)
    kv: dict[tuple[str, str], bytes] = field(default_factory=dict)
    commits: dict[str, CommitRow] = field(default_factory=dict)  # in the order stored
    heads: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)


_named: dict[str, _Data] = {}
_named_lock = threading.Lock()


def forget(name: str) -> None:
    """Drop the named memory store's data (handles still open keep what they hold)."""
    with _named_lock:
        _named.pop(name, None)


def exists(name: str) -> bool:
    """Whether this process holds memory store data named ``name``."""
    with _named_lock:
        return name in _named


def _data_for(name: str) -> _Data:
    if not name:
        return _Data()
    with _named_lock:
        return _named.setdefault(name, _Data())


class SharedNodes:
    """Nodes decoded and node bodies encoded once for the ``MemoryStore`` handles given
    it: a batch replay's two stores, which append the same recorded nodes and read
    the same recent ones several times per request.

    A read through such a handle returns the node decoded from the same bytes before
    (by any of them): every reader must treat it as read-only.  An append stores the
    body checked for the node appended just before through another handle when the
    node is the same one (the same field objects: an unchanged node handed to each;
    equal values of another type, ``1`` and ``True``, encode differently and are
    checked again).  Nothing is shared with handles not given it."""

    #: The bodies of the last nodes appended that are kept for the other handles.
    KEPT_BODIES = 8

    def __init__(self) -> None:
        # Keyed by the bytes themselves: equal bytes decode to equal nodes, so a row
        # undone or stored differently in another handle (another seq) cannot be
        # answered with a node of other bytes.
        self._decoded: dict[bytes, Node] = {}
        self._bodies: OrderedDict[str, tuple[Node, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def node(self, body: bytes) -> Node:
        """The node of a stored body, decoded once."""
        found = self._decoded.get(body)
        if found is None:
            found = decode_node(body)
            with self._lock:
                self._decoded[body] = found
        return found

    def body(self, stored: Node) -> bytes:
        """``node_body(stored)``, or the body made for the same node just before."""
        with self._lock:
            kept = self._bodies.get(stored.id)
        if kept is not None and _same_node(kept[0], stored):
            return kept[1]
        body = node_body(stored)
        with self._lock:
            self._bodies[stored.id] = (stored, body)
            self._bodies.move_to_end(stored.id)
            while len(self._bodies) > self.KEPT_BODIES:
                self._bodies.popitem(last=False)
        return body


#: Field values compared by value in ``_same_node``: immutable, and of one type each.
_SCALARS = (str, int, float, bool, type(None))


def _same_node(a: Node, b: Node) -> bool:
    """Whether ``a`` and ``b`` encode to the same body for certain: every field the same
    object, an equal scalar of the same type, or an empty container of the same type."""
    for x, y in zip(msgspec.structs.astuple(a), msgspec.structs.astuple(b), strict=True):
        if x is y:
            continue
        kind = type(x)
        if kind is not type(y):
            return False
        if kind in _SCALARS:
            if x != y:
                return False
        elif kind in (dict, list, tuple):
            if x or y:
                return False
        else:
            return False
    return True


class MemoryStore:
    """A ``CommitStore`` held in memory (see the module docstring)."""

    def __init__(self, name: str = "", *, shared_nodes: SharedNodes | None = None):
        """A handle on the data named ``name`` (``""``: private data); ``shared_nodes``:
        see ``SharedNodes`` (without, every read decodes a fresh node)."""
        self.location = PREFIX + name
        self._d = _data_for(name)
        self._chains: dict[str, list[tuple[str, int | None]]] = {}
        self._shared = shared_nodes

    # -- transactions and schema -------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction: all its writes, or none; nested use joins the outer one."""
        d = self._d
        with d.lock:
            if d.undo is not None:
                yield None
                return
            d.undo = []
            try:
                yield None
            except BaseException:
                for step in reversed(d.undo):
                    step()
                raise
            finally:
                d.undo = None

    def _did(self, undo: Callable[[], None]) -> None:
        assert self._d.undo is not None, "a write outside a transaction"
        self._d.undo.append(undo)

    def _set(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        """``table[key] = value`` (``None``: delete), undone if the transaction fails."""
        missing = key not in table
        old = table.get(key)
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
        self._did(lambda: table.pop(key, None) if missing else table.__setitem__(key, old))

    def migrate(self) -> list[int]:
        """Nothing to migrate: memory holds the current schema by construction."""
        return []

    def close(self) -> None:
        """Release this handle (named data stays for other handles until ``forget``)."""

    # -- sessions ------------------------------------------------------------------
    def _session(self, session_id: str) -> _Session:
        row = self._d.sessions.get(session_id)
        if row is None:
            raise not_found("session", session_id, self.location)
        return row

    def _put_session(self, sid: str, row: _Session) -> None:
        self._set(self._d.sessions, sid, row)

    def create_session(self, **spec: Unpack[NewSession]) -> SessionInfo:
        """Create a session with its nodes and HEAD in one transaction (see ``Store``)."""
        unknown_keys(dict(spec), NewSession.__annotations__)
        sid = spec.get("session_id") or f"s_{os.urandom(8).hex()}"
        base_session, base_node = spec.get("base_session"), spec.get("base_node")
        import_key, nodes, head = spec.get("import_key"), spec.get("nodes", ()), spec.get("head")
        d = self._d
        with self.transaction():
            base_seq = 0
            if base_session is not None:
                base = self._session(base_session).info
                base_seq = base.base_seq + base.calls
                if base_node is not None and not self.is_visible(base_session, base_node):
                    raise DagError(
                        f"node {base_node!r} is not part of session {base_session!r}",
                        hint="fork from a node that `ctxrules log` shows for that session",
                    )
            if sid in d.sessions or (import_key is not None and import_key in d.import_keys):
                raise StoreError(
                    f"session {sid!r} or import key {import_key!r} exists already",
                    where=self.location,
                )
            # Round-trip the metadata as the SQLite store does (JSON), so both hand back
            # the same values and no caller shares the dict it passed.
            meta = msgspec.json.decode(msgspec.json.encode(spec.get("metadata") or {}))
            info = SessionInfo(
                id=sid,
                created_at=time.time(),
                source=spec.get("source", ""),
                import_key=import_key,
                base_session=base_session,
                base_node=base_node,
                base_seq=base_seq,
                metadata=meta,
            )
            self._put_session(sid, _Session(info, len(d.sessions), base_seq + 1))
            if import_key is not None:
                self._set(d.import_keys, import_key, sid)
            self._chains.pop(sid, None)
            seen: set[str] = set()
            for call in nodes:
                check_edges(sid, call, lambda e: e in seen or self.is_visible(sid, e))
                check_reads(call, d.nodes.__contains__, batch=seen)
                if call.id in seen:
                    raise DagError(f"duplicate node id in session {sid!r}: {call.id!r}")
                seen.add(call.id)
                self._insert(sid, call, f"duplicate node id in session {sid!r}: {call.id!r}")
            if head is not None:
                self._set_head(sid, head)
            return self._session(sid).info

    def get_session(self, session_id: str) -> SessionInfo:
        """The session row; ``NotFoundError`` if unknown."""
        with self._d.lock:
            return self._session(session_id).info

    def find_session(self, import_key: str) -> SessionInfo | None:
        """The session created with ``import_key``, if any."""
        with self._d.lock:
            sid = self._d.import_keys.get(import_key)
            return None if sid is None else self._session(sid).info

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, oldest first."""
        with self._d.lock:
            rows = sorted(self._d.sessions.values(), key=lambda r: (r.info.created_at, r.insertion))
            return [r.info for r in rows]

    def _set_head(self, sid: str, node_id: str | None) -> None:
        if node_id is not None and not self.is_visible(sid, node_id):
            raise DagError(
                f"node {node_id!r} is not part of session {sid!r}",
                hint="`ctxrules log SESSION` lists the nodes you can check out",
            )
        row = self._session(sid)
        self._put_session(sid, row._replace(info=msgspec.structs.replace(row.info, head=node_id)))

    def set_head(self, session_id: str, node_id: str | None) -> None:
        """Move HEAD to a node visible in the session."""
        with self.transaction():
            self._session(session_id)
            self._set_head(session_id, node_id)

    def update_metadata(self, session_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the session metadata; a ``None`` value deletes the key."""
        with self.transaction():
            row = self._session(session_id)
            merged = merged_metadata(row.info.metadata, patch)
            kept = msgspec.json.decode(msgspec.json.encode(merged))  # as SQLite keeps it
            info = msgspec.structs.replace(row.info, metadata=kept)
            self._put_session(session_id, row._replace(info=info))
            return merged

    # -- nodes -----------------------------------------------------------------------
    def _chain(self, session_id: str) -> list[tuple[str, int | None]]:
        # (session, highest visible seq) from the session down its fork bases; base
        # links never change once written.
        chain = self._chains.get(session_id)
        if chain is None:
            chain = fork_chain(session_id, self._base_of)
            if chain:  # not cached for a session that does not exist (yet)
                self._chains[session_id] = chain
        return chain

    def _base_of(self, sid: str) -> tuple[str | None, int] | None:
        row = self._d.sessions.get(sid)
        return None if row is None else (row.info.base_session, row.info.base_seq)

    def _insert(self, sid: str, call: Node, taken: str, *, head: bool = False) -> Node:
        """Store ``call`` as the session's next node (edges checked by the caller);
        ``taken`` is the error message if its id is stored already; ``head``: it
        becomes the session's HEAD."""
        d = self._d
        row = self._session(sid)
        stored = msgspec.structs.replace(call, seq=row.next_seq, session_id=sid)
        body = node_body(stored) if self._shared is None else self._shared.body(stored)
        if stored.id in d.nodes:
            raise DagError(taken)
        d.nodes[stored.id] = _Node(sid, stored.seq, body, stored.caller is not None)
        d.own.setdefault(sid, []).append(stored.id)
        keys = [(e, t) for e, t in (("predecessor", call.predecessor), ("caller", call.caller))]
        for key in keys:
            if key[1] is not None:
                d.edges.setdefault(key, []).append(stored.id)  # type: ignore[arg-type]
        calls = row.info.calls + 1
        if head:
            info = msgspec.structs.replace(row.info, calls=calls, head=stored.id)
        else:
            info = msgspec.structs.replace(row.info, calls=calls)
        self._put_session(sid, _Session(info, row.insertion, row.next_seq + 1))

        def undo() -> None:
            d.nodes.pop(stored.id, None)
            d.own[sid].remove(stored.id)
            for key in keys:
                if key[1] is not None:
                    d.edges[key].remove(stored.id)  # type: ignore[index]

        self._did(undo)
        return stored

    def append(
        self, session_id: str, call: Node, *, at_head: bool = False, set_head: bool = False
    ) -> Node:
        """Append one node; ``seq`` and, with ``at_head``, the predecessor are set here."""
        with self.transaction():
            head = self._session(session_id).info.head
            if at_head:
                call = continuing(call, head)
            check_edges(session_id, call, lambda e: self.is_visible(session_id, e))
            check_reads(call, self._d.nodes.__contains__)
            return self._insert(
                session_id, call, f"node id {call.id!r} exists already", head=at_head or set_head
            )

    def _node(self, node_id: str) -> Node:
        body = self._d.nodes[node_id].body
        return decode_node(body) if self._shared is None else self._shared.node(body)

    def get_node(self, node_id: str) -> Node:
        """A node by id; ``NotFoundError`` if unknown."""
        with self._d.lock:
            if node_id not in self._d.nodes:
                raise not_found("node", node_id, self.location)
            return self._node(node_id)

    def _visible_ids(self, session_id: str) -> list[str]:
        nodes = self._d.nodes
        ids = [
            i
            for sid, limit in self._chain(session_id)
            for i in self._d.own.get(sid, [])
            if limit is None or nodes[i].seq <= limit
        ]
        return sorted(ids, key=lambda i: nodes[i].seq)

    def nodes(self, session_id: str, *, inherited: bool = False) -> list[Node]:
        """The session's nodes in ``seq`` order; ``inherited`` adds a fork's base nodes."""
        with self._d.lock:
            self._session(session_id)
            ids = self._visible_ids(session_id) if inherited else self._d.own.get(session_id, [])
            return [self._node(i) for i in ids]

    def iter_nodes(self, session_id: str) -> Iterator[Node]:
        """The session's own nodes in ``seq`` order."""
        with self._d.lock:
            ids = list(self._d.own.get(session_id, []))
        for i in ids:
            yield self.get_node(i)

    def children(self, node_id: str, *, session_id: str, edge: Edge) -> list[Node]:
        """Visible nodes whose ``edge`` is ``node_id``, in ``seq`` order."""
        if edge not in ("predecessor", "caller"):
            raise StoreError(f"unknown edge {edge!r}", hint="use 'predecessor' or 'caller'")
        with self._d.lock:
            chain = self._chain(session_id)
            ids = [
                i
                for i in self._d.edges.get((edge, node_id), [])
                if is_visible_in(chain, self._d.nodes[i].session_id, self._d.nodes[i].seq)
            ]
            ids.sort(key=lambda i: self._d.nodes[i].seq)
            return [self._node(i) for i in ids]

    def is_visible(self, session_id: str, node_id: str) -> bool:
        """Whether the node is the session's own or inherited from its fork base."""
        with self._d.lock:
            node = self._d.nodes.get(node_id)
            if node is None:
                return False
            return is_visible_in(self._chain(session_id), node.session_id, node.seq)

    # -- agent-run guard -------------------------------------------------------------
    def start_run(self, session_id: str, run_id: str, *, ttl: float) -> RunInfo:
        """Take the run guard; ``AgentRunActiveError`` names the live holder."""
        with self.transaction():
            self._session(session_id)
            run = take_run(session_id, run_id, ttl, self._d.runs.get(session_id))
            self._set(self._d.runs, session_id, run)
            return run

    def renew_run(self, session_id: str, run_id: str, *, ttl: float) -> None:
        """Push the guard's expiry ``ttl`` seconds into the future."""
        with self.transaction():
            run = self._d.runs.get(session_id)
            if run is not None and run.run_id == run_id:
                renewed = msgspec.structs.replace(run, expires_at=time.time() + ttl)
                self._set(self._d.runs, session_id, renewed)

    def end_run(self, session_id: str, run_id: str) -> None:
        """Release the guard if ``run_id`` still holds it."""
        with self.transaction():
            run = self._d.runs.get(session_id)
            if run is not None and run.run_id == run_id:
                self._set(self._d.runs, session_id, None)

    def active_run(self, session_id: str) -> RunInfo | None:
        """The live run on the session, if any."""
        with self._d.lock:
            return live_run(self._d.runs.get(session_id), time.time())

    # -- key/value ---------------------------------------------------------------------
    def kv_put(self, namespace: str, key: str, value: bytes) -> None:
        """Store a value under ``(namespace, key)``."""
        with self.transaction():
            self._set(self._d.kv, (namespace, key), bytes(value))

    def kv_get(self, namespace: str, key: str) -> bytes | None:
        """The value under ``(namespace, key)`` or ``None``."""
        with self._d.lock:
            return self._d.kv.get((namespace, key))

    def kv_keys(self, namespace: str, prefix: str = "") -> list[str]:
        """Sorted keys of a namespace starting with ``prefix``."""
        with self._d.lock:
            return sorted(k for ns, k in self._d.kv if ns == namespace and k.startswith(prefix))

    # -- commits -----------------------------------------------------------------------
    def put_commit(
        self, row: CommitRow, *, if_latest: str | EllipsisType | None = ...
    ) -> str | None:
        """Store a commit row (see ``CommitStore.put_commit``)."""
        check_commit_row(row)
        d = self._d
        with self.transaction():
            old = d.commits.get(row.id)
            if old is not None:
                check_same_commit(old, row, self.location)
                return row.id
            key = (row.session_id, row.head_node_id, row.rules_version)
            if if_latest is not ...:
                latest = self.latest_commit(*key)
                if latest != if_latest:
                    return latest
            if row.parent_id is not None and row.parent_id not in d.commits:
                raise missing_parent(row, self.location)
            d.commits[row.id] = row
            d.heads.setdefault(key, []).append(row.id)

            def undo() -> None:
                d.commits.pop(row.id, None)
                d.heads[key].remove(row.id)

            self._did(undo)
            return row.id

    def latest_commit(self, session_id: str, head_node_id: str, rules_version: str) -> str | None:
        """The id of the session's newest commit at ``head_node_id`` by a rule set."""
        with self._d.lock:
            ids = self._d.heads.get((session_id, head_node_id, rules_version))
            return ids[-1] if ids else None

    def commit_chain(self, commit_id: str) -> list[CommitRow]:
        """Rows from the root to ``commit_id``; ``NotFoundError`` if unknown."""
        with self._d.lock:
            if commit_id not in self._d.commits:
                raise not_found("commit", commit_id, self.location)
            rows = []
            cid: str | None = commit_id
            while cid is not None:
                row = self._d.commits[cid]
                rows.append(row)
                cid = row.parent_id
            rows.reverse()
            return rows

    def session_commits(self, session_id: str) -> list[CommitRow]:
        """The session's commits in the order they were stored."""
        with self._d.lock:
            return [r for r in self._d.commits.values() if r.session_id == session_id]

    def calls_since(self, session_id: str, seq: int) -> list[Node]:
        """The session's own caller-children above ``seq``, in ``seq`` order."""
        with self._d.lock:
            nodes = self._d.nodes
            own = self._d.own.get(session_id, [])
            # ``own`` is in seq order: start after ``seq`` rather than walk the session.
            start = bisect_right(own, seq, key=lambda i: nodes[i].seq)
            return [self._node(i) for i in own[start:] if nodes[i].called]
