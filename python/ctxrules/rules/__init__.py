"""Rules: the steps of the commit pipeline (docs/rules.md says how to write one).

Each rule is a ``Rule`` subclass registered through the ``register_rules`` hook; the
built-ins are registered by ``ctxrules.rules._plugin`` the same way a third-party
package would.  Which rules run, in which order and with which parameters comes from
``ctxrules.config``.
"""

from __future__ import annotations

from ..ruleapi import Rule
from .idle_clearing import CLEARED_PLACEHOLDER, IdleClearing
from .result_cap import ResultCap
from .summarize import Summarize
from .tool_aging import DEFAULT_PROTECTED_TOOLS, ToolAging

__all__ = [
    "BUILTIN_RULES",
    "CLEARED_PLACEHOLDER",
    "DEFAULT_PROTECTED_TOOLS",
    "IdleClearing",
    "ResultCap",
    "Rule",
    "Summarize",
    "ToolAging",
]

BUILTIN_RULES: tuple[type[Rule], ...] = (ResultCap, ToolAging, IdleClearing, Summarize)
