"""A transcript's own compactions, mapped onto ctxrules' boundary record.

Claude Code writes a compaction as a ``system`` line with ``subtype`` ``compact_boundary``
(``compactMetadata``: ``trigger`` auto / manual, ``preTokens``, in newer versions
``postTokens``), ``parentUuid`` null and the last line before it in
``logicalParentUuid``; the next line is the summary it sent the model, a user message
marked ``isCompactSummary``.  The importer makes the boundary line a boundary node
(``ctxrules.commit.boundary``) continuing from ``logicalParentUuid``, with this
module's record, and puts the summary message's text into that record instead of
making a node of it: the commit after the boundary then folds the earlier items into
the text Claude Code recorded, and no summarizer is asked.

The record: ``trigger`` from ``compactMetadata.trigger`` (``imported`` when it is none
of ours), ``tokens_before`` / ``tokens_after`` from ``preTokens`` / ``postTokens``
(``measured``: ``recorded``), ``previous`` the node before it, no protected open turn
(Claude Code summarised everything), ``source`` the importer and the metadata as
written.
"""

from __future__ import annotations

from typing import Any

from ..commit.boundary import COMPACTION_KEY, TRIGGERS, Compaction
from ..model import content_text
from ._common import to_blocks

__all__ = ["COMPACTION_KEY", "boundary_record", "summary_text"]


def _tokens(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def boundary_record(
    entry: dict[str, Any], *, importer: str, previous: str | None
) -> dict[str, Any] | None:
    """The boundary record (as node metadata) of a ``compact_boundary`` line, or ``None``
    for any other line."""
    if entry.get("type") != "system" or entry.get("subtype") != "compact_boundary":
        return None
    raw = entry.get("compactMetadata")
    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    trigger = meta.get("trigger")
    before, after = _tokens(meta.get("preTokens")), _tokens(meta.get("postTokens"))
    record = Compaction(
        trigger=trigger if trigger in TRIGGERS else "imported",
        tokens_before=before,
        tokens_after=after,
        measured="recorded" if before is not None or after is not None else "",
        previous=previous,
        keep_open_turn=False,
        source={"importer": importer, "compactMetadata": meta},
    )
    return record.to_metadata()


def summary_text(content: Any) -> str:
    """The text of a summary message's ``content`` (a string or content blocks)."""
    if isinstance(content, str):
        return content
    return content_text(to_blocks(content, {})) if isinstance(content, list) else ""
