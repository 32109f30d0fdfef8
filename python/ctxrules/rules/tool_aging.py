"""Tool aging: tool results older than the tail window become a one-line ``aged`` stub.

The stub shows the tool, its arguments, the head and tail of the output and the exact
identifiers of the output it no longer shows (paths, symbols, error lines …; at most
``stub_identifier_chars`` characters): what an agent reuses from an old result.

The window is the tool calls of the ``tail_turns`` most recent assistant turns.  The
boundary moves in steps of ``step_turns`` turns (and only once at least
``clear_at_least_tokens`` would be saved), because every rewrite of an old item
invalidates the provider's cached prefix from that item on (cache awareness):
aging a batch every few turns costs one cache rewrite instead of one per turn.

With ``cache_aware`` a batch is aged only when it pays for the rewrite, by the
commit's cache ledger (``ctxrules.ruleapi.cache``): what it saves, read by the
requests to come (those of the cache epoch so far, at most ``payback``), must exceed
what writing the cached prompt again costs; until then the boundary waits and the
commit's notes say so.  A rewrite that costs nothing — the cache went cold, or another
rule already changed a cached item in this commit — is taken at once, for every turn
that has left the window (not only whole steps): edits are batched into the rewrites
that happen anyway.

Protected tools (``protected_tools`` plus ``extra_protected_tools``) are never aged.
Aging does not lock items: idle clearing and summarize must still be able to reach
them (the original design locked them and summarize silently stopped working).

Incremental: the cursors remember where the boundary is — ``tool_aging.pos`` (an item
position) and ``tool_aging.turn`` (how many turns lie before it) — and how many turns
the commit holds (``tool_aging.turns``), so a commit scans only the items the boundary
passes over.  The two counts are values: a summary inserted before the boundary moves
``tool_aging.pos`` but adds no turn.  (Version 1 shifted the counts too, so every fold
made the window one turn shorter; its commits are not built on.)  The rule publishes
the position ``aged_until`` (no item before it will newly be aged) for idle clearing.
While a boundary waits (the ledger finds no step that pays, as on a session the
summarize rule keeps folding) the walk to the target turn resumes where the last one
found the first result that could still be aged (``tool_aging.seek``, with the turns
before it in ``tool_aging.seek_turn``) instead of starting again at the boundary: what
lies between can never be aged (see ``_settled``), so the walk finds what it would find
from the boundary.

Promise: no tool result from the start of the last ``tail_turns`` assistant turns on is
aged or cleared (an attach block shows its source commit's states as they were).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..ruleapi import ContextCommit, ContextItem, Rule, RuleContext
from ..summarizers.facts import exact_identifiers_batch
from ._text import cut_end, cut_middle, identifier_list, one_line

__all__ = ["DEFAULT_PROTECTED_TOOLS", "ToolAging", "is_turn"]

DEFAULT_PROTECTED_TOOLS = ("todo_create", "todo_update", "todo_list", "web_search")
#: Characters per token a stub is counted at when its saving is estimated (names and
#: paths tokenize densely: 3 is on the short side, so the estimate errs on waiting).
STUB_CHARS_PER_TOKEN = 3
#: The fixed part of a stub besides its arguments, ends and identifiers (label, words).
STUB_FRAME_CHARS = 64


def is_turn(item: ContextItem) -> bool:
    """Whether ``item`` starts an assistant turn (a synthesised summary does not, nor
    does one folded into a later summary: it keeps its virtual ``sm_`` id)."""
    return (
        item.role == "assistant"
        and item.state != "summary"
        and not (item.state == "summarized" and item.source_node_id.startswith("sm_"))
    )


def _settled(item: ContextItem) -> bool:
    """Whether ``item`` will never be aged: not a tool result, or one no longer ``full``
    (states only tighten) or locked (locked items are never changed).  Whether an item
    starts a turn never changes either (a summary's state changes only by a fold), so a
    stretch of settled items walked once adds the same turns, and no result to age,
    every time.  (A pinned, cited or protected result is not settled: a rule may still
    clear ``is_anchor`` or change ``name``.)"""
    return item.role != "tool" or item.state != "full" or item.locked


class ToolAging(Rule):
    """Age tool results outside the tail window into ``[tool <name>] … output: <head>… <tail>``."""

    name = "tool_aging"
    version = 4  # 4: the cache ledger prices a rewrite; free rewrites are batched into
    position_cursors = frozenset({"tool_aging.pos", "tool_aging.seek", "aged_until"})
    promise = (
        "no tool result of the last tail_turns assistant turns is aged or cleared "
        "(attach blocks keep their source commit's states)"
    )
    params: ClassVar[Mapping[str, Any]] = {
        "tail_turns": 3,
        "step_turns": 4,
        "clear_at_least_tokens": 0,
        "max_tool_args_chars": 200,
        "stub_args_chars": 80,
        "stub_head_chars": 60,
        "stub_tail_chars": 40,
        "stub_identifier_chars": 300,
        "protected_tools": DEFAULT_PROTECTED_TOOLS,
        "extra_protected_tools": (),
        "cache_aware": False,
        "payback": 20,
    }

    def check(self) -> None:
        for key in (
            "tail_turns",
            "clear_at_least_tokens",
            "stub_head_chars",
            "stub_tail_chars",
            "stub_identifier_chars",
        ):
            if self.values[key] < 0:
                raise self.bad(key, "must be >= 0")
        for key in ("step_turns", "max_tool_args_chars", "stub_args_chars", "payback"):
            if self.values[key] < 1:
                raise self.bad(key, "must be >= 1")
        self._protected = frozenset(self.protected_tools) | frozenset(self.extra_protected_tools)

    def eligible(self, item: ContextItem) -> bool:
        """Whether ``item`` is a full, unlocked, unprotected tool result that no one pinned
        or cited (anchors stay full)."""
        return (
            item.role == "tool"
            and item.state == "full"
            and not item.locked
            and not item.is_anchor
            and item.name not in self._protected
        )

    def stub(self, item: ContextItem, found: Sequence[tuple[str, str]] | None = None) -> str:
        """The one-line text an aged tool result shows (``found``: the exact identifiers
        of its output when the caller has them, from a batch)."""
        args = cut_end(one_line(item.tool_input), self.stub_args_chars)
        text, head, tail = item.rendered, self.stub_head_chars, self.stub_tail_chars
        window = 4 * (head + tail) + 64
        if len(text) > window:  # flatten only the ends: a stub never needs the middle
            text = one_line(text[: 2 * head + 32]) + " " + one_line(text[-(2 * tail + 32) :])
        out = cut_middle(one_line(text), head, tail)
        label = f"[tool {item.name}{' error' if item.is_error else ''}]"
        stub = f"{label} {args} output: {out}" if args else f"{label} output: {out}"
        if self.stub_identifier_chars:
            # What an agent reuses from a result it no longer sees whole: its paths,
            # symbols and error lines (those the stub does not show already).
            ids = identifier_list(item.rendered, self.stub_identifier_chars, (stub,), found)
            if ids:
                stub += f" | identifiers: {ids}"
        return stub

    def _age(
        self, ctx: RuleContext, pos: int, found: Sequence[tuple[str, str]] | None = None
    ) -> None:
        it = ctx.items[pos]
        ctx.replace(
            pos,
            state="aged",
            rendered=self.stub(it, found),
            tool_input=cut_end(it.tool_input, self.max_tool_args_chars),
            reason="tail_window",
        )

    def _saving(self, items: Sequence[ContextItem], batch: Sequence[int]) -> int:
        """At least about the tokens aging ``batch`` saves per request: each result less
        the longest stub it could get (its arguments, ends and identifiers in full)."""
        stub = (
            STUB_FRAME_CHARS
            + self.stub_args_chars
            + self.stub_head_chars
            + self.stub_tail_chars
            + self.stub_identifier_chars
        ) // STUB_CHARS_PER_TOKEN
        return sum(max(0, items[p].tokens - stub) for p in batch)

    def apply(self, ctx: RuleContext) -> None:
        cur = ctx.cursors
        pos = cur.get("tool_aging.pos", 0)
        turn = cur.get("tool_aging.turn", 0)
        turns = cur.get("tool_aging.turns", 0)
        # Where the walk to the target turn resumes: [pos, seek) is settled and holds
        # seek_turn - turn turns (a parent made before these cursors: no stretch).
        seek = cur.get("tool_aging.seek", pos)
        seek_turn = cur.get("tool_aging.seek_turn", turn)
        aged = 0
        for p in ctx.scan_positions():
            it = ctx.items[p]
            if pos <= p < seek:  # a new item inside the settled stretch: walk it again
                seek, seek_turn = pos, turn
            if is_turn(it) and (ctx.full_pass or p >= pos):
                turns += 1
            elif p < pos and self.eligible(it):
                self._age(ctx, p)  # a late result of a turn already outside the window
                aged += 1
        target = turns - self.tail_turns
        # A cache-aware rule ages as soon as the rewrite costs nothing (cold cache, or a
        # cached item already changed in this commit), whole steps or not.
        free = self.cache_aware and target > turn and ctx.cache.rewrite_tokens() == 0
        if target - turn >= self.step_turns or free:
            items = ctx.items
            # From seek: the settled items before it add seek_turn - turn turns and no
            # result, and none of those turns is the target (turns only grow, so target
            # is at least the target of the walk that set seek, which stopped there or
            # later).
            end, t = seek, seek_turn
            open_at, open_turn = -1, t  # the first result of this walk not settled
            batch: list[int] = []
            while end < len(items):
                it = items[end]
                if is_turn(it):
                    if t == target:
                        break
                    t += 1
                elif not _settled(it):
                    if open_at < 0:
                        open_at, open_turn = end, t
                    if self.eligible(it):
                        batch.append(end)
                end += 1
            seek, seek_turn = (open_at, open_turn) if open_at >= 0 else (end, t)
            saving = sum(items[p].tokens for p in batch)
            why = (
                ctx.cache.refusal(self._saving(items, batch), payback=self.payback, at=batch[0])
                if self.cache_aware and batch
                else ""
            )
            pays = not why
            if pays and (saving >= self.clear_at_least_tokens or free):
                # The outputs' identifiers in one call of the core, not one per result.
                found: Sequence[Sequence[tuple[str, str]] | None] = (
                    exact_identifiers_batch([items[p].rendered for p in batch])
                    if self.stub_identifier_chars
                    else [None] * len(batch)
                )
                for p, ids in zip(batch, found):
                    self._age(ctx, p, ids)
                aged += len(batch)
                pos, turn = end, t
                seek, seek_turn = pos, turn
            elif not pays:
                ctx.note(f"waiting: aging {len(batch)} result(s) {why}")
            else:
                ctx.note(
                    f"waiting: {len(batch)} result(s) worth ~{saving} tokens < "
                    f"clear_at_least_tokens={self.clear_at_least_tokens}"
                )
        cur["tool_aging.pos"] = pos
        cur["tool_aging.turn"] = turn
        cur["tool_aging.turns"] = turns
        cur["tool_aging.seek"] = seek
        cur["tool_aging.seek_turn"] = seek_turn
        cur["aged_until"] = pos
        if aged:
            ctx.note(f"aged {aged} tool result(s); window starts at turn {turn + 1} of {turns}")

    def check_promise(self, commit: ContextCommit) -> list[str]:
        """Aged or cleared tool results positioned in the last ``tail_turns`` turns."""
        if self.tail_turns == 0:
            return []
        turns = [p for p, it in enumerate(commit.items) if is_turn(it)]
        start = turns[-self.tail_turns] if len(turns) >= self.tail_turns else 0
        return [
            f"tool result {it.source_node_id} (position {p}) is {it.state} inside the last "
            f"{self.tail_turns} turn(s) (they start at position {start})"
            for p, it in enumerate(commit.items[start:], start)
            if it.role == "tool" and it.state in ("aged", "cleared") and it.attached_from is None
        ]
