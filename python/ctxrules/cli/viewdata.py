"""The data the viewer's page reads (``ctxrules view``): one answer per request.

A request is a name and string parameters: ``/api/NAME?KEY=VALUE…`` on the local
server, and the same ``request_key`` in the data an exported file embeds.  Each answer
is made by the function whose output the matching command prints with ``--json``, so the
page and the command line cannot disagree:

======================  ==========================================================
``sessions``            ``ctxrules sessions --json`` (``sessions.session_json``)
``node``                one element of ``ctxrules log --json`` (``log.call_fields``)
``commit``              ``ctxrules commit --json`` (``commit.commit_json``, item text added)
``diff``                ``ctxrules commit --diff … --json`` (``commit.diff_json``)
``stats``               ``ctxrules stats --json`` (``stats.session_stats``)
``render``              ``ctxrules render --json --explain`` (``render.render_request``)
======================  ==========================================================

Two answers are the viewer's own: ``graph`` (the history graph: every node with its
conversation children, shown calls, ``< N/M >`` alternatives and whether it is on the
branch to HEAD, all from ``ctxrules.dag``'s ``Graph`` and ``branch_path``) and
``timeline`` (the commit at each turn of a branch, ``commit.branch_commits``).  ``config``
tells the page which session to open and which providers exist.

The answers never write: the commit at a turn that has none stored is made as the
commands make it (``make_commit``) but kept in memory (``store.ReadOnlyView``), where
later requests find it — a GET stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import msgspec

from ..commit import boundary_of, load_commit, persist
from ..config import PipelineConfig
from ..dag import branch_path, load_graph, resolve_commit, resolve_node, resolve_session
from ..engine import merged_into
from ..errors import ValidationError
from ..model import ContextCommit, Node
from ..providers import provider_names
from ..store import CommitStore, ReadOnlyView
from .commit import branch_commits, commit_json, diff_json
from .log import _preview, call_fields
from .render import render_request
from .sessions import session_json, session_title
from .stats import session_stats

__all__ = [
    "ENDPOINTS",
    "TIMELINE_TURNS",
    "ViewData",
    "commit_answer",
    "graph_json",
    "request_key",
]

#: The names the page may ask for, each answered by ``ViewData.answer``.
ENDPOINTS = ("config", "sessions", "graph", "node", "timeline", "commit", "diff", "stats", "render")

#: How many of a branch's last turns the timeline shows by default (each needs a commit).
TIMELINE_TURNS = 200

#: Commits the viewer keeps loaded (``commit.persist.keep``): a commit asked for again is
#: the same object, so identical requests add nothing to the core's render cache, which
#: finds items by identity (with the default few, every round of the same requests
#: prepared the same commits again, ~10 MB more each round under 64 clients).
KEPT_COMMITS = 4096


#: The characters JavaScript's ``encodeURIComponent`` leaves as they are, besides
#: letters, digits and ``-_.``: the page builds the same keys with it.
_KEEP = "!~*'()"


def request_key(name: str, params: Mapping[str, str]) -> str:
    """The canonical form of a request, ``NAME?k=v&…``: empty values left out, keys
    sorted, both percent-encoded as JavaScript's ``encodeURIComponent`` does (the page
    builds the same string to fetch an answer or look it up in an exported file)."""
    query = "&".join(
        f"{quote(k, safe=_KEEP)}={quote(v, safe=_KEEP)}"
        for k, v in sorted(params.items())
        if v != ""
    )
    return f"{name}?{query}" if query else name


def _tool_role(call: Node) -> bool:
    return call.role == "tool"


def _boundary(call: Node) -> dict[str, Any] | None:
    """A boundary node's compaction record as ``ctxrules log`` reads it (its summary left
    out: the node itself holds it); ``{"invalid": why}`` for a record that does not
    validate."""
    try:
        record = boundary_of(call)
    except ValidationError as exc:
        return {"invalid": exc.message}
    if record is None:
        return None
    out: dict[str, Any] = msgspec.to_builtins(record)
    out.pop("summary", None)
    return out


def graph_json(store: CommitStore, session_id: str) -> dict[str, Any]:
    """The history graph of a session, for drawing.

    ``nodes`` lists every node visible in the session in ``seq`` order with its
    ``preview`` (the line ``ctxrules log`` shows), its ``next`` conversation children
    and its shown ``calls`` (caller-children, one per retried variant group), the ids of
    its ``alternatives`` when it has siblings (``< N/M >``), ``on_branch`` (on the branch
    to HEAD, sub-agents included), ``frame`` (it starts a sub-conversation under a tool
    call), ``inherited`` (a fork's base owns it), ``commits`` (how many commits are
    stored at it), the ``compaction`` record of a boundary node (``commit.boundary_of``)
    and the ``merge`` / ``attach`` records its metadata holds.  ``roots`` are the
    conversation's first nodes; ``forks`` the sessions forked from this one (and where);
    ``merged`` where this session's heads were merged (``engine.merged_into``); ``counts``
    sums it up.
    """
    graph = load_graph(store, session_id)
    info = graph.session
    on_branch = {n.id for n in branch_path(graph, nested=True)}
    stored: dict[str, int] = {}
    for row in store.session_commits(session_id):
        stored[row.head_node_id] = stored.get(row.head_node_id, 0) + 1
    nodes = []
    for n in graph.by_id.values():
        alternatives = graph.siblings(n)
        entry: dict[str, Any] = {
            "id": n.id,
            "seq": n.seq,
            "role": n.role,
            "name": n.name,
            "created_at": n.created_at,
            "preview": _preview(n),
            "caller": n.caller,
            "predecessor": n.predecessor,
            "next": [c.id for c in graph.next_by_pred.get(n.id, [])],
            "calls": [c.id for c in graph.shown_calls(n.id)],
            "alternatives": [a.id for a in alternatives] if len(alternatives) > 1 else [],
            "on_branch": n.id in on_branch,
            "frame": n.caller is not None and not _tool_role(n),
            "inherited": bool(n.session_id) and n.session_id != session_id,
            "commits": stored.get(n.id, 0),
            "is_error": bool(n.metadata.get("is_error")),
        }
        compaction = _boundary(n)
        if compaction is not None:
            entry["compaction"] = compaction
        for key in ("merge", "attach"):
            if isinstance(n.metadata.get(key), Mapping):
                entry[key] = n.metadata[key]
        nodes.append(entry)
    nodes.sort(key=lambda e: e["seq"])
    forks = [
        {"session": s.id, "node": s.base_node}
        for s in store.list_sessions()
        if s.base_session == session_id
    ]
    return {
        "session": session_json(info, session_title(store, info)),
        "head": info.head,
        "merged": merged_into(store, session_id),
        "roots": [c.id for c in graph.next_by_pred.get(None, [])],
        "nodes": nodes,
        "forks": forks,
        "counts": {
            "nodes": len(nodes),
            "conversation": sum(1 for n in graph.by_id.values() if n.caller is None),
            "tool_calls": sum(1 for n in graph.by_id.values() if _tool_role(n)),
            "on_branch": len(on_branch),
            "commits": sum(stored.values()),
        },
    }


def commit_answer(commit: ContextCommit) -> dict[str, Any]:
    """The ``commit`` answer: ``ctxrules commit --json`` with each item's text."""
    return commit_json(commit, text=True)


