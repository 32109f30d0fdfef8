"""Operations on the history graph: append, retry, edit, checkout, fork.

The graph is append-only: every operation adds nodes or moves a session's HEAD, none
changes a stored node.  Two edges exist.  ``predecessor`` is the conversation edge
(user → assistant → user …); ``caller`` is the call edge (assistant → tool → sub-LLM).
A conversation node (no caller) continues HEAD; a caller-child (a tool call, a
sub-agent's first message) hangs off its caller and never becomes HEAD by appending.

Retry, edit and fork are one idea — a divergent sibling under the same parent:

* ``retry(node)`` adds a sibling with the same content, ``edit(node, …)`` one with
  different content; both refuse while an agent run is active on the session
  (``AgentRunActiveError``; the guard lives in the store, so it holds across processes).
* ``checkout(node)`` only moves HEAD (or, for a tool call, picks which variant is shown);
  it never reruns anything and never touches the working directory.
* ``fork(node)`` makes a new session whose HEAD is that node; it shares the old
  session's nodes without copying them.

``resolve_session`` / ``resolve_node`` / ``resolve_commit`` turn what a person typed
(a full id or, as in git, a unique prefix of one) into the id; every command line
argument naming a session, node or commit goes through them.

``branch_path`` is *the* traversal from root to HEAD; the commit layer, the CLI and the
viewer all use it, so they can never disagree about what a branch contains.

Content conventions: user and assistant text/blocks are in ``output``; a tool node has
``name`` = tool name, ``input`` = its arguments, ``output`` = its result and metadata
``tool_use_id`` / ``is_error``; a system node carries its text in ``input``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .errors import AgentRunActiveError, AmbiguousIdError, DagError, NotFoundError
from .model import Content, Node, Role
from .store import CommitStore, RunInfo, SessionInfo, Store

__all__ = [
    "Graph",
    "agent_run",
    "append",
    "branch_path",
    "checkout",
    "create_session",
    "edit",
    "fork",
    "load_graph",
    "new_id",
    "resolve_commit",
    "resolve_node",
    "resolve_session",
    "retry",
    "siblings",
    "variant_key",
]

_UNSET: Any = object()
#: Session metadata key holding, per variant group of caller-children, the shown one.
SELECTED_KEY = "selected_variants"


def new_id(prefix: str = "n") -> str:
    """A fresh unique id: time-ordered hex so ids sort roughly by creation."""
    return f"{prefix}_{time.time_ns():x}{os.urandom(6).hex()}"


def variant_key(node: Node) -> str:
    """The variant group of a node: the id of the original that retries/edits copied."""
    return str(node.metadata.get("variant_of") or node.id)


def create_session(
    store: Store, *, metadata: dict[str, Any] | None = None, source: str = ""
) -> SessionInfo:
    """Create an empty session (HEAD is ``None`` until the first append)."""
    return store.create_session(session_id=new_id("s"), metadata=metadata, source=source)


def append(
    store: Store,
    session_id: str,
    role: Role,
    output: Content = "",
    *,
    name: str = "",
    input: Any = None,
    caller: str | None = None,
    predecessor: str | None = _UNSET,
    reads: tuple[str, ...] = (),
    metadata: dict[str, Any] | None = None,
    node_id: str | None = None,
    created_at: float | None = None,
) -> Node:
    """Append a node and return it as stored (with its ``seq``).

    Without ``caller`` or ``predecessor`` the node continues HEAD (read and advanced
    inside one transaction, so concurrent appenders form a chain, not a race).  With
    ``caller`` it is a call under that node and HEAD stays; with an explicit
    ``predecessor`` it starts or extends that branch and HEAD moves to it.
    """
    call = Node(
        id=node_id or new_id(),
        seq=0,
        created_at=time.time() if created_at is None else created_at,
        role=role,
        name=name,
        input=input,
        output=output,
        predecessor=None if predecessor is _UNSET else predecessor,
        caller=caller,
        reads=tuple(reads),
        metadata=metadata or {},
    )
    if caller is not None:
        return store.append(session_id, call)
    if predecessor is _UNSET:
        return store.append(session_id, call, at_head=True)
    return store.append(session_id, call, set_head=True)


def _refuse_during_run(store: Store, session_id: str, what: str) -> None:
    run = store.active_run(session_id)
    if run is not None:
        raise AgentRunActiveError(
            f"cannot {what} while agent run {run.run_id} (pid {run.pid} on {run.host}) "
            f"is active on session {session_id!r}",
            hint="wait for the run to finish; checkout is allowed meanwhile",
        )


def _sibling(store: Store, session_id: str, node: Node, changes: dict[str, Any]) -> Node:
    meta = {k: v for k, v in node.metadata.items() if k != "usage"}  # usage was that sample's
    meta.update(changes.pop("metadata", None) or {})
    meta["variant_of"] = variant_key(node)
    call = msgspec.structs.replace(
        node, id=new_id(), seq=0, created_at=time.time(), metadata=meta, **changes
    )
    if node.caller is not None:
        stored = store.append(session_id, call)
        _select(store, session_id, stored)
        return stored
    return store.append(session_id, call, set_head=True)


def retry(store: Store, session_id: str, node_id: str) -> Node:
    """Add a same-content sibling of ``node_id`` (resample / rerun) and show it.

    ``AgentRunActiveError`` while an agent run is active on the session.
    """
    # The guard check and the append share one transaction: a run cannot start between.
    with store.transaction():
        _refuse_during_run(store, session_id, "retry")
        node = _visible(store, session_id, node_id)
        return _sibling(store, session_id, node, {"metadata": {"retry_of": node.id}})


def edit(
    store: Store,
    session_id: str,
    node_id: str,
    *,
    output: Content = _UNSET,
    input: Any = _UNSET,
    name: str = _UNSET,
) -> Node:
    """Add a sibling of ``node_id`` with different content and show it.

    At least one of ``output`` / ``input`` / ``name`` must differ from the original
    (``DagError`` otherwise: use ``retry``).  ``AgentRunActiveError`` during a run.
    """
    with store.transaction():
        _refuse_during_run(store, session_id, "edit")
        node = _visible(store, session_id, node_id)
        changes = {
            k: v
            for k, v in (("output", output), ("input", input), ("name", name))
            if v is not _UNSET and v != getattr(node, k)
        }
        if not changes:
            raise DagError(
                f"edit of {node_id!r} changes nothing",
                hint="use retry for a same-content sibling",
            )
        changes["metadata"] = {"edit_of": node.id}
        return _sibling(store, session_id, node, changes)


def _visible(store: Store, session_id: str, node_id: str) -> Node:
    store.get_session(session_id)  # an unknown session is named as such, before the node
    if not node_id:
        raise DagError(
            "empty node id",
            where=f"session {session_id}",
            hint="`ctxrules log SESSION` lists the node ids",
        )
    node = store.get_node(node_id)
    if not store.is_visible(session_id, node_id):
        raise DagError(
            f"node {node_id!r} is not part of session {session_id!r}",
            hint="`ctxrules log SESSION` lists its nodes",
        )
    return node


def _select(store: Store, session_id: str, node: Node) -> None:
    selected = dict(store.get_session(session_id).metadata.get(SELECTED_KEY) or {})
    selected[variant_key(node)] = node.id
    store.update_metadata(session_id, {SELECTED_KEY: selected})


def checkout(store: Store, session_id: str, node_id: str, *, to_leaf: bool = False) -> SessionInfo:
    """Show ``node_id``: move HEAD there (a tool call: make it the shown variant).

    With ``to_leaf`` HEAD goes on to the newest end of the branch below the node (what
    a ``< N/M >`` switcher shows).  Display only: nothing is rerun, nothing
    appended, the working directory is not touched.  Allowed during an agent run.
    One transaction: the shown variant and HEAD change together or not at all.
    """
    with store.transaction():
        node = _visible(store, session_id, node_id)
        if node.caller is None:
            if to_leaf:
                node = load_graph(store, session_id).newest_leaf(node)
            store.set_head(session_id, node.id)
            return store.get_session(session_id)
        _select(store, session_id, node)
        anchor = node
        while anchor.caller is not None:
            anchor = store.get_node(anchor.caller)
        graph = load_graph(store, session_id)
        if anchor.id not in {n.id for n in graph.chain(graph.session.head)}:
            store.set_head(session_id, anchor.id)
        return store.get_session(session_id)


def fork(
    store: Store,
    session_id: str,
    node_id: str | None = None,
    *,
    metadata: dict[str, Any] | None = None,
) -> SessionInfo:
    """A new session whose HEAD is ``node_id`` (default: the HEAD) of ``session_id``.

    The fork shares the old session's nodes (as they are now) without copying them;
    whatever either session appends later is invisible to the other.  It starts by
    showing the tool-call variants the old session shows (a fork of what you see).
    An empty ``node_id`` is a ``DagError`` (``None`` means HEAD).
    """
    base = store.get_session(session_id)
    node = base.head if node_id is None else node_id
    if node is not None:
        _visible(store, session_id, node)
    inherited: dict[str, Any] = {}
    if base.metadata.get(SELECTED_KEY):
        inherited[SELECTED_KEY] = dict(base.metadata[SELECTED_KEY])
    return store.create_session(
        session_id=new_id("s"),
        source=base.source,
        metadata={
            **inherited,
            **(metadata or {}),
            "forked_from": {"session": session_id, "node": node},
        },
        base_session=session_id,
        base_node=node,
        head=node,
    )


@contextmanager
def agent_run(store: Store, session_id: str, *, ttl: float = 30.0) -> Iterator[RunInfo]:
    """Hold the session's agent-run guard for the duration of the ``with`` block.

    While held, ``edit`` and ``retry`` on the session raise ``AgentRunActiveError`` in
    every process using the store.  A heartbeat thread renews the guard every
    ``ttl / 3`` seconds; if the process dies, the guard lapses after ``ttl`` (at once
    for a dead pid on the same host).
    """
    run = store.start_run(session_id, new_id("run"), ttl=ttl)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(ttl / 3):
            store.renew_run(session_id, run.run_id, ttl=ttl)

    thread = threading.Thread(target=beat, name=f"ctxrules-run-{run.run_id}", daemon=True)
    thread.start()
    try:
        yield run
    finally:
        stop.set()
        thread.join()
        store.end_run(session_id, run.run_id)


@dataclass
class Graph:
    """An in-memory snapshot of the nodes visible in one session, for traversals."""

    session: SessionInfo
    by_id: dict[str, Node]
    next_by_pred: dict[str | None, list[Node]] = field(default_factory=dict)
    by_caller: dict[str, list[Node]] = field(default_factory=dict)

    def chain(self, head: str | None) -> list[Node]:
        """Conversation nodes from the root (or a sub-conversation's first node) to ``head``."""
        out: list[Node] = []
        node = self.by_id.get(head) if head else None
        while node is not None:
            out.append(node)
            if node.predecessor is None:
                break
            node = self.by_id.get(node.predecessor)
        out.reverse()
        return out

    def shown_calls(self, node_id: str) -> list[Node]:
        """Caller-children of a node, one per variant group (the selected or newest)."""
        groups: dict[str, list[Node]] = {}
        for child in self.by_caller.get(node_id, []):
            groups.setdefault(variant_key(child), []).append(child)
        selected = self.session.metadata.get(SELECTED_KEY) or {}
        shown = []
        for key, members in groups.items():
            pick = next((m for m in members if m.id == selected.get(key)), members[-1])
            shown.append((members[0].seq, pick))
        return [c for _, c in sorted(shown, key=lambda t: t[0])]

    def siblings(self, node: Node) -> list[Node]:
        """The node's alternatives: same-parent conversation nodes, or its variant group."""
        if node.caller is not None:
            key = variant_key(node)
            return [c for c in self.by_caller.get(node.caller, []) if variant_key(c) == key]
        return self.next_by_pred.get(node.predecessor, [])

    def newest_leaf(self, node: Node) -> Node:
        """Follow the newest conversation child until none is left."""
        while self.next_by_pred.get(node.id):
            node = self.next_by_pred[node.id][-1]
        return node


def load_graph(store: Store, session_id: str) -> Graph:
    """Load every node visible in the session (one query) into a ``Graph``."""
    info = store.get_session(session_id)
    nodes = store.nodes(session_id, inherited=True)
    graph = Graph(info, {n.id: n for n in nodes})
    for n in nodes:  # seq order, so every child list is in seq order
        if n.caller is not None:
            graph.by_caller.setdefault(n.caller, []).append(n)
        else:
            graph.next_by_pred.setdefault(n.predecessor, []).append(n)
    return graph


def siblings(store: Store, session_id: str, node_id: str) -> tuple[int, int]:
    """``(N, M)`` for the ``< N/M >`` switcher: the node is alternative N of M (1-based)."""
    graph = load_graph(store, session_id)
    node = graph.by_id.get(node_id)
    if node is None:
        _visible(store, session_id, node_id)  # raises the right error
        raise DagError(f"node {node_id!r} is not part of session {session_id!r}")
    sibs = graph.siblings(node)
    return [s.id for s in sibs].index(node.id) + 1, len(sibs)


def branch_path(
    store: Store | Graph, session_id: str = "", head: str | None = None, *, nested: bool = False
) -> list[Node]:
    """The current branch, root → HEAD, with caller-children attached: THE traversal.

    Returns a flat list in conversation order.  Each conversation node is followed by
    the calls it made (tool nodes, in ``seq`` order; of retried/edited calls only the
    shown variant).  With ``nested``, each call is in turn followed by its own calls
    and by the sub-conversation it started (a sub-agent: its first node, then its
    newest branch), depth first — the model of the parent never saw those, so the
    default leaves them out.  ``head`` defaults to the session's HEAD; a ``Graph``
    from ``load_graph`` may be passed instead of a store to avoid reloading.
    """
    graph = store if isinstance(store, Graph) else load_graph(store, session_id)
    out: list[Node] = []

    def calls_of(node: Node) -> None:
        for call in graph.shown_calls(node.id):
            out.append(call)
            if nested:
                calls_of(call)
                for sub in graph.chain(graph.newest_leaf(call).id)[1:]:
                    out.append(sub)
                    calls_of(sub)

    for node in graph.chain(head if head is not None else graph.session.head):
        out.append(node)
        calls_of(node)
    return out


# -- ids as people type them -------------------------------------------------------------

#: How many candidates an ambiguous prefix's error names.
SHOWN_CANDIDATES = 5


def _one(kind: str, text: str, ids: Iterable[str], where: str, lists: str) -> str | None:
    """The one id of ``ids`` starting with ``text``; ``None`` if none does."""
    found = [i for i in ids if i.startswith(text)]
    if len(found) <= 1:
        return found[0] if found else None
    shown = ", ".join(found[:SHOWN_CANDIDATES])
    more = f" and {len(found) - SHOWN_CANDIDATES} more" if len(found) > SHOWN_CANDIDATES else ""
    raise AmbiguousIdError(
        f"{kind} id prefix {text!r} is ambiguous: {len(found)} {kind}s start with it "
        f"({shown}{more})",
        candidates=found,
        where=where,
        hint=f"type more characters of the id; {lists}",
    )


def _not_empty(kind: str, text: str, where: str, lists: str) -> None:
    if not text:
        raise DagError(f"empty {kind} id", where=where, hint=lists)


def resolve_session(store: Store, text: str) -> SessionInfo:
    """The session whose id is ``text``, or the only one whose id starts with it.

    ``NotFoundError`` if no id starts with it, ``AmbiguousIdError`` (listing some of
    the candidates) if several do, ``DagError`` for an empty ``text``.
    """
    lists = "`ctxrules sessions` lists them"
    _not_empty("session", text, store.location, lists)
    try:
        return store.get_session(text)
    except NotFoundError:
        sid = _one("session", text, (s.id for s in store.list_sessions()), store.location, lists)
        if sid is None:
            raise
        return store.get_session(sid)


def resolve_node(store: Store, session_id: str, text: str) -> Node:
    """The node of ``session_id`` (its inherited ones included) whose id is ``text``, or
    the only one whose id starts with it.

    A full id of a node outside the session is a ``DagError``; otherwise as
    ``resolve_session``.
    """
    lists = f"`ctxrules log {session_id}` lists them"
    where = f"session {session_id}"
    _not_empty("node", text, where, lists)
    try:
        return _visible(store, session_id, text)
    except NotFoundError:
        nodes = {n.id: n for n in store.nodes(session_id, inherited=True)}
        nid = _one("node", text, nodes, where, lists)
        if nid is None:
            raise
        return nodes[nid]


def resolve_commit(store: CommitStore, session_id: str, text: str) -> str:
    """The id of the commit ``text`` names: a full id (of any session), or a prefix of
    exactly one commit of ``session_id`` or of the sessions it was forked from.

    As ``resolve_session`` for unknown, ambiguous and empty ``text``.
    """
    lists = f"`ctxrules commit {session_id} --json` shows the current commit's id"
    where = f"session {session_id}"
    _not_empty("commit", text, where, lists)
    ids: list[str] = []
    sid: str | None = session_id
    while sid is not None:  # the fork chain: a fork's base commits are its history too
        ids += [r.id for r in store.session_commits(sid)]
        sid = store.get_session(sid).base_session
    if text in ids:
        return text
    found = _one("commit", text, ids, where, lists)
    if found is None:
        store.commit_chain(text)  # another session's commit, or NotFoundError
        return text
    return found
