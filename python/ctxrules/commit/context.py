"""Deprecated: the rule context moved to ``ctxrules.ruleapi`` (importing this warns)."""

from __future__ import annotations

from .._deprecated import warn_module
from ..ruleapi.context import RuleContext, item_text_for_tokens

__all__ = ["RuleContext", "item_text_for_tokens"]

warn_module("ctxrules.commit.context", "ctxrules.ruleapi")
