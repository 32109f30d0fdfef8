"""Context quality: did each request still show what the agent used next, and which key
facts of the folded history does the rendered request still hold.

The first measure is needed-fact recall (``ctxrules.quality.needed``: ``FactIndex``,
``score``, ``session_recall``, ``RecallReport``), scored on every request of a replay
(``ctxrules quality``, ``ctxrules rerender``, ``ctxrules tune``).  The second line,
below, checks the folded history's key facts in one request.

Deterministic, no model.  For a commit whose rules folded part of the history into a
summary, the facts of the folded part (``facts``: the task statement, the user's
constraints, exact identifiers, files touched, open todos) are extracted from the
original nodes — the DAG keeps every one — and each is looked for, exactly (after
whitespace normalisation), in the text of the request rendered for a provider
(``text``).  A ``QualityReport`` gives per category the facts found of the total and
the missing ones, and the retained-token ratio: the commit's tokens ÷ the tokens of
the same branch with no rules.  It is a plain struct, so a tuning loop can score rule
settings with it.

``assess`` is the pure core (a commit, its nodes, a rendered body); ``check_quality``
does the whole job on a stored session (commit, render, baseline) and is what
``ctxrules quality`` runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from ..commit import Pipeline, derive_commit, load_commit, make_commit
from ..commit.anchor import AnchorSkip
from ..config import PipelineConfig
from ..dag import branch_path
from ..errors import CtxrulesError, NotFoundError
from ..model import ContextCommit, Node
from ..render import render
from ..requests import Request, render_defaults
from ..store import CommitStore
from .facts import CATEGORIES, Fact, extract_facts
from .needed import (
    FactIndex,
    NeededFact,
    RecallReport,
    RequestRecall,
    score,
    session_recall,
    session_recalls,
)
from .text import request_text

__all__ = [
    "CATEGORIES",
    "CategoryScore",
    "Fact",
    "FactIndex",
    "NeededFact",
    "QualityReport",
    "RecallReport",
    "RequestRecall",
    "assess",
    "baseline_tokens",
    "check_quality",
    "folded_node_ids",
    "request_text",
    "score",
    "session_recall",
    "session_recalls",
]


class CategoryScore(msgspec.Struct, frozen=True, kw_only=True):
    """One category's result: facts found of the total, the share (``None`` when there
    were none) and the texts of the missing facts, in the order they were stated."""

    found: int
    total: int
    share: float | None
    missing: tuple[str, ...] = ()


class QualityReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a compacted request kept of the folded history (see the module docstring).

    ``retained_ratio`` is ``commit_tokens / baseline_tokens`` (the branch with no
    rules, counted with the same encoding); ``folded_nodes`` counts the original nodes
    whose items are ``summarized`` in the commit; ``categories`` has every category of
    ``CATEGORIES`` in that order; ``facts`` lists each fact with ``found`` set.
    """

    session_id: str
    head_node_id: str
    commit_id: str
    provider: str
    model: str
    commit_tokens: int
    baseline_tokens: int
    retained_ratio: float
    folded_nodes: int
    found: int
    total: int
    categories: dict[str, CategoryScore]
    facts: tuple[Fact, ...]


def folded_node_ids(commit: ContextCommit) -> list[str]:
    """Ids of the original nodes whose items the commit holds as ``summarized``, in
    commit order (a previous summary folded into a later one is not a node: skipped)."""
    return [
        it.source_node_id
        for it in commit.items
        if it.state == "summarized" and not it.source_node_id.startswith("sm_")
    ]


