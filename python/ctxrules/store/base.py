"""The store interfaces: what every backend offers the history graph and the commits.

``Store`` keeps sessions (with a HEAD and metadata), the append-only nodes of each
session, an agent-run guard per session and a generic key/value table for later layers.
``CommitStore`` adds the ContextCommits made from that graph, as rows of bytes: the
commit layer owns their format (``ctxrules.commit``), the store only keeps and finds
them.  Callers only use these Protocols, so a server database can replace the embedded
SQLite file without touching them.  Every method that writes is atomic: it either
happens completely or not at all, and an acknowledged write survives a crash (the
in-memory backend keeps nothing beyond its process).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, runtime_checkable

import msgspec

from ..model import Node

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack needs Python 3.11

__all__ = ["CommitRow", "CommitStore", "Edge", "NewSession", "RunInfo", "SessionInfo", "Store"]

#: Which edge a child hangs on: the conversation edge or the call edge.
Edge = Literal["predecessor", "caller"]


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A session row: its HEAD, where it came from, and how many nodes it owns.

    A fork has ``base_session`` / ``base_node`` set and sees the base session's nodes
    with ``seq <= base_seq`` (the base graph as it was when forked) without copying
    them.  ``calls`` counts the nodes the session owns, not inherited ones.
    """

    id: str
    created_at: float
    head: str | None = None
    source: str = ""
    import_key: str | None = None
    base_session: str | None = None
    base_node: str | None = None
    base_seq: int = 0
    metadata: dict[str, Any] = {}
    calls: int = 0


class RunInfo(msgspec.Struct, frozen=True, kw_only=True):
    """An agent run holding a session's guard: who (pid, host) and until when."""

    session_id: str
    run_id: str
    pid: int
    host: str
    started_at: float
    expires_at: float


class NewSession(TypedDict, total=False):
    """The keyword arguments of ``Store.create_session`` (all optional).

    ``session_id``: the id (default: a fresh one); ``source``: where it came from;
    ``import_key``: unique key of an import (a second create with it is refused);
    ``metadata``; ``base_session`` / ``base_node``: make a fork that sees the base's
    nodes as they are now; ``nodes``: appended in order with ``seq`` assigned by the
    store (edges must point at earlier nodes); ``head``: the HEAD to set.
    """

    session_id: str | None
    source: str
    import_key: str | None
    metadata: dict[str, Any] | None
    base_session: str | None
    base_node: str | None
    nodes: Sequence[Node]
    head: str | None