@dataclass
class ViewData:
    """Answers the page's requests from one store (see the module docstring).

    ``config`` is the rule configuration, ``now`` the clock of the rules and of the
    next request, ``session`` the session the page opens first (``None``: the page
    lists them), ``timeline_turns`` how many last turns a timeline holds.  ``store``
    is read through a ``ReadOnlyView`` (made here when it is not one): commits made
    for an answer stay in memory.  ``opener``, when given, opens a store of the same
    location for each thread that answers (a server's requests then share no
    connection); ``close()`` closes what it opened.
    """

    store: CommitStore
    config: PipelineConfig
    now: float
    session: str | None = None
    timeline_turns: int = TIMELINE_TURNS
    providers: tuple[str, ...] = ()
    opener: Callable[[], CommitStore] | None = None
    _answers: dict[str, Callable[[Mapping[str, str]], Any]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.store, ReadOnlyView):
            self.store = ReadOnlyView(self.opener if self.opener is not None else self.store)
        persist.keep(self.store, KEPT_COMMITS)
        self._answers = {name: getattr(self, f"_{name}") for name in ENDPOINTS}
        if not self.providers:
            self.providers = tuple(provider_names())

    def close(self) -> None:
        """Close the stores opened for the threads (the store given stays open)."""
        if isinstance(self.store, ReadOnlyView):
            self.store.close()

    def answer(self, name: str, params: Mapping[str, str]) -> Any:
        """The JSON-able answer to request ``name`` with ``params``.

        ``ValidationError`` for an unknown name or a missing parameter; the errors of
        the functions it calls (unknown ids, a request that cannot be rendered) as
        they raise them.
        """
        handler = self._answers.get(name)
        if handler is None:
            raise ValidationError(
                f"unknown request {name!r}", hint=f"one of {', '.join(ENDPOINTS)}"
            )
        return handler(params)

    # -- parameters ------------------------------------------------------------------------

    @staticmethod
    def _param(params: Mapping[str, str], key: str) -> str:
        value = params.get(key, "")
        if not value:
            raise ValidationError(f"missing parameter {key!r}", where="viewer request")
        return value

    def _session_of(self, params: Mapping[str, str]) -> str:
        return resolve_session(self.store, self._param(params, "session")).id

    def _node_of(self, session: str, params: Mapping[str, str], key: str) -> str | None:
        value = params.get(key, "")
        return resolve_node(self.store, session, value).id if value else None

    # -- answers ---------------------------------------------------------------------------

    def _config(self, params: Mapping[str, str]) -> dict[str, Any]:
        return {
            "session": self.session,
            "providers": list(self.providers),
            "now": self.now,
            "timeline_turns": self.timeline_turns,
        }

    def _sessions(self, params: Mapping[str, str]) -> list[dict[str, Any]]:
        infos = self.store.list_sessions()
        return [session_json(s, session_title(self.store, s)) for s in infos]

    def _graph(self, params: Mapping[str, str]) -> dict[str, Any]:
        return graph_json(self.store, self._session_of(params))

    def _node(self, params: Mapping[str, str]) -> dict[str, object]:
        session = self._session_of(params)
        return call_fields(resolve_node(self.store, session, self._param(params, "id")))

    def timeline(
        self, session: str, head: str | None
    ) -> tuple[dict[str, Any], list[ContextCommit]]:
        """The ``timeline`` answer at ``head`` (default HEAD) of ``session`` (a full id),
        and the commits it lists, oldest first: an export answers their ``commit`` and
        ``diff`` requests from these (``commit_answer``, ``diff_json``) instead of
        loading each commit from the store again."""
        commits, turns = branch_commits(
            self.store, session, head, config=self.config, limit=self.timeline_turns
        )
        answer = {
            "session": session,
            "head": commits[-1].head_node_id if commits else head,
            "turns": turns,
            "commits": [commit_json(c, items=False) for c in commits],
        }
        return answer, commits

    def _timeline(self, params: Mapping[str, str]) -> dict[str, Any]:
        session = self._session_of(params)
        return self.timeline(session, self._node_of(session, params, "head"))[0]

    def _commit(self, params: Mapping[str, str]) -> dict[str, Any]:
        session = self._session_of(params)
        commit_id = resolve_commit(self.store, session, self._param(params, "id"))
        return commit_answer(load_commit(commit_id, store=self.store))

    def _diff(self, params: Mapping[str, str]) -> dict[str, Any]:
        session = self._session_of(params)
        a, b = (
            load_commit(
                resolve_commit(self.store, session, self._param(params, k)), store=self.store
            )
            for k in ("a", "b")
        )
        return diff_json(a, b)

    def _stats(self, params: Mapping[str, str]) -> dict[str, Any]:
        session = self._session_of(params)
        stats = session_stats(
            self.store,
            session,
            head=self._node_of(session, params, "head"),
            model=params.get("model") or None,
            config=self.config,
            now=self.now,
        )
        return stats.as_dict()

    def _render(self, params: Mapping[str, str]) -> dict[str, Any]:
        """An assistant answer of the conversation: the request that produced it (as
        recorded, at the time it was sent); any other node: the next request there."""
        session = self._session_of(params)
        node = self._node_of(session, params, "node") or self.store.get_session(session).head
        answer = None
        if node is not None:
            call = self.store.get_node(node)
            if call.role == "assistant" and call.caller is None:
                answer = node
        done = render_request(
            self.store,
            session,
            self._param(params, "provider"),
            head=None if answer else node,
            for_node=answer,
            now=None if answer else self.now,
            config=self.config,
            explain=True,
        )
        return done.as_dict()