def assess(
    commit: ContextCommit,
    nodes: Mapping[str, Node],
    branch: Sequence[Node],
    *,
    body: bytes,
    baseline_tokens: int,
    provider: str = "",
    model: str = "",
    anchor_skip: AnchorSkip | None = None,
    memo: dict[bytes, str] | None = None,
) -> QualityReport:
    """Score one rendered request: the facts of the commit's folded nodes looked up in
    ``body``.

    ``nodes`` maps node ids to the original nodes (every folded id must be there:
    ``NotFoundError`` otherwise); ``branch`` is the branch the commit was made from,
    root to head (``dag.branch_path`` order), for the task statement and the latest
    todo states; ``body`` the request body bytes (``render(...).body``);
    ``baseline_tokens`` the tokens of that branch with no rules (``baseline_tokens``);
    ``anchor_skip`` the pipeline's (which node is the task statement); ``memo``
    ``request_text``'s memo, when the caller read the session's requests with one
    (``session_recalls``): the body's messages are not read again.
    Pure: the same inputs give the same report.
    """
    folded: list[Node] = []
    for node_id in folded_node_ids(commit):
        node = nodes.get(node_id)
        if node is None:
            raise NotFoundError(
                "a folded item's original node is missing",
                where=f"commit {commit.id}: node {node_id}",
                hint="pass every node of the branch (and of attached sessions) in nodes",
            )
        folded.append(node)
    text = request_text(body, memo)
    facts = tuple(
        msgspec.structs.replace(f, found=f.text in text)
        for f in extract_facts(folded, branch, anchor_skip)
    )
    categories: dict[str, CategoryScore] = {}
    for name in CATEGORIES:
        mine = [f for f in facts if f.category == name]
        found = sum(f.found for f in mine)
        categories[name] = CategoryScore(
            found=found,
            total=len(mine),
            share=found / len(mine) if mine else None,
            missing=tuple(f.text for f in mine if not f.found),
        )
    return QualityReport(
        session_id=commit.session_id,
        head_node_id=commit.head_node_id,
        commit_id=commit.id,
        provider=provider,
        model=model,
        commit_tokens=commit.total_tokens,
        baseline_tokens=baseline_tokens,
        retained_ratio=commit.total_tokens / baseline_tokens if baseline_tokens else 1.0,
        folded_nodes=len(folded),
        found=sum(f.found for f in facts),
        total=len(facts),
        categories=categories,
        facts=facts,
    )


def baseline_tokens(
    store: CommitStore, commit: ContextCommit, branch: Sequence[Node], pipeline: Pipeline
) -> int:
    """Tokens of ``branch`` with no rules, counted with ``pipeline``'s encoding: derived
    in memory (nothing is stored), attach pointers expanded from ``store``."""

    def load_attached(cid: str) -> ContextCommit | None:
        try:
            return load_commit(cid, store=store)
        except CtxrulesError:
            return None

    off = pipeline.with_rules([])
    gen = derive_commit(
        None,
        branch,
        session_id=commit.session_id,
        head_node_id=commit.head_node_id,
        pipeline=off,
        now=commit.created_at,
        load_commit=load_attached,
    )
    return gen.commit.total_tokens


def check_quality(
    session: str,
    head: str | None = None,
    *,
    now: float,
    store: CommitStore,
    config: PipelineConfig | Pipeline | None = None,
    provider: str = "anthropic",
    model: str | None = None,
) -> QualityReport:
    """The quality report of the commit ``config`` makes at ``head`` (default HEAD).

    The commit is found or made at ``now`` (``make_commit``, so it is stored
    like any other), rendered for ``provider`` as the session recorded its requests
    (``ctxrules.requests.render_defaults``; ``model`` overrides), and assessed against the
    branch's original nodes.  The figures speak for the compaction the commit reached:
    check ``retained_ratio`` (a session that is not over its summarize threshold folds
    nothing, and only its task statement is checked).
    """
    pipeline = config if isinstance(config, Pipeline) else Pipeline.from_config(config)
    commit = make_commit(session, head, now=now, store=store, config=pipeline)
    branch = branch_path(store, commit.session_id, commit.head_node_id)
    nodes = {c.id: c for c in branch}
    for node_id in folded_node_ids(commit):
        if node_id not in nodes:  # an item attached from another session
            nodes[node_id] = store.get_node(node_id)
    request = Request(session_id=commit.session_id, commit=commit, situation="", sent_at=now)
    defaults = render_defaults(store, request, provider, model=model)
    rendered = render(commit, provider, **defaults.options)
    return assess(
        commit,
        nodes,
        branch,
        body=rendered.body,
        baseline_tokens=baseline_tokens(store, commit, branch, pipeline),
        provider=rendered.provider,
        model=rendered.model,
        anchor_skip=pipeline.anchor_skip,
    )
