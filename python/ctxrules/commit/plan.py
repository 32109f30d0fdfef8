"""Planning a commit from the store: the nearest ancestor commit of a head and the
branch nodes added since.

The walk goes back from the head one node at a time and asks the store for the latest
commit at each node (an indexed lookup), so its cost is the number of nodes since that
commit, not the history length.  It only reads: no write lock is taken.  A commit is
only built on when the graph did not change under it away from its head (a late call
of an older turn, another variant selected); otherwise the plan is the whole branch.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

import msgspec

from ..dag import SELECTED_KEY, Graph, branch_path
from ..errors import DagError
from ..model import ContextCommit, Node
from ..store import CommitStore, SessionInfo
from . import persist
from .items import find_native
from .pipeline import Pipeline

__all__ = ["Plan", "graph_marks", "plan"]


class Plan(NamedTuple):
    """What to derive: the parent (or None: from scratch), the calls to add, the head,
    the session, its graph marks, and the latest commit at the head when planned
    (``at_head``: what saving compares against, so two writers never both add one)."""

    parent: ContextCommit | None
    calls: list[Node]
    head: str
    session_id: str
    marks: dict[str, int]
    at_head: str | None


def graph_marks(info: SessionInfo) -> dict[str, int]:
    """The state of the session graph a commit is made from: its highest own ``seq`` and
    a hash of which variant of each retried call is shown."""

    selected = info.metadata.get(SELECTED_KEY) or {}
    digest = zlib.crc32(msgspec.json.encode(selected, order="sorted"))
    return {f"seq:{info.id}": info.base_seq + info.calls, f"variants:{info.id}": digest}


def _stale(
    store: CommitStore,
    info: SessionInfo,
    parent: ContextCommit,
    new: set[str],
    marks: dict[str, int],
) -> bool:
    """Whether the graph changed under ``parent`` away from its head: a call added later
    to a node ``parent`` already shows (a retried tool call of an older turn), or another
    variant selected.  HEAD does not move for either, so the walk back cannot see them."""
    sid = info.id
    old_variants = parent.cursors.get(f"variants:{sid}")
    if old_variants is not None and old_variants != marks[f"variants:{sid}"]:
        return True
    since = parent.cursors.get(f"seq:{sid}", info.base_seq)
    if since >= marks[f"seq:{sid}"]:
        return False
    roles: dict[str, str] | None = None
    for call in store.calls_since(sid, since):
        if call.caller is None or call.caller in new:
            continue
        if roles is None:  # rare: only when a late call exists
            roles = {it.source_node_id: it.role for it in parent.items if it.attached_from is None}
        # Calls of a tool node (a sub-agent's nodes) are not on the branch the model sees.
        if roles.get(call.caller, "tool") != "tool":
            return True
    return False


def plan(store: CommitStore, session_id: str, head: str | None, pipeline: Pipeline) -> Plan:
    """Find the nearest ancestor commit of ``head`` and the branch nodes added since."""

    info = store.get_session(session_id)
    head = head if head is not None else info.head
    if head is None:
        raise DagError(
            f"session {session_id!r} has no nodes, so there is nothing to commit",
            hint="append or import something first",
        )
    if not store.is_visible(session_id, head):
        raise DagError(
            f"node {head!r} is not part of session {session_id!r}",
            hint="`ctxrules log SESSION` lists its nodes",
        )
    node = store.get_node(head)
    while node.caller is not None:  # a call is shown through the conversation node above it
        node = store.get_node(node.caller)
    head = node.id
    walk: list[Node] = []
    by_caller: dict[str, list[Node]] = {}
    parent: ContextCommit | None = None
    base: Node | None = None
    # Only the session's own commits serve as ancestors: a commit records the graph marks
    # (seq watermark, shown tool-call variants) of the session it was made in, so a fork
    # cannot prove its base's commit still fits its own graph (a fork's first commit is
    # built from its whole branch).  Another rule set's commits never serve either: their
    # items carry that rule set's compression, and states only tighten along a chain.
    at_head = found = store.latest_commit(session_id, node.id, pipeline.version)
    while True:
        by_caller[node.id] = store.children(node.id, session_id=session_id, edge="caller")
        if found is not None:
            candidate = persist.load(store, found)
            graph = Graph(info, {}, {}, by_caller)
            shown = {c.id for c in graph.shown_calls(node.id)}
            p = find_native(candidate.items, node.id)
            existing = set()
            q = p + 1
            while 0 < q < len(candidate.items) and candidate.items[q].caller == node.id:
                existing.add(candidate.items[q].source_node_id)
                q += 1
            if existing <= shown:  # only calls were added since: build on it
                parent, base = candidate, node
                break
        walk.append(node)
        if node.predecessor is None:
            break
        node = store.get_node(node.predecessor)
        found = store.latest_commit(session_id, node.id, pipeline.version)
    graph = Graph(info, {n.id: n for n in walk}, {}, by_caller)
    calls: list[Node] = []
    if base is not None and parent is not None:
        start = max(0, find_native(parent.items, base.id))
        have = {it.source_node_id for it in parent.items[start:]}
        calls.extend(c for c in graph.shown_calls(base.id) if c.id not in have)
    if walk:
        calls.extend(branch_path(graph, head=head))
    marks = graph_marks(info)
    new = {n.id for n in walk} | ({base.id} if base is not None else set())
    if parent is not None and _stale(store, info, parent, new, marks):
        # Correct before fast: rebuild from the whole branch (the one traversal).
        return Plan(None, branch_path(store, session_id, head), head, session_id, marks, at_head)
    return Plan(parent, calls, head, session_id, marks, at_head)
