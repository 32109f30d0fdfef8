"""The rule author's API: everything a rule touches, importable without the commit
machinery (docs/rules.md is the guide).

- ``Rule``: the base class of every rule (parameters, cursors, promise);
- ``RuleContext``: the working item list a rule changes, through ``replace`` / ``fold``;
- ``ContextItem`` / ``ContextCommit``: the items a rule reads and the commits its promise
  is checked on;
- ``SummaryRequest`` / ``SummaryResult``: what a rule that needs a summary asks and gets;
- ``Delta``: a commit's change against its parent, as the context records it;
- ``CacheLedger``: whether changing what the provider has cached pays
  (``RuleContext.cache``; ``ctxrules.ruleapi.cache``).

The commit layer (``ctxrules.commit``) builds a ``RuleContext`` and runs rules through
it; nothing here imports that layer.
"""

from __future__ import annotations

from ..model import ContextCommit, ContextItem
from ..summarizers.request import SummaryRequest, SummaryResult
from .cache import CacheLedger
from .context import RuleContext, item_text_for_tokens
from .delta import Delta, folded_item
from .reasons import COMPACTION_REASON, FULL_COMPACTION_REASON
from .rule import Rule

__all__ = [
    "COMPACTION_REASON",
    "FULL_COMPACTION_REASON",
    "CacheLedger",
    "ContextCommit",
    "ContextItem",
    "Delta",
    "Rule",
    "RuleContext",
    "SummaryRequest",
    "SummaryResult",
    "folded_item",
    "item_text_for_tokens",
]
