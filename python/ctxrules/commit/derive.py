"""``derive_commit``: the pure heart of commit generation.

Parent commit + new nodes + rules + ``now`` (+ the answers to summary requests) → new
commit.  It copies the parent's item list (a pointer copy: unchanged items are the same
objects, never re-rendered and never recounted), turns the new nodes into ``full``
items, runs the pipeline through a ``RuleContext`` and counts the tokens of every new
or changed item in one batch with the pipeline's tokenizer (the Rust counter's content
cache).  It does no I/O, looks up no plugin and reads no clock: a rule that needs a
summary gets it as an input, or returns the request (``Generated.requests``).
``derive_with_summaries`` answers those requests and derives again, in one call.

A commit's id is a hash of its parent ids, its head, its rules and the *delta* it makes
against its parent (Merkle style), so identical inputs give the identical id and the id
never needs the whole item list re-hashed.  The store keeps that delta, not the list.

A commit has one parent, the one it was derived from, except a merge: a derive whose
new nodes include a merge instruction (``items.merge_parents``) also names the peer
commits that instruction merges, after its own parent.  The DAG says so, not the
caller, so a merge commit is as reproducible as any other.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

import msgspec

from ..errors import RuleError
from ..model import ContextCommit, ContextItem, Node
from ..ruleapi import RuleContext, cache
from ..ruleapi import delta as cdelta
from ..ruleapi.context import COMPACTION_BLOCKS, SUMMARY_TOKENS, InlineAnswer
from ..summarizers.request import SummaryRequest, SummaryResult, run_summarizer
from .anchor import task_anchor
from .boundary import fold_at, is_boundary
from .items import attach_items, attach_ref, find_native, item_for_call, merge_parents
from .pipeline import Pipeline

__all__ = ["Generated", "derive_commit", "derive_with_summaries"]

#: Cursors a change of rules keeps: the anchor, the expanded attach blocks, the cache
#: ledger (what the provider holds does not depend on the rules), whether an item
#: holds a compaction block and the summaries' tokens.
_STICKY = ("anchor", "attach:", "cache.", COMPACTION_BLOCKS, SUMMARY_TOKENS)
#: Cursor keys describing the graph a commit was made from; each commit sets its own.
_MARKS = ("seq:", "variants:")


class Generated(NamedTuple):
    """A derived commit, its delta against the parent (what the store keeps), the
    summary requests no answer was given for (empty: the commit is final), and which
    rule wrote each item reason this derive wrote (``RuleContext.reasons``; stored with
    the commit, not part of its id: ``ctxrules.commit.savings`` reads it)."""

    commit: ContextCommit
    delta: bytes
    requests: tuple[SummaryRequest, ...] = ()
    reasons: Mapping[str, str] = MappingProxyType({})


_encoder = msgspec.msgpack.Encoder(order="sorted")


def _place(items: Sequence[ContextItem], call: Node) -> int:
    """Where a new node's item goes: the end, or a tool right after its caller's calls."""
    if call.caller is None:
        return len(items)
    p = find_native(items, call.caller)
    if p < 0:
        return len(items)  # caller absent: a "missing pairing" item, rendered as user text
    p += 1
    while p < len(items) and items[p].role == "tool" and items[p].caller == call.caller:
        p += 1
    return p


def derive_commit(
    parent: ContextCommit | None,
    calls: Sequence[Node],
    *,
    session_id: str,
    head_node_id: str,
    pipeline: Pipeline,
    now: float,
    load_commit: Callable[[str], ContextCommit | None] | None = None,
    marks: Mapping[str, int] | None = None,
    summaries: Mapping[str, SummaryResult | str] | None = None,
    answer: InlineAnswer | None = None,
) -> Generated:
    """Derive the commit at ``head_node_id``: ``parent`` plus ``calls`` through the pipeline.

    Pure: the same arguments give the same commit, id included.  ``calls`` are the new
    branch nodes in branch order (``dag.branch_path`` order).  ``load_commit`` looks up
    the source commits of attach pointers (give a lookup, e.g. a dict's ``get``: it is
    called during the derive).  ``marks`` (e.g. the session's seq watermark) are
    recorded in the cursors so a later generation can tell whether the graph changed
    under this commit.  ``summaries`` answers summary requests by key (a
    ``SummaryResult`` or the text); a request without an answer is returned in
    ``Generated.requests`` and the commit then folds nothing for it (its notes say it
    is waiting).  ``answer`` (``derive_with_summaries`` gives it) answers the other
    requests as the rules make them, so the rule gets its answer in this derive: the
    commit is then the one ``summaries`` holding those answers gives (pure only as
    far as ``answer`` is); an exception ``answer`` raises stops further answers and is
    raised once the rules ran.  A rule that breaks its contract raises ``RuleError``
    naming it.
    """
    items = _working_list(parent)
    cursors = (
        {k: v for k, v in parent.cursors.items() if not k.startswith(_MARKS)}
        if parent is not None
        else {}
    )
    full_pass = parent is not None and parent.rules_version != pipeline.version
    if full_pass:
        cursors = {k: v for k, v in cursors.items() if k.startswith(_STICKY)}
    new_ids: set[str] = set()
    answers = (
        {k: SummaryResult(text=v) if isinstance(v, str) else v for k, v in summaries.items()}
        if summaries
        else None
    )
    ctx = RuleContext(
        items,
        now=now,
        cursors=cursors,
        new_ids=new_ids,
        first_new=len(items),
        counter=pipeline.tokenizer,
        total_tokens=parent.total_tokens if parent is not None else 0,
        full_pass=full_pass,
        positions=pipeline.position_cursors,
        summaries=answers,
        pricing=pipeline.cache,
        model=pipeline.model,
        compaction_blocks=_compaction_blocks(cursors.get(COMPACTION_BLOCKS)),
        answer=answer,
        summary_tokens=_summary_tokens(cursors.get(SUMMARY_TOKENS)),
    )
    # The task anchor is chosen once per branch: the first real instruction
    # (``task_anchor``), looked for until a commit on the branch has found it.
    task = (
        task_anchor(calls, pipeline.anchor_skip)
        if pipeline.anchor_task and "anchor" not in cursors
        else None
    )
    if task is not None:
        cursors["anchor"] = 1
    boundaries: list[tuple[Node, int]] = []
    merged: list[str] = []
    for call in calls:
        merged.extend(merge_parents(call))
        if is_boundary(call):
            # A compaction boundary adds no item (no text); it folds what precedes it
            # once the rules ran (ctxrules.commit.boundary).
            boundaries.append((call, ctx.mark()))
            continue
        ref = attach_ref(call)
        if ref is not None:
            key = f"attach:{ref['commit']}"
            if key in cursors:
                continue  # expanded once, however many pointers name it (invariant 6)
            cursors[key] = 1
            # What the branch shows already (a prefix a fork or sibling shares) is left
            # out of the block; rare enough (one pass per expanded pointer) to scan for.
            shown = {it.source_node_id for it in items}
            new_items = attach_items(call, ref, load_commit, now=now, shown=shown)
        else:
            new_items = [
                item_for_call(call, anchor=call is task, lock_system=pipeline.lock_system, now=now)
            ]
        pos = _place(items, call)
        for it in new_items:
            new_ids.add(it.source_node_id)
            ctx.insert(pos, it)
            pos += 1
    for call in calls:  # a node that declares it read another makes that one "cited"
        for read in call.reads:
            p = find_native(items, read)
            if (
                p >= 0
                and not items[p].locked
                and not items[p].is_anchor
                and (items[p].state != "summarized")
            ):
                ctx.replace(p, is_anchor=True, reason=f"cited_by:{call.id}")
    for rule in pipeline.rules:
        ctx.rule_name = rule.name
        before = len(items) - ctx.inserted_count()
        try:
            rule.apply(ctx)
        except RuleError:
            raise
        except Exception as exc:
            raise RuleError(
                f"rule failed: {type(exc).__name__}: {exc}", where=f"rule {rule.name!r}"
            ) from exc
        if len(items) - ctx.inserted_count() != before:
            raise RuleError(
                "changed the number of items without ctx.insert / ctx.fold "
                "(items are never removed from a commit)",
                where=f"rule {rule.name!r}",
            )
    ctx.rule_name = ""
    if ctx.answer_error is not None:  # as if the answer had been asked after the derive
        raise ctx.answer_error
    if pipeline.rules:  # the cache ledger (ctxrules.ruleapi.cache): a commit per request
        cache.advance(
            cursors, items, ctx.new_positions(), now, pipeline.model, changed=ctx.cache.rewritten
        )
    # After the rules, so every rule sees the new items as it would without a boundary
    # (none of them folded yet) and the fold takes the items as the rules left them.
    for call, handle in boundaries:
        fold_at(ctx, call, ctx.marked(handle))
    if boundaries and pipeline.rules:
        cache.reset(cursors)  # a compaction rewrote the prompt: a new cache epoch
    if marks:
        cursors.update(marks)
    cursors[COMPACTION_BLOCKS] = int(ctx.holds_compaction())
    cursors[SUMMARY_TOKENS] = ctx.summary_tokens()
    inserted, changed, folds = ctx.delta()
    summary = parent.summary if parent is not None else ""
    for _, it in changed:
        if it.state == "summary":
            summary = it.rendered
    # Only a derive on top of a commit has parents: a branch derived from scratch (other
    # rules, a fork) has none to name first, and the first parent is what the delta is
    # against.
    parent_ids = tuple(dict.fromkeys((parent.id, *merged))) if parent is not None else ()
    delta = cdelta.encode((inserted, changed, folds))
    notes = tuple(ctx.notes)
    total = ctx.total_tokens()
    digest = hashlib.blake2b(digest_size=16)
    digest.update(
        _encoder.encode(
            (
                session_id,
                parent_ids,
                head_node_id,
                pipeline.version,
                now,
                total,
                notes,
                summary,
                cursors,
            )
        )
    )
    digest.update(delta)
    commit = ContextCommit(
        id=f"cc_{digest.hexdigest()}",
        session_id=session_id,
        parent_ids=parent_ids,
        created_at=now,
        head_node_id=head_node_id,
        rules_version=pipeline.version,
        total_tokens=total,
        items=tuple(items),
        summary=summary,
        notes=notes,
        cursors=cursors,
    )
    _keep_working_list(commit, items)
    return Generated(commit, delta, tuple(ctx.requests), ctx.reasons)


def _summary_tokens(value: int | None) -> int | None:
    """The parent's ``summary.tokens`` cursor: None when it was not written (a parent
    made before it) or is not a count (a rule wrote over it)."""
    return value if type(value) is int and value >= 0 else None


def _compaction_blocks(value: int | None) -> bool | None:
    """The parent's ``compaction.blocks`` cursor as a fact: None when it was not written
    (a parent made before it), or something a rule wrote over it cannot be trusted."""
    return None if value not in (0, 1) else bool(value)


#: How many rounds of requests ``derive_with_summaries`` answers before it gives up (a
#: rule asking for ever new summaries would otherwise never finish).
MAX_SUMMARY_ROUNDS = 32


def derive_with_summaries(
    parent: ContextCommit | None,
    calls: Sequence[Node],
    *,
    session_id: str,
    head_node_id: str,
    pipeline: Pipeline,
    now: float,
    load_commit: Callable[[str], ContextCommit | None] | None = None,
    marks: Mapping[str, int] | None = None,
    summaries: Mapping[str, SummaryResult | str] | None = None,
    answer: Callable[[SummaryRequest], SummaryResult] = run_summarizer,
) -> Generated:
    """``derive_commit``, with every summary request answered: the final commit.

    Each request is answered with ``answer`` (default ``run_summarizer``: the
    registered summarizer within the request's time limit) as the rules make it, in
    the derive (``derive_commit(answer=…)``), so a summary costs no second derive;
    requests left (once ``MAX_SUMMARY_ROUNDS`` answers were made in-line, or an answer
    was ``None``) are answered after it and the commit derived again with the answers,
    until none is left.  The result is exactly ``derive_commit(...,
    summaries=answers)``: how long an answer took, or on which machine, never changes
    the commit, only the answer itself does (a timed-out answer is an answer too: the
    rule records it and backs off).  An exception ``answer`` raises is raised as it is
    (after the rules of that derive ran, as if asked after it).  ``load_commit`` is
    called once per attach source, before deriving; ``summaries`` are answers known
    already.
    """
    attached: dict[str, ContextCommit | None] = {}
    if load_commit is not None:
        for call in calls:
            ref = attach_ref(call)
            if ref is not None and ref["commit"] not in attached:
                try:
                    attached[ref["commit"]] = load_commit(ref["commit"])
                except Exception:  # an unloadable source degrades to one item (attach_items)
                    attached[ref["commit"]] = None
    answers: dict[str, SummaryResult | str] = dict(summaries or {})
    # In-line answers are bounded like rounds are: a rule asking for ever new summaries
    # gets MAX_SUMMARY_ROUNDS of them in-line, then the rounds below (and their limit).
    inline_left = MAX_SUMMARY_ROUNDS

    def inline(request: SummaryRequest) -> SummaryResult | None:
        nonlocal inline_left
        if inline_left <= 0:
            return None
        inline_left -= 1
        found = answers[request.key] = answer(request)
        return found

    for _ in range(MAX_SUMMARY_ROUNDS):
        gen = derive_commit(
            parent,
            calls,
            session_id=session_id,
            head_node_id=head_node_id,
            pipeline=pipeline,
            now=now,
            load_commit=attached.get if load_commit is not None else None,
            marks=marks,
            summaries=answers,
            answer=inline,
        )
        if not gen.requests:
            return gen
        for request in gen.requests:
            if request.key not in answers or answers[request.key] is None:
                answers[request.key] = answer(request)
    rules = sorted({r.rule for r in gen.requests})
    raise RuleError(
        f"still asking for summaries after {MAX_SUMMARY_ROUNDS} rounds of answers",
        where=f"rule {rules[0]!r}" if rules else "pipeline",
    )


# The list a derive worked on holds exactly the new commit's items.  Handing it to the
# commit's first child saves one of the two O(n) pointer copies a derive makes (the
# other is building the commit's tuple).  It is popped when used, so no two derives
# ever share a list; a second child (a branch) copies the tuple as usual.
_SPARE_LISTS = 4
_spare: OrderedDict[str, list[ContextItem]] = OrderedDict()
_spare_lock = threading.Lock()


def _working_list(parent: ContextCommit | None) -> list[ContextItem]:
    if parent is None:
        return []
    with _spare_lock:
        spare = _spare.pop(parent.id, None)
    n = len(parent.items)
    if spare is not None and len(spare) == n and (n == 0 or spare[-1] is parent.items[-1]):
        return spare
    return list(parent.items)


def _keep_working_list(commit: ContextCommit, items: list[ContextItem]) -> None:
    with _spare_lock:
        _spare[commit.id] = items
        while len(_spare) > _SPARE_LISTS:
            _spare.popitem(last=False)
