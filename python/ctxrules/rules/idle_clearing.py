"""Idle clearing: an ``aged`` tool result unchanged for ``idle_minutes`` becomes ``cleared``.

Every cleared result shows the same fixed placeholder, so once cleared the item never
changes again and the prompt-cache prefix over it stays stable.  Time is the
commit's injectable ``now``, so results are reproducible.

Aged items appear in position order at non-decreasing times (tool aging moves its
boundary forward), so the rule keeps a cursor ``idle_clearing.pos`` and stops at the
first aged item that is still too recent: each commit reads only what it clears.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from .base import Rule

if TYPE_CHECKING:
    from ..commit.context import RuleContext

__all__ = ["CLEARED_PLACEHOLDER", "IdleClearing"]

CLEARED_PLACEHOLDER = "[Old tool result content cleared]"


class IdleClearing(Rule):
    """Replace long-idle aged tool results by one fixed placeholder."""

    name = "idle_clearing"
    params: ClassVar[Mapping[str, Any]] = {"idle_minutes": 60.0, "placeholder": CLEARED_PLACEHOLDER}

    def check(self) -> None:
        if self.idle_minutes < 0:
            raise self.bad("idle_minutes", "must be >= 0")
        if not self.placeholder:
            raise self.bad("placeholder", "must not be empty")

    def apply(self, ctx: RuleContext) -> None:
        items = ctx.items
        cutoff = ctx.now - self.idle_minutes * 60.0
        # Without a rule that publishes ``aged_until`` a full tool item might still be
        # aged later, so the cursor may not pass it.
        frontier = ctx.cursors.get("aged_until")
        limit = len(items) if frontier is None else min(frontier, len(items))
        pos = ctx.cursors.get("idle_clearing.pos", 0)
        keep_cursor = pos
        blocked = False
        cleared = 0
        reason = f"idle_{self.idle_minutes:g}min"
        for p in range(pos, limit):
            it = items[p]
            if it.state == "aged" and it.role == "tool":
                if it.changed_at > cutoff:
                    break
                if not it.locked:
                    ctx.replace(p, state="cleared", rendered=self.placeholder, reason=reason)
                    cleared += 1
            elif frontier is None and it.role == "tool" and it.state == "full":
                blocked = True
            if not blocked:
                keep_cursor = p + 1
        ctx.cursors["idle_clearing.pos"] = keep_cursor
        if cleared:
            ctx.note(f"cleared {cleared} aged result(s) idle for {self.idle_minutes:g} min")
