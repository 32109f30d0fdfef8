"""Reason prefixes that more than one layer reads: the commit layer writes them when a
compaction folds items, and the built-in rules recognise them.

An item's ``reason`` says why its state last changed; most reasons are a rule's own
business, these are shared.
"""

from __future__ import annotations

__all__ = ["COMPACTION_REASON", "FULL_COMPACTION_REASON"]

#: How the fold reason of a compaction starts (``ctxrules.commit.boundary`` makes them):
#: a compaction is an event the user or the engine asked for, not a rule's doing, so
#: its folds are outside the summarize rule's promise about the kept tail.
COMPACTION_REASON = "compaction:"
#: How the fold reason of a full compaction starts: the one fold allowed to merge
#: earlier summaries.
FULL_COMPACTION_REASON = COMPACTION_REASON + "full:"
