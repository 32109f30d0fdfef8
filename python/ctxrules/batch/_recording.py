"""The engine of a replayed session: each commit planned from what the replay appended.

A replay (``batch.session``) rebuilds a recording node by node and prepares a request
at each point where the agent made one.  ``make_commit`` plans each commit from the
store: it walks back from the head to the nearest commit of its rule set and reads the
nodes added since.  The replay knows both — its last commit and the nodes it appended
after it — so the plan is made from them (the commit is then derived as
``make_commit`` derives it, with ``derive_with_summaries``: the same commit, id
included; a test compares them on recorded sessions).  Whenever the store holds what
the replay did not make — nodes it did not append (a compaction's boundary, a call
the engine settled), another commit at the head, another variant shown — the commit
is made by ``make_commit`` itself.

The no-rules replay's commits are read by nothing but the replay (its requests, the
savings baseline, the test kit's checks): they stay in memory (``generated``) and are
never stored; where that replay cannot plan from what it appended, its commit is
derived from the whole branch, as ``make_commit`` does on a store holding none of them.
"""

from __future__ import annotations

from typing import Any

from .. import dag
from ..commit import Generated, Pipeline, derive_with_summaries, stored_answers
from ..commit.generate import derive_planned
from ..commit.plan import Plan, graph_marks
from ..engine import Engine
from ..model import ContextCommit, Node

__all__ = ["ReplayEngine"]


class ReplayEngine(Engine):
    """An ``Engine`` for one replayed session that plans its commits from the nodes the
    replay appended (``appended``, in order) after its last commit.  ``stored=False``:
    the commits stay in memory (``generated``, in the order made), never stored."""

    def __init__(self, *args: Any, stored: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stored = stored
        #: Every commit derived in memory (``stored=False``), in order, with its delta.
        self.generated: list[Generated] = []
        #: How each commit was made: ``planned`` from the appended nodes, ``current``
        #: (the last one, nothing appended since), ``store`` (``make_commit``) and
        #: ``branch`` (derived from the whole branch, in memory).
        self.plans: dict[str, int] = {"planned": 0, "current": 0, "store": 0, "branch": 0}
        self._by_id: dict[str, ContextCommit] = {}
        self._order: list[str] = []
        # Per rule set (version): its latest commit and how many appended nodes it holds.
        self._last: dict[str, tuple[ContextCommit, int]] = {}

    def appended(self, node_id: str) -> None:
        """The replay appended node ``node_id`` to the session."""
        self._order.append(node_id)

    def _commit(self, session: str, head: str, now: float, pipeline: Pipeline) -> ContextCommit:
        node = self.store.get_node(head)
        while node.caller is not None:  # a call is shown through the node above it
            node = self.store.get_node(node.caller)
        info = self.store.get_session(session)
        marks = graph_marks(info)
        planned = self._plan(session, node.id, pipeline, marks, info.base_seq)
        if planned is None:
            commit = self._anew(session, node.id, now, pipeline, marks)
        else:
            parent, calls = planned
            if calls is None:
                self.plans["current"] += 1
                return parent
            commit = self._derive(parent, calls, session, node.id, now, pipeline, marks, "planned")
        self._last[pipeline.version] = (commit, len(self._order))
        return commit

    def _plan(
        self, session: str, head: str, pipeline: Pipeline, marks: dict[str, int], base_seq: int
    ) -> tuple[ContextCommit, list[Node] | None] | None:
        """The parent and the calls since it (``None`` calls: the parent is current), or
        ``None`` when the replay cannot tell from what it appended."""
        last = self._last.get(pipeline.version)
        if last is None:
            return None
        parent, held = last
        seq, variants = f"seq:{session}", f"variants:{session}"
        if parent.cursors.get(variants, marks[variants]) != marks[variants]:
            return None  # another variant of a call is shown
        if parent.cursors.get(seq, base_seq) + len(self._order) - held != marks[seq]:
            return None  # nodes the replay did not append
        if self.stored:  # the plan builds on the latest commit at the head, if any
            at_head = self.store.latest_commit(session, head, pipeline.version)
            if at_head != (parent.id if parent.head_node_id == head else None):
                return None
        if held == len(self._order) and parent.head_node_id == head:
            return parent, None
        # As the plan reads them: the stored nodes, in the order appended (branch order).
        return parent, [self.store.get_node(i) for i in self._order[held:]]

    def _anew(
        self, session: str, head: str, now: float, pipeline: Pipeline, marks: dict[str, int]
    ) -> ContextCommit:
        if self.stored:
            self.plans["store"] += 1
            return super()._commit(session, head, now, pipeline)
        calls = dag.branch_path(self.store, session, head)
        return self._derive(None, calls, session, head, now, pipeline, marks, "branch")

    def _derive(
        self,
        parent: ContextCommit | None,
        calls: list[Node],
        session: str,
        head: str,
        now: float,
        pipeline: Pipeline,
        marks: dict[str, int],
        how: str,
    ) -> ContextCommit:
        self.plans[how] += 1
        if self.stored:
            at_head = parent.id if parent is not None and parent.head_node_id == head else None
            plan = Plan(parent, calls, head, session, marks, at_head)
            saved = derive_planned(self.store, plan, pipeline, now)
            assert saved is not None  # one replay writes its session's commits
            return saved
        gen = derive_with_summaries(
            parent,
            calls,
            session_id=session,
            head_node_id=head,
            pipeline=pipeline,
            now=now,
            load_commit=self._by_id.get,
            marks=marks,
            answer=stored_answers(self.store),
        )
        commit = gen.commit
        self.generated.append(gen)
        self._by_id[commit.id] = commit
        return commit
