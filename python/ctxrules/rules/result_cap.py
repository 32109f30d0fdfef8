"""Per-result cap: a tool result longer than ``max_tool_result_chars`` keeps its head and
tail, with a marker saying how much was cut — in the tail window too, so one huge
result cannot blow a single turn.

Promise: no full, unlocked tool result shows more than ``max_tool_result_chars``
characters besides its cut marker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from ..ruleapi import ContextCommit, Rule, RuleContext
from ._text import cut_middle

__all__ = ["ResultCap"]

_MARKER = re.compile(r"\n\[… [\d,]+ of [\d,]+ characters cut …\]\n")


def _marker(cut: int, length: int) -> str:
    return f"\n[… {cut:,} of {length:,} characters cut …]\n"


class ResultCap(Rule):
    """Cut oversized tool results to head + tail (60 % / 40 % by default); state stays ``full``."""

    name = "result_cap"
    promise = (
        "no full, unlocked tool result shows more than max_tool_result_chars characters "
        "besides its cut marker"
    )
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
            marker = _marker(cut, len(it.rendered))
            ctx.replace(
                pos,
                rendered=cut_middle(it.rendered, head, tail, marker),
                reason=f"result_cap:{limit}",
            )
            capped += 1
        if capped:
            ctx.note(f"capped {capped} tool result(s) at {limit:,} characters")

    def check_promise(self, commit: ContextCommit) -> list[str]:
        """Full, unlocked tool results longer than the cap outside their cut marker."""
        limit = self.max_tool_result_chars
        out = []
        for p, it in enumerate(commit.items):
            text = it.rendered
            if it.role != "tool" or it.locked or it.state != "full" or len(text) <= limit:
                continue
            if not any(len(text) - len(m.group()) <= limit for m in _MARKER.finditer(text)):
                out.append(
                    f"tool result {it.source_node_id} (position {p}) is full and shows "
                    f"{len(text):,} characters > {limit:,}"
                )
        return out
