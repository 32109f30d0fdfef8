"""The store side of commits: load a stored commit, and generate or reuse the commit
of a head (plan from the store, derive, save)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from ..config import PipelineConfig
from ..model import ContextCommit
from ..store import SessionInfo, Store
from . import stored as cstore
from .derive import derive_commit
from .pipeline import Pipeline
from .plan import Plan
from .plan import plan as plan_commit

__all__ = ["ensure_latest_commit", "generate_commit", "load_commit"]


def _session_id(session: str | SessionInfo) -> str:
    return session.id if isinstance(session, SessionInfo) else session


@contextlib.contextmanager
def _open(store: Store | None) -> Iterator[Store]:
    """The caller's store, or the default one (``open_store()``), closed after use."""
    if store is not None:
        yield store
        return
    from ..store import open_store

    opened = open_store()
    try:
        yield opened
    finally:
        opened.close()


def load_commit(commit_id: str, *, store: Store | None = None) -> ContextCommit:
    """A stored commit by id (``NotFoundError`` if unknown)."""
    with _open(store) as st:
        return cstore.load(st, commit_id)


def generate_commit(
    session: str | SessionInfo,
    head: str | None = None,
    now: float | None = None,
    *,
    store: Store | None = None,
    config: PipelineConfig | Pipeline | None = None,
) -> ContextCommit:
    """Derive and store a new commit at ``head`` (default HEAD) from its nearest ancestor
    commit, even when one exists for this head (then it re-runs the rules at ``now``).

    ``config`` defaults to ``find_config()``; ``now`` to the current time.
    """
    return _commit_at(session, head, now, store, config, reuse=False)


def _commit_at(
    session: str | SessionInfo,
    head: str | None,
    now: float | None,
    store: Store | None,
    config: PipelineConfig | Pipeline | None,
    *,
    reuse: bool,
) -> ContextCommit:
    """Plan the commit at ``head``; return the stored one if ``reuse`` and it is current,
    else derive and store a new one."""
    pipeline = config if isinstance(config, Pipeline) else Pipeline.from_config(config)
    sid = _session_id(session)
    with _open(store) as st:
        planned = plan_commit(st, sid, head, pipeline)
        parent = planned.parent
        if (
            reuse
            and parent is not None
            and not planned.calls
            and parent.head_node_id == planned.head
        ):  # the plan only builds on this session's commits of this rule set
            return parent
        return _derive_and_save(st, planned, pipeline, time.time() if now is None else now)


def _derive_and_save(st: Store, plan: Plan, pipeline: Pipeline, now: float) -> ContextCommit:
    def load_attached(cid: str) -> ContextCommit | None:
        try:
            return cstore.load(st, cid)
        except Exception:
            return None

    gen = derive_commit(
        plan.parent,
        plan.calls,
        session_id=plan.session_id,
        head_node_id=plan.head,
        pipeline=pipeline,
        now=now,
        load_commit=load_attached,
        marks=plan.marks,
    )
    cstore.save(st, gen)
    return gen.commit


def ensure_latest_commit(
    session: str | SessionInfo,
    head: str | None = None,
    now: float | None = None,
    *,
    store: Store | None = None,
    config: PipelineConfig | Pipeline | None = None,
) -> ContextCommit:
    """The commit for ``head`` (default HEAD) under ``config``: the stored one if it is
    current (same head, same calls, same rules, same session), else a new one."""
    return _commit_at(session, head, now, store, config, reuse=True)
