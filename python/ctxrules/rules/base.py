"""Deprecated: the ``Rule`` base class moved to ``ctxrules.ruleapi`` (importing this warns)."""

from __future__ import annotations

from .._deprecated import warn_module
from ..ruleapi.rule import Rule

__all__ = ["Rule"]

warn_module("ctxrules.rules.base", "ctxrules.ruleapi")
