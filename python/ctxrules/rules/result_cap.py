"""Per-result cap: a tool result longer than ``max_tool_result_chars`` keeps its head and
tail, with a marker saying how much was cut and naming the exact identifiers of the cut
part (paths, symbols, error lines …, ``summarizers.facts.exact_identifiers``; at most
``cut_identifier_chars`` characters of them) — so one huge result cannot blow every
later request, and what the agent may reuse from its middle stays findable.

The newest input is what the agent is about to read: the results after the last
assistant turn are cut only beyond ``newest_max_chars`` (the agent's next call used a
name from the middle of a result capped the moment it arrived: issue 21).  A result is
capped at ``max_tool_result_chars`` once an answer follows it.

With ``cache_aware`` a result that stops being newest input is capped only when that
pays for rewriting the cached prompt (the commit's cache ledger,
``ctxrules.ruleapi.cache``): capping it changes a message the provider has cached, so
the request writes the cached conversation again.  Until it pays (the cache went cold,
another rule rewrote it in this commit, or the cut saves more over the next
``payback`` requests than the rewrite costs: what the cut takes off, counted on the
capped text with its marker) the result stays whole, the commit's notes say so, and
tool aging's stub replaces it in its turn.

Promise: no full, unlocked tool result before the newest input shows more than
``max_tool_result_chars`` characters besides its cut marker (unless, ``cache_aware``,
the commit's notes say capping would not pay), and none in the newest input more than
``newest_max_chars``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..ruleapi import ContextCommit, ContextItem, Rule, RuleContext
from ._text import cut_middle, identifier_list
from .tool_aging import is_turn

__all__ = ["ResultCap", "newest_input_start"]

#: Items before this position are settled (the newest input starts there).
_CURSOR = "result_cap.pos"
#: The note a cache-aware commit leaves when old results wait (its promise reads it).
WAITING = "waiting: capping"
_MARKER = re.compile(
    r"\n\[… [\d,]+ of [\d,]+ characters cut(?:; identifiers in the cut part: .*?)? …\]\n", re.S
)


def _marker(cut: int, length: int, ids: str = "") -> str:
    named = f"; identifiers in the cut part: {ids}" if ids else ""
    return f"\n[… {cut:,} of {length:,} characters cut{named} …]\n"


def newest_input_start(items: Sequence[ContextItem]) -> int:
    """The position after the last assistant turn: the items from there on are the
    request's newest input (all of them when there is no turn)."""
    for p in range(len(items) - 1, -1, -1):
        if is_turn(items[p]):
            return p + 1
    return 0


