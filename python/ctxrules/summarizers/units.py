"""Units: the runs of items that are folded, kept or dropped together.

A unit is what one API round left in the context: an assistant turn with the tool
results that answer it, an attach block (items sharing ``attached_from``), or a single
user, system or summary item.  Splitting a unit would leave a tool result without the
call it answers (or the reverse), which providers refuse; so the summarize rule folds
whole units and ``run_summarizer`` drops or chunks whole units.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import ContextItem

__all__ = ["unit_end", "units"]


def unit_end(items: Sequence[ContextItem], p: int) -> int:
    """The position just after the unit that starts at ``items[p]``."""
    it = items[p]
    end = p + 1
    if it.attached_from is not None:
        while end < len(items) and items[end].attached_from == it.attached_from:
            end += 1
    elif it.role == "assistant" and it.state != "summary":
        while (
            end < len(items)
            and items[end].role == "tool"
            and items[end].caller == it.source_node_id
        ):
            end += 1
    return end


def units(items: Sequence[ContextItem]) -> list[tuple[ContextItem, ...]]:
    """``items`` cut into whole units, in order (see the module docstring)."""
    out: list[tuple[ContextItem, ...]] = []
    p = 0
    while p < len(items):
        end = unit_end(items, p)
        out.append(tuple(items[p:end]))
        p = end
    return out
