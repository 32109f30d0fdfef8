"""Deprecated: the delta format moved to ``ctxrules.ruleapi.delta`` (importing this warns)."""

from __future__ import annotations

from .._deprecated import warn_module
from ..ruleapi.delta import Delta, decode, encode, folded_item, replay

__all__ = ["Delta", "decode", "encode", "folded_item", "replay"]

warn_module("ctxrules.commit.delta", "ctxrules.ruleapi.delta")
