"""Idle clearing: an ``aged`` tool result unchanged for ``idle_minutes`` becomes ``cleared``.

Every cleared result shows the same fixed placeholder, so once cleared the item never
changes again and the prompt-cache prefix over it stays stable.  Time is the
commit's injectable ``now``, so results are reproducible.

Results are cleared in position order, up to the bound tool aging publishes
(``aged_until``: no item before it will newly be aged).  Aged items mostly appear in
position order at non-decreasing times (the aging boundary moves forward), so the rule
keeps a position cursor ``idle_clearing.pos`` and stops at the first aged result that
is still too recent: each commit reads only what it clears, however many results were
aged within the last ``idle_minutes``.  A result aged out of that order (a late result
of an old turn, an attach block's) waits for the ones before it; a new item inserted
before the cursor moves the cursor back to it.

With ``cache_aware`` the idle results are cleared only when that pays for rewriting
the cached prompt (the commit's cache ledger, ``ctxrules.ruleapi.cache``: the cache
went cold, another rule already rewrote it in this commit, or what clearing saves over
the next ``payback`` requests exceeds the rewrite); until then they wait, and the
commit's notes say so.  A stub is short, so in practice they are cleared when the
session pauses past the cache's lifetime or together with other edits.

Promise: before the aging bound, every aged tool result that is unlocked and unchanged
for ``idle_minutes`` (by the commit's ``now``) is cleared, unless an aged result before
it is not idle yet or (``cache_aware``) the commit's notes say clearing would not pay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..ruleapi import ContextCommit, Rule, RuleContext

__all__ = ["CLEARED_PLACEHOLDER", "IdleClearing"]

CLEARED_PLACEHOLDER = "[Old tool result content cleared]"
#: The note a cache-aware commit leaves when idle results wait (its promise reads it).
WAITING = "waiting: clearing"


class IdleClearing(Rule):
    """Replace long-idle aged tool results by one fixed placeholder."""

    name = "idle_clearing"
    version = 3  # 3: cache_aware
    position_cursors = frozenset({"idle_clearing.pos"})
    promise = (
        "before the aging bound, every aged, unlocked tool result unchanged for "
        "idle_minutes (by the commit's now) is cleared, unless an aged result before it "
        "is not idle yet or (cache_aware) the commit's notes say clearing would not pay"
    )
    params: ClassVar[Mapping[str, Any]] = {
        "idle_minutes": 60.0,
        "placeholder": CLEARED_PLACEHOLDER,
        "cache_aware": False,
        "payback": 20,
    }

    def check(self) -> None:
        if self.idle_minutes < 0:
            raise self.bad("idle_minutes", "must be >= 0")
        if not self.placeholder:
            raise self.bad("placeholder", "must not be empty")
        if self.payback < 1:
            raise self.bad("payback", "must be >= 1")

    def apply(self, ctx: RuleContext) -> None:
        items = ctx.items
        cutoff = ctx.now - self.idle_minutes * 60.0
        # Without a rule that publishes ``aged_until`` a full tool item might still be
        # aged later, so the cursor may not pass it.
        frontier = ctx.cursors.get("aged_until")
        limit = len(items) if frontier is None else min(frontier, len(items))
        pos = ctx.cursors.get("idle_clearing.pos", 0)
        new = ctx.new_positions()
        if new and new[0] < pos:
            pos = new[0]  # a late result inserted before the cursor: not settled yet
        keep_cursor = pos
        blocked = False
        idle: list[int] = []
        for p in range(pos, limit):
            it = items[p]
            if it.state == "aged" and it.role == "tool":
                if it.changed_at > cutoff:
                    break
                if not it.locked:
                    idle.append(p)
            elif frontier is None and it.role == "tool" and it.state == "full":
                blocked = True
            if not blocked:
                keep_cursor = p + 1
        if idle and self.cache_aware:
            shown = ctx.count(self.placeholder)
            saved = sum(max(0, ctx.tokens(p) - shown) for p in idle)
            why = ctx.cache.refusal(saved, payback=self.payback, at=idle[0])
            if why:
                ctx.note(f"{WAITING} {len(idle)} idle result(s) {why}")
                ctx.cursors["idle_clearing.pos"] = pos  # looked at again next commit
                return
        reason = f"idle_{self.idle_minutes:g}min"
        for p in idle:
            ctx.replace(p, state="cleared", rendered=self.placeholder, reason=reason)
        ctx.cursors["idle_clearing.pos"] = keep_cursor
        if idle:
            ctx.note(f"cleared {len(idle)} aged result(s) idle for {self.idle_minutes:g} min")

    def check_promise(self, commit: ContextCommit) -> list[str]:
        """Idle, unlocked aged tool results before the aging bound that are not cleared
        though every aged result before them is idle too."""
        if self.cache_aware and any(f"idle_clearing: {WAITING}" in n for n in commit.notes):
            return []
        cutoff = commit.created_at - self.idle_minutes * 60.0
        bound = commit.cursors.get("aged_until", len(commit.items))
        broken = []
        for p, it in enumerate(commit.items[:bound]):
            if it.role != "tool" or it.state != "aged":
                continue
            if it.changed_at > cutoff:
                break  # not idle yet: the results after it wait for it
            if not it.locked:
                broken.append(
                    f"tool result {it.source_node_id} (position {p}) is aged and idle since "
                    f"{it.changed_at:g} (cutoff {cutoff:g}), and so is every aged result "
                    f"before it, but it is not cleared"
                )
        return broken
