"""Compaction boundaries: the history node that marks a compaction, and the derive step
that folds at it.

A compaction is an event of the history graph, not a rule: a ``system`` node with empty
content appended at HEAD whose metadata ``"compaction"`` holds a ``Compaction`` record
(trigger, direction, pivot, instructions, tokens before and after, the HEAD before it,
how many items it folded, the summarizer, the summary text).  ``derive_commit`` never
makes an item for it (a boundary adds no text to any request) and runs ``fold_at`` as
a built-in step, whatever rules are configured, once the pipeline's rules ran — so a
rule sees the new items as it would without a boundary, none of them folded yet:

* ``full`` folds every foldable unit before the boundary into one summary, previous
  summaries included, except locked, anchor (task statement) and system items and the
  protected tail: the open turn (an unanswered request, or an assistant turn whose tool
  results wait for the model) plus whole units back to ``keep_tail_tokens``;
* ``from`` folds the pivot's unit and everything after it up to the protected tail:
  the prefix, and the provider's cache of it, stays;
* ``up_to`` folds the units before the pivot's unit: the tail from the pivot on stays.

Units are whole (an assistant turn with its tool results, an attach block, one item:
``ctxrules.summarizers.units``), so no tool call is ever split from its result.
Outside a full compaction earlier summaries stay where they are and the new summary
is appended (cache-stable).

The summary text is part of the record once the boundary is stored
(``ctxrules.compaction`` asks the summarizer before appending, so the node it appends
is final): deriving over a stored boundary then asks no summarizer, and a commit
rebuilt from scratch folds into the same text.  A record without a summary (one made
by hand, or imported without its summary line) asks for one through
``RuleContext.summary`` like any rule.  A record that does not validate, a pivot the
commit does not show, or nothing to fold is noted on the commit; nothing is folded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from ..errors import ValidationError
from ..model import ContextItem, Node
from ..ruleapi import FULL_COMPACTION_REASON, RuleContext
from ..summarizers.units import unit_end
from .items import find_native

__all__ = [
    "COMPACTION_KEY",
    "DIRECTIONS",
    "RESTORE_KEY",
    "TRIGGERS",
    "Compaction",
    "boundary_of",
    "fold_at",
    "is_boundary",
    "protected_tail",
    "restore_of",
]

#: The node metadata key of a boundary's record.
COMPACTION_KEY = "compaction"
#: The node metadata key of the user node a compaction appends to restore context.
RESTORE_KEY = "compaction_restore"
#: What started a compaction (``imported``: a transcript's own compaction of unknown kind).
TRIGGERS = ("auto", "manual", "partial", "reactive", "imported")
#: Which part of the history a compaction folds.
DIRECTIONS = ("full", "from", "up_to")
#: The rule name a boundary's notes and summary requests carry.
STEP = "compaction"

Trigger = Literal["auto", "manual", "partial", "reactive", "imported"]
Direction = Literal["full", "from", "up_to"]


class Compaction(msgspec.Struct, frozen=True, kw_only=True):
    """The record of one compaction, stored in its boundary node's metadata.

    ``trigger`` says what started it; ``direction`` and ``pivot`` which part was folded
    (see the module docstring); ``instructions`` the user's (and ``pre_compact``
    hooks') instructions for the summary.  ``tokens_before`` / ``tokens_after`` are
    what the request carried before and after, measured as ``measured`` says
    (``"<provider>:<model>"``: the billed-prompt estimate; ``"items"``: the commit's
    item tokens; ``"recorded"``: the transcript's own figure; ``None``: unknown).
    ``previous`` is the HEAD before the boundary, ``folded_items`` how many items the
    fold absorbed.  ``summarizer``, ``budget`` and ``timeout_seconds`` make the summary
    request; ``summary`` is its answer (``None``: not known yet, asked for when
    deriving).  ``keep_open_turn`` / ``keep_tail_tokens`` shape the protected tail of a
    full compaction.  ``source`` keeps where an imported record came from.
    """

    trigger: Trigger
    direction: Direction = "full"
    pivot: str | None = None
    instructions: str = ""
    tokens_before: int | None = None
    tokens_after: int | None = None
    measured: str = ""
    previous: str | None = None
    folded_items: int = 0
    summarizer: str = "extractive"
    budget: int = 4000
    timeout_seconds: float = 0.0
    keep_open_turn: bool = True
    keep_tail_tokens: int = 0
    summary: str | None = None
    source: dict[str, Any] = {}

    def __post_init__(self) -> None:
        if self.direction != "full" and not self.pivot:
            raise ValidationError(
                f"a {self.direction!r} compaction needs a pivot node",
                where="compaction.pivot",
                hint="name the node to fold from / up to",
            )
        for name in ("tokens_before", "tokens_after"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValidationError(
                    f"{name} must be >= 0, got {value}", where=f"compaction.{name}"
                )
        if self.budget < 16 or self.keep_tail_tokens < 0 or self.folded_items < 0:
            raise ValidationError(
                "budget must be >= 16, keep_tail_tokens and folded_items >= 0",
                where="compaction",
            )

    def to_metadata(self) -> dict[str, Any]:
        """The record as the plain dict a node's metadata holds."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


def is_boundary(call: Node) -> bool:
    """Whether ``call`` is a compaction boundary: a ``system`` conversation node (no
    ``caller``) whose metadata holds ``"compaction"``."""
    return call.role == "system" and call.caller is None and COMPACTION_KEY in call.metadata


def boundary_of(call: Node) -> Compaction | None:
    """The compaction record of a boundary node, or ``None`` for any other node.

    ``ValidationError`` (naming the node) when the node carries a record that does not
    validate.
    """
    if not is_boundary(call):
        return None
    try:
        return msgspec.convert(call.metadata[COMPACTION_KEY], Compaction)
    except (msgspec.ValidationError, TypeError, ValidationError) as exc:
        raise ValidationError(
            f"invalid compaction record: {exc}", where=f"node {call.id}"
        ) from None


def _kept(item: ContextItem) -> bool:
    return item.locked or item.is_anchor or (item.role == "system" and item.attached_from is None)


def _units(items: Sequence[ContextItem], end: int) -> list[tuple[int, int]]:
    """The foldable units of ``items[:end]`` that are not folded yet, in order."""
    out = []
    p = 0
    while p < end:
        if items[p].state == "summarized":
            p += 1
            continue
        q = min(unit_end(items, p), end)
        out.append((p, q))
        p = q
    return out


def protected_tail(
    items: Sequence[ContextItem],
    end: int,
    *,
    keep_open_turn: bool,
    keep_tail_tokens: int,
) -> int:
    """Where the protected tail of ``items[:end]`` starts (``end``: nothing protected).

    The open turn: the trailing requests (user, system or attach units) when the last
    unit is one, or the last assistant turn with its tool results (the model has not
    answered them yet) and the requests just before it.  A turn the model answered
    (the last unit is a plain assistant answer) is closed: nothing is protected for
    it.  Whole units before that stay too while they fit in ``keep_tail_tokens``.
    """
    units = _units(items, end)
    k = len(units)
    if keep_open_turn and units:
        s, e = units[-1]
        last = items[s]
        is_request = last.role in ("user", "system") or last.attached_from is not None
        if is_request or (last.role == "assistant" and e - s > 1):
            k -= 1
            while k > 0:
                s, _ = units[k - 1]
                if items[s].role not in ("user", "system") or items[s].attached_from:
                    break
                k -= 1
    used = 0
    while k > 0 and keep_tail_tokens:
        s, e = units[k - 1]
        size = sum(it.tokens for it in items[s:e] if it.state != "summarized")
        if used + size > keep_tail_tokens:
            break
        used += size
        k -= 1
    return units[k][0] if k < len(units) else end


def _unit_start(items: Sequence[ContextItem], pos: int) -> int:
    """The start of the unit holding the item at ``pos`` (a tool result belongs to its
    caller's turn, an attach item to its block)."""
    it = items[pos]
    if it.attached_from is not None:
        while pos > 0 and items[pos - 1].attached_from == it.attached_from:
            pos -= 1
        return pos
    if it.role == "tool" and it.caller:
        caller = find_native(items[:pos], it.caller)
        if caller >= 0:
            return caller
    return pos


def _selection(
    ctx: RuleContext, record: Compaction, end: int
) -> tuple[list[int], str] | tuple[None, str]:
    """The positions to fold for ``record`` over ``items[:end]``, or ``None`` and why not."""
    items = ctx.items
    tail = protected_tail(
        items,
        end,
        keep_open_turn=record.keep_open_turn,
        keep_tail_tokens=record.keep_tail_tokens,
    )
    lo, hi = 0, tail
    if record.direction != "full":
        pos = find_native(items[:end], record.pivot or "")
        if pos < 0 or items[pos].state == "summarized":
            return None, f"the pivot {record.pivot} is not shown in the commit"
        start = _unit_start(items, pos)
        if record.direction == "from":
            lo = start
        else:
            hi = min(start, tail)
    merge = record.direction == "full"
    positions: list[int] = []
    for s, e in _units(items, hi):
        if s < lo:
            continue
        unit = items[s:e]
        if unit[0].state == "summary" and unit[0].attached_from is None and not merge:
            continue  # an earlier summary stays: the new one is appended after it
        if any(_kept(u) for u in unit):
            continue
        positions.extend(range(s, e))
    if not any(items[p].state != "summarized" for p in positions):
        return None, "nothing to fold (only kept items, summaries or the protected tail)"
    return positions, ""


def fold_at(ctx: RuleContext, call: Node, end: int) -> None:
    """The derive step of boundary node ``call``: fold per its record the items before
    position ``end`` (where the boundary stands), noting what it did or why not.

    Called by ``derive_commit`` for each boundary among the new nodes, after the rules.
    """
    ctx.rule_name = STEP
    try:
        try:
            record = boundary_of(call)
        except ValidationError as exc:
            ctx.note(f"boundary {call.id} ignored: {exc}")
            return
        if record is None:
            return
        ctx.total_tokens()  # counts every item first: requests carry exact token counts
        positions, why = _selection(ctx, record, end)
        if positions is None:
            ctx.note(f"boundary {call.id} folded nothing: {why}")
            return
        run = [ctx.items[p] for p in positions if ctx.items[p].state != "summarized"]
        text = _summary_text(ctx, call, record, run)
        if text is None:
            return
        run_tokens = sum(it.tokens for it in run)
        at = ctx.fold_positions(
            positions,
            positions[-1] + 1,
            text,
            # A full compaction's reason starts with FULL_COMPACTION_REASON: the one fold
            # the summarize rule's promise lets merge earlier summaries.
            reason=(
                f"{FULL_COMPACTION_REASON}{call.id}"
                if record.direction == "full"
                else f"compaction:{record.direction}:{call.id}"
            ),
        )
        ctx.note(
            f"boundary {call.id} ({record.trigger}, {record.direction}) folded {len(run)} "
            f"item(s) ({run_tokens} tokens) into {ctx.items[at].source_node_id} "
            f"({ctx.tokens(at)} tokens)"
        )
    finally:
        ctx.rule_name = ""


def _summary_text(
    ctx: RuleContext, call: Node, record: Compaction, run: list[ContextItem]
) -> str | None:
    """The recorded summary, or the caller's answer to the request for one (``None``
    after noting why there is none)."""
    if record.summary is not None:
        if record.summary.strip():
            return record.summary
        ctx.note(f"boundary {call.id} folded nothing: its recorded summary is empty")
        return None
    answer = ctx.summary(
        run,
        summarizer=record.summarizer,
        budget=record.budget,
        timeout_seconds=record.timeout_seconds,
        instructions=record.instructions,
    )
    if answer is None:
        ctx.note(f"boundary {call.id}: waiting for a summary of {len(run)} item(s)")
        return None
    problem = answer.problem(record.timeout_seconds)
    if problem:
        ctx.note(f"boundary {call.id} folded nothing: the summarizer {problem}; all content kept")
        return None
    return answer.text


def restore_of(call: Node) -> Mapping[str, Any] | None:
    """What a compaction's restore node restored (its metadata ``compaction_restore``)."""
    raw = call.metadata.get(RESTORE_KEY)
    return raw if isinstance(raw, Mapping) else None
