"""The store side of commits: load a stored commit, and generate or reuse the commit
of a head (plan from the store, derive, save).

Generating is idempotent: the commit made at a head for a graph, a rule set and a
``now`` is stored once, however many processes ask for it at the same moment.  Planning
only reads; saving compares the head's latest commit with the one the plan saw, and
when another writer got there first the plan is made again on top of its commit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..config import PipelineConfig
from ..errors import StoreError
from ..limits import check_now
from ..model import ContextCommit
from ..store import CommitStore, SessionInfo, open_store
from . import persist
from .answers import Answer, stored_answers
from .derive import derive_with_summaries
from .pipeline import Pipeline
from .plan import Plan
from .plan import plan as plan_commit

__all__ = ["load_commit", "make_commit"]

#: How often a generation re-plans after losing its head to another writer; each round
#: one writer wins, so this is only reached under a storm of writers to one head.
ATTEMPTS = 8


def _session_id(session: str | SessionInfo) -> str:
    return session.id if isinstance(session, SessionInfo) else session


@contextlib.contextmanager
def _open(store: CommitStore | None) -> Iterator[CommitStore]:
    """The caller's store, or the default one (``open_store()``), closed after use."""
    if store is not None:
        yield store
        return

    opened = open_store()
    try:
        yield opened
    finally:
        opened.close()


def load_commit(commit_id: str, *, store: CommitStore | None = None) -> ContextCommit:
    """A stored commit by id (``NotFoundError`` if unknown)."""
    with _open(store) as st:
        return persist.load(st, commit_id)


def make_commit(
    session: str | SessionInfo,
    head: str | None = None,
    *,
    now: float,
    store: CommitStore | None = None,
    config: PipelineConfig | Pipeline | None = None,
    answer: Answer | None = None,
    rerun: bool = False,
) -> ContextCommit:
    """The context commit at ``head`` (default HEAD) of ``session`` under ``config``.

    The stored commit when it is current (same head, same calls, same rules, same
    session), else a new one derived from the nearest ancestor commit with the rules
    run at ``now`` and stored.  With ``rerun=True`` the rules run again at ``now`` even
    over a current commit (idle clearing then sees the later time); a commit already
    made at this ``now`` is returned as it is: the same inputs give the same commit,
    once.  ``now`` is required (seconds since the epoch: the library never reads the
    clock); ``config`` defaults to ``find_config()``; ``store`` to ``open_store()``.
    Summary requests are answered from the store's kept answers, else by ``answer``
    (default ``run_summarizer``), whose good answers are kept (``stored_answers``).
    """
    return _commit_at(session, head, check_now(now), store, config, answer, reuse=not rerun)


def _commit_at(
    session: str | SessionInfo,
    head: str | None,
    now: float,
    store: CommitStore | None,
    config: PipelineConfig | Pipeline | None,
    answer: Answer | None,
    *,
    reuse: bool,
) -> ContextCommit:
    """Plan the commit at ``head``; return the stored one if it is current (and, without
    ``reuse``, made at ``now``), else derive and store a new one."""
    pipeline = config if isinstance(config, Pipeline) else Pipeline.from_config(config)
    sid = _session_id(session)
    with _open(store) as st:
        for _ in range(ATTEMPTS):
            planned = plan_commit(st, sid, head, pipeline)
            parent = planned.parent
            if (
                parent is not None
                and not planned.calls
                and parent.head_node_id == planned.head
                and (reuse or parent.created_at == now)
            ):  # the plan only builds on this session's commits of this rule set
                return parent
            made = derive_planned(st, planned, pipeline, now, answer)
            if made is not None:
                return made
        raise StoreError(
            f"the commit at {planned.head!r} kept being replaced by other writers",
            where=f"session {sid}",
            hint="try again once the other processes committing this session are done",
        )


def derive_planned(
    st: CommitStore, plan: Plan, pipeline: Pipeline, now: float, answer: Answer | None = None
) -> ContextCommit | None:
    """Derive the planned commit and store it unless another writer stored a commit at
    the head since the plan (then ``None``: plan again).  A source an attach names that
    cannot be loaded degrades to one item (``commit.items``), never fails the commit."""

    def load_attached(cid: str) -> ContextCommit | None:
        try:
            return persist.load(st, cid)
        except Exception:
            return None

    gen = derive_with_summaries(  # runs the summarizer for any fold the rules ask for
        plan.parent,
        plan.calls,
        session_id=plan.session_id,
        head_node_id=plan.head,
        pipeline=pipeline,
        now=now,
        load_commit=load_attached,
        marks=plan.marks,
        answer=stored_answers(st, answer),
    )
    return persist.save(st, gen, if_latest=plan.at_head)
