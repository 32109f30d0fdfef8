"""Per-result cap: a tool result longer than ``max_tool_result_chars`` keeps its head and
tail, with a marker saying how much was cut — in the tail window too, so one huge
result cannot blow a single turn (seed §五)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ._text import cut_middle
from .base import Rule

if TYPE_CHECKING:
    from ..commit.context import RuleContext

__all__ = ["ResultCap"]


class ResultCap(Rule):
    """Cut oversized tool results to head + tail (60 % / 40 % by default); state stays ``full``."""

    name = "result_cap"
    params: ClassVar[Mapping[str, Any]] = {"max_tool_result_chars": 4000, "head_ratio": 0.6}

    def check(self) -> None:
        if self.max_tool_result_chars < 100:
            raise self.bad("max_tool_result_chars", "must be at least 100")
        if not 0.0 <= self.head_ratio <= 1.0:
            raise self.bad("head_ratio", "must be between 0 and 1")

    def apply(self, ctx: RuleContext) -> None:
        limit = self.max_tool_result_chars
        head = int(limit * self.head_ratio)
        tail = limit - head
        capped = 0
        for pos in ctx.scan_positions():
            it = ctx.items[pos]
            if it.role != "tool" or it.locked or it.state != "full" or len(it.rendered) <= limit:
                continue
            cut = len(it.rendered) - limit
            marker = f"\n[… {cut:,} of {len(it.rendered):,} characters cut …]\n"
            ctx.replace(
                pos,
                rendered=cut_middle(it.rendered, head, tail, marker),
                reason=f"result_cap:{limit}",
            )
            capped += 1
        if capped:
            ctx.note(f"capped {capped} tool result(s) at {limit:,} characters")
