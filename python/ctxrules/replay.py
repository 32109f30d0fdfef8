"""Deprecated name of ``ctxrules.requests`` (the requests of a stored session), kept for
one release: importing it warns."""

from __future__ import annotations

from ._deprecated import warn_module
from .requests import *  # noqa: F403
from .requests import __all__  # noqa: F401

warn_module("ctxrules.replay", "ctxrules.requests")