class ResultCap(Rule):
    """Cut oversized tool results to head + tail (60 % / 40 % by default) and name the
    identifiers of the cut part; state stays ``full``."""

    name = "result_cap"
    position_cursors = frozenset({_CURSOR})
    version = 4  # 4: a cached cut priced at what it takes off (3: cache_aware; 2: the
    # newest input cut only past newest_max_chars)
    promise = (
        "no full, unlocked tool result before the newest input shows more than "
        "max_tool_result_chars characters besides its cut marker, none in the newest input "
        "more than newest_max_chars"
    )
    params: ClassVar[Mapping[str, Any]] = {
        "max_tool_result_chars": 4000,
        "head_ratio": 0.6,
        "newest_max_chars": 100_000,
        "cut_identifier_chars": 1000,
        "cache_aware": False,
        "payback": 20,
    }

    def check(self) -> None:
        if self.max_tool_result_chars < 100:
            raise self.bad("max_tool_result_chars", "must be at least 100")
        if self.newest_max_chars < self.max_tool_result_chars:
            raise self.bad("newest_max_chars", "must be at least max_tool_result_chars")
        if not 0.0 <= self.head_ratio <= 1.0:
            raise self.bad("head_ratio", "must be between 0 and 1")
        if self.cut_identifier_chars < 0:
            raise self.bad("cut_identifier_chars", "must be >= 0")
        if self.payback < 1:
            raise self.bad("payback", "must be >= 1")

    def _limit(self, pos: int, newest: int) -> int:
        return self.newest_max_chars if pos >= newest else self.max_tool_result_chars

    def apply(self, ctx: RuleContext) -> None:
        items = ctx.items
        newest = newest_input_start(items)
        # Items before the cursor are settled; the newest input is looked at again once
        # an answer follows it (its limit drops), so the cursor stops where it starts.
        start = (
            0
            if ctx.full_pass
            else min(ctx.cursors.get(_CURSOR, 0), *ctx.new_positions(), len(items))
        )
        todo: list[tuple[int, int]] = []  # (position, limit) of the results to cap
        for pos in range(start, len(items)):
            it = items[pos]
            limit = self._limit(pos, newest)
            if it.role != "tool" or it.locked or it.state != "full" or len(it.rendered) <= limit:
                continue
            if it.reason == f"result_cap:{limit}":
                continue  # capped at this limit already
            todo.append((pos, limit))
        settled = newest
        cached = [(p, lim) for p, lim in todo if not ctx.is_new(p)]
        capped: dict[int, str] = {}
        if self.cache_aware and cached:
            # Capping a result the provider has cached rewrites the cached prompt.  The
            # ledger is told what the cut really takes off, its marker and names counted:
            # the text's share alone overstated every one of 233 such cuts on the fit set
            # (by 15 % at the median; a result just over the limit even grew), and paid
            # for rewrites on savings that were not there.
            capped = {p: self._capped(items[p].rendered, lim) for p, lim in cached}
            saved = sum(
                ctx.count(items[p].rendered) - ctx.count(text) for p, text in capped.items()
            )
            first = cached[0][0]
            why = ctx.cache.refusal(saved, payback=self.payback, at=first)
            if why:
                ctx.note(f"{WAITING} {len(cached)} old result(s) {why}")
                todo = [t for t in todo if t not in cached]
                settled = min(settled, cached[0][0])  # looked at again next commit
        for pos, limit in todo:
            text = capped.get(pos)
            if text is None:
                text = self._capped(items[pos].rendered, limit)
            ctx.replace(pos, rendered=text, reason=f"result_cap:{limit}")
        ctx.cursors[_CURSOR] = settled
        if todo:
            ctx.note(f"capped {len(todo)} tool result(s)")

    #: How many cuts a rule keeps (``_capped``).
    CUTS_KEPT = 64

    def _capped(self, text: str, limit: int) -> str:
        """``text`` cut to ``limit`` characters of head and tail, with its marker; a cut
        made before is given again: a cached result that waits for its rewrite to pay
        is priced (so cut) at every commit until it does, and naming the identifiers
        of a long cut part is most of what a cut costs.  (A function of the text, the
        limit and the parameters, which are the instance's.)"""
        cuts: dict[tuple[str, int], str] | None = self.__dict__.get("_cuts")
        if cuts is None:
            cuts = self.__dict__["_cuts"] = {}
        found = cuts.get((text, limit))
        if found is None:
            found = self._cut(text, limit)
            if len(cuts) >= self.CUTS_KEPT:
                cuts.clear()
            cuts[(text, limit)] = found
        return found

    def _cut(self, text: str, limit: int) -> str:
        head = int(limit * self.head_ratio)
        tail = limit - head
        ends = (text[:head], text[len(text) - tail :] if tail else "")
        # The names never make the result longer than it was: at most half the cut.
        budget = min(self.cut_identifier_chars, (len(text) - limit) // 2)
        ids = identifier_list(text[head : len(text) - tail], budget, ends)
        return cut_middle(text, head, tail, _marker(len(text) - limit, len(text), ids))

    def check_promise(self, commit: ContextCommit) -> list[str]:
        """Full, unlocked tool results longer than their limit outside their cut marker."""
        newest = newest_input_start(commit.items)
        waiting = self.cache_aware and any(f"result_cap: {WAITING}" in n for n in commit.notes)
        out = []
        for p, it in enumerate(commit.items):
            if it.role != "tool" or it.locked or it.state != "full":
                continue
            text = it.rendered
            limit = self._limit(p, newest)
            if len(text) <= limit:
                continue
            if waiting and p < newest:
                continue
            if not any(len(text) - len(m.group()) <= limit for m in _MARKER.finditer(text)):
                out.append(
                    f"tool result {it.source_node_id} (position {p}) is full and shows "
                    f"{len(text):,} characters > {limit:,}"
                )
        return out
