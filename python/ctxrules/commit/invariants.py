"""The commit invariants checked on derived commits: invariants 1–8 of docs/rules.md,
the consistency a renderer relies on (tool pairing, token totals, attach blocks folded
whole), the promise of every rule of the pipeline (``Rule.check_promise``) and the
pipeline's own promise (``PIPELINE_PROMISE``).

The test kit (``ctxrules.testing``) runs these on generated sessions; the batch replay
runs them on every commit it derives.  A failure raises ``InvariantViolation`` naming
the invariant or promise, the rule set and the item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Any

import msgspec

from ..model import STATE_RANK, ContextCommit, ContextItem, Node
from ..ruleapi import Delta, item_text_for_tokens
from ..ruleapi.delta import replay
from .anchor import task_anchor
from .derive import Generated
from .items import merge_parents
from .pipeline import Pipeline

__all__ = [
    "PIPELINE_PROMISE",
    "InvariantViolation",
    "check_counts",
    "check_promises",
    "check_step",
    "fail",
]


class InvariantViolation(AssertionError):
    """A commit broke an invariant; the message names which, where and under which rules."""


def fail(number: str, message: str, pipeline: Pipeline, commit: ContextCommit) -> None:
    rules = ", ".join(r.name for r in pipeline.rules) or "no rules"
    what = number if number.startswith("promise") else f"invariant {number}"
    raise InvariantViolation(
        f"{what}: {message} (commit {commit.id} at {commit.head_node_id}; rules: {rules})"
    )


# -- checks ------------------------------------------------------------------------------


#: What every pipeline promises besides its rules' promises, whatever the rules.
PIPELINE_PROMISE = "system items and the task anchor are never folded, aged or cleared"


def _protected_broken(
    commit: ContextCommit, pipeline: Pipeline, nodes: Mapping[str, Node] | None
) -> list[str]:
    """Where ``commit`` breaks ``PIPELINE_PROMISE``: a system item that is not locked or
    not full (while the pipeline locks them), and a task anchor — ``task_anchor`` of the
    commit's own nodes, when ``nodes`` are given — not marked as one or not full."""
    broken: list[str] = []
    items = commit.items
    if pipeline.lock_system:
        broken.extend(
            f"system item {it.source_node_id} is {it.state if it.locked else 'not locked'}"
            for it in items
            if it.role == "system"
            and it.attached_from is None
            and (not it.locked or it.state != "full")
        )
    if pipeline.anchor_task and nodes is not None:
        # The task statement is looked for among the shown nodes in order only as far as
        # it is (usually among the first few), then its items are checked.
        task = task_anchor(
            (
                nodes[it.source_node_id]
                for it in items
                if it.attached_from is None and it.source_node_id in nodes
            ),
            pipeline.anchor_skip,
        )
        sid = task.id if task is not None else None
        mine = [] if sid is None or sid not in nodes else items
        for it in mine:
            if it.source_node_id == sid and it.attached_from is None:
                if not it.is_anchor:
                    broken.append(
                        f"the task statement {it.source_node_id} (the first real "
                        "instruction) is not the anchor"
                    )
                if it.state != "full":
                    broken.append(f"the task anchor {it.source_node_id} is {it.state}")
    return broken


def check_promises(
    commit: ContextCommit, pipeline: Pipeline, nodes: Mapping[str, Node] | None = None
) -> None:
    """Assert that ``commit`` keeps the promise of every rule of ``pipeline`` (the
    pipeline that derived it, from the start of its chain) and ``PIPELINE_PROMISE``.

    The task anchor is checked when ``nodes`` (the nodes by id, as ``drive`` and
    ``drive_branch`` give them) are passed: which node is the first real instruction
    depends on their metadata, which items do not carry.
    """
    broken = _protected_broken(commit, pipeline, nodes)
    if broken:
        more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
        fail(
            "promise of the pipeline",
            f"{PIPELINE_PROMISE} — broken: {broken[0]}{more}",
            pipeline,
            commit,
        )
    for rule in pipeline.rules:
        broken = rule.check_promise(commit)
        if broken:
            more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
            fail(
                f"promise of rule {rule.name!r}",
                f"{rule.promise or 'its promise'} — broken: {broken[0]}{more}",
                pipeline,
                commit,
            )


def _key(it: ContextItem) -> tuple[str, str | None]:
    return (it.source_node_id, it.attached_from)


