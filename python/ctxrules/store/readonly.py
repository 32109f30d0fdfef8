"""A store seen read-only, with what a reader makes kept in memory beside it.

``ReadOnlyView(opener)`` answers every read from a store and keeps the commits (and
kept summary answers) a reader makes — ``make_commit`` stores the commit it derives —
in memory, never in the store: the viewer (``ctxrules view``) answers GET requests and
a GET must not write.  The commits made stay here for later requests (the page asks
for a commit by the id the timeline gave), so a commit is derived once per process;
they are content-addressed, so the same turn gives the same commit and identical
requests add nothing.  Writes of history (sessions, nodes, HEAD, metadata, the run
guard) are a ``StoreError``.

The store underneath is one per thread when ``opener`` is a callable (each thread
opens its own connection the first time it reads, so requests run side by side
without a lock), else the one store given, its calls taken one at a time.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..model import Node
from ._shared import check_commit_row, check_same_commit, not_found
from .base import CommitRow, CommitStore, Edge, RunInfo, SessionInfo

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .base import NewSession

__all__ = ["ReadOnlyView"]


class ReadOnlyView:
    """A ``CommitStore`` that reads a store and keeps what is made in memory (see the
    module docstring).  ``close()`` closes every store it opened."""

    def __init__(self, store: CommitStore | Callable[[], CommitStore]):
        self._local = threading.local()
        self._opened: list[CommitStore] = []
        self._lock = threading.Lock()  # the in-memory part; never held while reading
        self._shared: CommitStore | None = None
        self._shared_lock: threading.RLock | None = None
        if callable(store) and not isinstance(store, CommitStore):
            self._opener: Callable[[], CommitStore] | None = store
            self.location = self._base.location
        else:
            self._opener = None
            self._shared = store
            self._shared_lock = threading.RLock()
            self.location = store.location
        self._commits: dict[str, CommitRow] = {}
        self._heads: dict[tuple[str, str, str], str] = {}
        self._kv: dict[tuple[str, str], bytes] = {}

    # -- the store underneath ------------------------------------------------------
    @property
    def _base(self) -> CommitStore:
        store: CommitStore | None = getattr(self._local, "store", None)
        if store is None:
            if self._opener is None:
                assert self._shared is not None
                return self._shared
            store = self._opener()
            with self._lock:
                self._opened.append(store)
            self._local.store = store
        return store

    def _read(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self._base, name)
        if self._shared_lock is None:
            return method(*args, **kwargs)
        with self._shared_lock:
            result = method(*args, **kwargs)
            return list(result) if name == "iter_nodes" else result

    def close(self) -> None:
        """Close the stores this view opened (a store given to it stays open)."""
        with self._lock:
            opened, self._opened = self._opened, []
        for store in opened:
            store.close()

    def migrate(self) -> list[int]:
        return []

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        yield None  # what a reader writes goes to memory, one dict operation at a time

    def _refuse(self, what: str) -> StoreError:
        return StoreError(
            f"this view of the store only reads: it cannot {what}",
            where=self.location,
            hint="use the command that writes (ctxrules commit, checkout, import…)",
        )

    # -- history: read through, writes refused ---------------------------------------
    def create_session(self, **spec: Unpack[NewSession]) -> SessionInfo:
        raise self._refuse("create a session")

    def get_session(self, session_id: str) -> SessionInfo:
        return self._read("get_session", session_id)

    def find_session(self, import_key: str) -> SessionInfo | None:
        return self._read("find_session", import_key)

    def list_sessions(self) -> list[SessionInfo]:
        return self._read("list_sessions")

    def set_head(self, session_id: str, node_id: str | None) -> None:
        raise self._refuse("move HEAD")

    def update_metadata(self, session_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        raise self._refuse("change a session's metadata")

    def append(
        self, session_id: str, call: Node, *, at_head: bool = False, set_head: bool = False
    ) -> Node:
        raise self._refuse("append a node")

    def get_node(self, node_id: str) -> Node:
        return self._read("get_node", node_id)

    def nodes(self, session_id: str, *, inherited: bool = False) -> list[Node]:
        return self._read("nodes", session_id, inherited=inherited)

    def iter_nodes(self, session_id: str) -> Iterator[Node]:
        return iter(self._read("iter_nodes", session_id))

    def children(self, node_id: str, *, session_id: str, edge: Edge) -> list[Node]:
        return self._read("children", node_id, session_id=session_id, edge=edge)

    def is_visible(self, session_id: str, node_id: str) -> bool:
        return self._read("is_visible", session_id, node_id)

    def start_run(self, session_id: str, run_id: str, *, ttl: float) -> RunInfo:
        raise self._refuse("start an agent run")

    def renew_run(self, session_id: str, run_id: str, *, ttl: float) -> None:
        raise self._refuse("renew an agent run")

    def end_run(self, session_id: str, run_id: str) -> None:
        raise self._refuse("end an agent run")

    def active_run(self, session_id: str) -> RunInfo | None:
        return self._read("active_run", session_id)

    def calls_since(self, session_id: str, seq: int) -> list[Node]:
        return self._read("calls_since", session_id, seq)

    # -- kept answers: memory first ------------------------------------------------------
    def kv_put(self, namespace: str, key: str, value: bytes) -> None:
        with self._lock:
            self._kv[(namespace, key)] = bytes(value)

    def kv_get(self, namespace: str, key: str) -> bytes | None:
        with self._lock:
            mine = self._kv.get((namespace, key))
        return mine if mine is not None else self._read("kv_get", namespace, key)

    def kv_keys(self, namespace: str, prefix: str = "") -> list[str]:
        with self._lock:
            mine = {k for ns, k in self._kv if ns == namespace and k.startswith(prefix)}
        return sorted(mine | set(self._read("kv_keys", namespace, prefix)))

    # -- commits: made ones in memory, over the stored ones -------------------------------
    def put_commit(
        self, row: CommitRow, *, if_latest: str | EllipsisType | None = ...
    ) -> str | None:
        """Keep a commit row in memory (the same checks as a store's put)."""
        check_commit_row(row)
        key = (row.session_id, row.head_node_id, row.rules_version)
        with self._lock:
            old = self._commits.get(row.id)
            if old is not None:
                check_same_commit(old, row, self.location)
                return row.id
        if if_latest is not ...:
            latest = self.latest_commit(*key)
            if latest != if_latest:
                return latest
        with self._lock:
            self._commits.setdefault(row.id, row)
            self._heads[key] = row.id
        return row.id

    def latest_commit(self, session_id: str, head_node_id: str, rules_version: str) -> str | None:
        with self._lock:
            mine = self._heads.get((session_id, head_node_id, rules_version))
        if mine is not None:
            return mine
        return self._read("latest_commit", session_id, head_node_id, rules_version)

    def commit_chain(self, commit_id: str) -> list[CommitRow]:
        mine: list[CommitRow] = []
        cid: str | None = commit_id
        with self._lock:
            while cid is not None and cid in self._commits:
                row = self._commits[cid]
                mine.append(row)
                cid = row.parent_id
        mine.reverse()
        if cid is None:
            return mine
        try:
            return self._read("commit_chain", cid) + mine
        except StoreError:
            if mine:  # a parent neither kept nor stored
                raise not_found("commit", cid, self.location) from None
            raise

    def session_commits(self, session_id: str) -> list[CommitRow]:
        stored: list[CommitRow] = self._read("session_commits", session_id)
        known = {r.id for r in stored}
        with self._lock:
            mine = [r for r in self._commits.values() if r.session_id == session_id]
        return stored + [r for r in mine if r.id not in known]

    def __getattr__(self, name: str) -> Any:
        # Anything else a backend offers (e.g. ``busy_timeout``), read from the store.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._base, name)
