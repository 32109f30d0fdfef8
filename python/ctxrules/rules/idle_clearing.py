"""Idle clearing: an ``aged`` tool result unchanged for ``idle_minutes`` becomes ``cleared``.

Every cleared result shows the same fixed placeholder, so once cleared the item never
changes again and the prompt-cache prefix over it stays stable.  Time is the
commit's injectable ``now``, so results are reproducible.

Incremental: the position cursor ``idle_clearing.pos`` marks where the items that are
not settled yet begin (before it, every aged result is cleared or locked, and nothing
will newly be aged: tool aging publishes that bound as ``aged_until``).  Each commit
scans from the cursor to the end, so it reads the results aged within the last
``idle_minutes`` and the tail, not the history.  An aged result after the bound (an
attach block brings its source's aged results) is cleared too once idle, though the
cursor waits for the bound.

Promise: every aged, unlocked tool result whose last change is ``idle_minutes`` or more
before the commit's ``now`` is cleared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from .base import Rule

if TYPE_CHECKING:
    from ..commit.context import RuleContext
    from ..model import ContextCommit

__all__ = ["CLEARED_PLACEHOLDER", "IdleClearing"]

CLEARED_PLACEHOLDER = "[Old tool result content cleared]"


class IdleClearing(Rule):
    """Replace long-idle aged tool results by one fixed placeholder."""

    name = "idle_clearing"
    version = 2
    position_cursors = frozenset({"idle_clearing.pos"})
    promise = (
        "every aged, unlocked tool result unchanged for idle_minutes (by the commit's "
        "now) is cleared"
    )
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
        new = ctx.new_positions()
        if new and new[0] < pos:
            pos = new[0]  # a late result inserted before the cursor: not settled yet
        cursor = pos
        settled = True
        cleared = 0
        reason = f"idle_{self.idle_minutes:g}min"
        for p in range(pos, len(items)):
            it = items[p]
            if p >= limit:
                settled = False  # items after the bound may still be aged
            if it.role == "tool" and it.state == "aged" and not it.locked:
                if it.changed_at <= cutoff:
                    ctx.replace(p, state="cleared", rendered=self.placeholder, reason=reason)
                    cleared += 1
                else:
                    settled = False  # not idle yet: look at it again next time
            elif frontier is None and it.role == "tool" and it.state == "full":
                settled = False
            if settled:
                cursor = p + 1
        ctx.cursors["idle_clearing.pos"] = cursor
        if cleared:
            ctx.note(f"cleared {cleared} aged result(s) idle for {self.idle_minutes:g} min")

    def check_promise(self, commit: ContextCommit) -> list[str]:
        """Aged, unlocked tool results idle for ``idle_minutes`` that are still aged."""
        cutoff = commit.created_at - self.idle_minutes * 60.0
        return [
            f"tool result {it.source_node_id} (position {p}) is aged and idle since "
            f"{it.changed_at:g} (cutoff {cutoff:g}) but not cleared"
            for p, it in enumerate(commit.items)
            if it.role == "tool"
            and it.state == "aged"
            and not it.locked
            and it.changed_at <= cutoff
        ]