def check_step(
    parent: ContextCommit | None,
    gen: Generated,
    *,
    pipeline: Pipeline,
    node_ids: Set[str] | Mapping[str, Node],
    parent_bytes: bytes | None,
    counter: Any,
) -> None:
    """Assert the invariants for one derived commit against its parent.

    The specification of ``commit._chain_check.ChainChecker`` (the batch replay's
    per-change filter in front of this): a check added here must be added there too,
    or there the commits it concerns must come here (tests/commit/test_chain_check.py).
    """
    c = gen.commit
    if gen.requests:
        rules = sorted({r.rule for r in gen.requests})
        fail("summaries", f"summary requests of {rules} left unanswered", pipeline, c)
    if parent is not None and parent_bytes is not None:
        if msgspec.msgpack.encode(parent) != parent_bytes:
            fail("2", "deriving a child changed the saved parent commit", pipeline, c)
    _check_parents(parent, c, pipeline, node_ids)
    seen_attach: dict[str, int] = {}
    prev_from: str | None = None
    total = 0
    present: dict[str, ContextItem] = {}
    for it in c.items:
        if it.attached_from is None:
            present[it.source_node_id] = it
        if it.attached_from != prev_from and it.attached_from is not None:
            seen_attach[it.attached_from] = seen_attach.get(it.attached_from, 0) + 1
        prev_from = it.attached_from
        if it.state == "summary" or it.source_node_id.startswith("sm_"):
            if not (it.state == "summary" or it.state == "summarized"):
                fail("5", f"virtual item {it.source_node_id} in state {it.state}", pipeline, c)
            if it.source_node_id in node_ids:
                fail("5", f"summary id {it.source_node_id} is a DAG node", pipeline, c)
        elif it.attached_from is None and it.source_node_id not in node_ids:
            fail("5", f"item {it.source_node_id} names no DAG node", pipeline, c)
        if it.state != "summarized":
            total += it.tokens
    for src, blocks in seen_attach.items():
        if blocks != 1:
            fail("6", f"attach of {src} expanded {blocks} times", pipeline, c)
    if total != c.total_tokens:
        fail("tokens", f"total_tokens {c.total_tokens} != sum of items {total}", pipeline, c)
    # Pairing: a tool result and its caller are shown together or folded together (a
    # shown result without its call is an orphan, a shown call without its result is
    # unanswered: both are refused by providers).
    folded_in_block: dict[str, set[bool]] = {}
    for it in c.items:
        folded = it.state == "summarized"
        if it.attached_from is not None:
            folded_in_block.setdefault(it.attached_from, set()).add(folded)
        elif it.role == "tool" and it.caller:
            caller = present.get(it.caller)
            if caller is not None and (caller.state == "summarized") != folded:
                what = "caller folded" if not folded else "caller shown"
                fail("pairing", f"tool {it.source_node_id} {it.state}, {what}", pipeline, c)
    for src, states in folded_in_block.items():  # an attach block folds whole or not at all
        if len(states) > 1:
            fail("attach", f"the attach block of {src} was split by folding", pipeline, c)
    if parent is not None:
        old = {_key(it): it for it in parent.items}
        new = {_key(it): it for it in c.items}
        for k, before in old.items():
            after = new.get(k)
            if after is None:
                fail("3", f"item {k[0]} disappeared", pipeline, c)
                continue
            if before.locked and after != before:
                fail("4", f"locked item {k[0]} was modified", pipeline, c)
            if (
                STATE_RANK[after.state] < STATE_RANK[before.state]
                or (before.state == "summary" and after.state not in ("summary", "summarized"))
                or (before.state == "summarized" and after != before)
            ):
                fail("3", f"item {k[0]} went {before.state} → {after.state}", pipeline, c)
    # Token counts of what this commit touched are exact (unchanged ones were checked
    # when they were made).
    # The stored delta must rebuild exactly this commit from its parent: a rule that
    # bypassed ctx.replace / ctx.fold would make the store disagree with the commit.
    rebuilt: list[ContextItem] = list(parent.items) if parent is not None else []
    replay(rebuilt, gen.delta)
    if tuple(rebuilt) != c.items:
        fail(
            "2",
            "the commit's stored delta does not rebuild it (a rule changed items "
            "without ctx.replace / ctx.fold)",
            pipeline,
            c,
        )
    check_counts(c, msgspec.msgpack.decode(gen.delta, type=Delta)[1], counter, pipeline)


def check_counts(
    c: ContextCommit, changed: Sequence[tuple[int, ContextItem]], counter: Any, pipeline: Pipeline
) -> None:
    """Assert that every item a commit's delta wrote (``changed``: its ``(position,
    item)`` pairs) says its exact token count."""
    texts: list[str] = []
    for _, it in changed:
        texts.extend(item_text_for_tokens(it))
    counts = iter(counter.count_batch(texts))
    for _, it in changed:
        n = sum(next(counts) for _ in item_text_for_tokens(it))
        if n != it.tokens:
            fail("tokens", f"item {it.source_node_id} says {it.tokens} tokens, is {n}", pipeline, c)


def _check_parents(
    parent: ContextCommit | None,
    c: ContextCommit,
    pipeline: Pipeline,
    node_ids: Set[str] | Mapping[str, Node],
) -> None:
    """Invariant 7: a commit's parents are the commit it was derived from, then — only
    when it adds a merge instruction node — the peer commits that node names."""
    merged: list[str] = []
    if parent is not None and isinstance(node_ids, Mapping):
        before = {it.source_node_id for it in parent.items}
        for it in c.items:
            node = node_ids.get(it.source_node_id)
            if it.attached_from is None and node is not None and it.source_node_id not in before:
                merged.extend(merge_parents(node))
    expected = tuple(dict.fromkeys((parent.id, *merged))) if parent is not None else ()
    if c.parent_ids == expected:
        return
    if len(c.parent_ids) > 1 and not merged:
        known = "" if isinstance(node_ids, Mapping) else " (pass the nodes to check a merge)"
        fail("7", f"{len(c.parent_ids)} parents outside a merge{known}", pipeline, c)
    fail("7", f"parents {list(c.parent_ids)}, expected {list(expected)}", pipeline, c)