@runtime_checkable
class Store(Protocol):
    """A backend for the history graph (SQLite by default; see ``ctxrules.store.open_store``)."""

    location: str

    # -- transactions and schema -------------------------------------------------
    def transaction(self) -> AbstractContextManager[Any]:
        """A write transaction: the store writes made inside it commit together or not at all.

        Nested use joins the outer transaction.  It yields a backend object that only the
        backend's own code and its tests may use (SQLite: its ``sqlite3.Connection``).
        ``StoreError`` if another process holds the write lock beyond the busy timeout.
        """

    def migrate(self) -> list[int]:
        """Apply registered migrations that this store lacks; returns the versions applied."""

    def close(self) -> None:
        """Release the connection; the store must not be used afterwards."""

    # -- sessions ------------------------------------------------------------------
    def create_session(self, **spec: Unpack[NewSession]) -> SessionInfo:
        """Create a session (see ``NewSession``), its nodes and HEAD in one transaction.

        ``StoreError`` if the id or import key exists; ``DagError`` if a node's edge
        or ``head`` names no earlier node of the session.
        """

    def get_session(self, session_id: str) -> SessionInfo:
        """The session row; ``NotFoundError`` if unknown."""

    def find_session(self, import_key: str) -> SessionInfo | None:
        """The session created with ``import_key``, if any."""

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, oldest first."""

    def set_head(self, session_id: str, node_id: str | None) -> None:
        """Move HEAD to a node visible in the session (or ``None`` for an empty one)."""

    def update_metadata(self, session_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge ``patch`` into the session metadata (a ``None`` value deletes a key)."""

    # -- nodes -----------------------------------------------------------------------
    def append(
        self, session_id: str, call: Node, *, at_head: bool = False, set_head: bool = False
    ) -> Node:
        """Append a node, assigning ``seq`` (and ``session_id``) atomically; returns it.

        With ``at_head`` the node's predecessor becomes the HEAD read inside the same
        transaction and HEAD advances to the node; ``set_head`` advances HEAD without
        touching the edges.  Edges must name nodes visible in the session.
        """

    def get_node(self, node_id: str) -> Node:
        """A node by id; ``NotFoundError`` if unknown."""

    def nodes(self, session_id: str, *, inherited: bool = False) -> list[Node]:
        """The session's nodes in ``seq`` order (with ``inherited``, a fork's base nodes too)."""

    def iter_nodes(self, session_id: str) -> Iterator[Node]:
        """The session's own nodes in ``seq`` order, streamed."""

    def children(self, node_id: str, *, session_id: str, edge: Edge) -> list[Node]:
        """Nodes visible in ``session_id`` whose ``edge`` names ``node_id``, in ``seq`` order."""

    def is_visible(self, session_id: str, node_id: str) -> bool:
        """Whether a node belongs to the session or to the part of its base it inherits."""

    # -- agent-run guard -------------------------------------------------------------
    def start_run(self, session_id: str, run_id: str, *, ttl: float) -> RunInfo:
        """Take the session's run guard; ``AgentRunActiveError`` if a live run holds it."""

    def renew_run(self, session_id: str, run_id: str, *, ttl: float) -> None:
        """Extend the guard held by ``run_id`` (the heartbeat)."""

    def end_run(self, session_id: str, run_id: str) -> None:
        """Release the guard held by ``run_id`` (no error if it already expired)."""

    def active_run(self, session_id: str) -> RunInfo | None:
        """The live run holding the guard, if any (expired or dead-process runs are ignored)."""

    # -- key/value table for later layers --------------------------------------------
    def kv_put(self, namespace: str, key: str, value: bytes) -> None:
        """Store ``value`` under ``(namespace, key)``, replacing an earlier value."""

    def kv_get(self, namespace: str, key: str) -> bytes | None:
        """The value under ``(namespace, key)``, or ``None``."""

    def kv_keys(self, namespace: str, prefix: str = "") -> list[str]:
        """Keys of a namespace (optionally with a prefix), sorted."""


class CommitRow(msgspec.Struct, frozen=True, kw_only=True):
    """A stored ContextCommit: its header fields and the commit layer's two byte strings.

    ``meta`` (notes, cursors, parent ids) and ``delta`` (the change against
    ``parent_id``'s items) are opaque to the store; ``ctxrules.commit`` encodes and
    replays them.  ``n_items`` is the commit's item count, ``created_at`` the ``now``
    its rules ran at (a finite number).
    """

    id: str
    session_id: str
    parent_id: str | None
    head_node_id: str
    rules_version: str
    created_at: float
    total_tokens: int
    n_items: int
    meta: bytes
    delta: bytes


@runtime_checkable
class CommitStore(Store, Protocol):
    """A ``Store`` that also keeps ContextCommits (what ``open_store`` returns).

    Commit rows are insert-only and content-addressed: an id names one row forever.
    """

    def put_commit(
        self, row: CommitRow, *, if_latest: str | EllipsisType | None = ...
    ) -> str | None:
        """Store ``row`` atomically; returns the id that now stands at the row's head.

        An id already stored must be the same row (then nothing is written and ``row.id``
        is returned); a different row under it is a ``StoreError``, never ignored.
        With ``if_latest`` (compare and set) the row is written only if the session's
        latest commit at ``row.head_node_id`` for ``row.rules_version`` is still that id
        (``None``: there was none); otherwise nothing is written and the id of the commit
        that is latest now is returned.  ``ValidationError`` for a non-finite
        ``created_at``; ``StoreError`` if the parent is not stored.
        """

    def latest_commit(self, session_id: str, head_node_id: str, rules_version: str) -> str | None:
        """The id of the session's newest commit at a head made by a rule set, if any."""

    def commit_chain(self, commit_id: str) -> list[CommitRow]:
        """The rows from the root commit to ``commit_id`` (parent first), for replay.

        ``NotFoundError`` if the commit is not stored.
        """

    def session_commits(self, session_id: str) -> list[CommitRow]:
        """The session's commits in the order they were stored."""

    def calls_since(self, session_id: str, seq: int) -> list[Node]:
        """The session's own caller-children (nodes with a ``caller``) with ``seq`` above
        ``seq``, in ``seq`` order."""
