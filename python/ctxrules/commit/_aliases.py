"""The two commit makers ``make_commit`` replaced, kept for one release (deprecated:
``ctxrules.commit.__getattr__`` warns when they are used)."""

from __future__ import annotations

from typing import Any

from ..model import ContextCommit
from .generate import make_commit

__all__ = ["ensure_latest_commit", "generate_commit"]


def ensure_latest_commit(*args: Any, **kwargs: Any) -> ContextCommit:
    """``make_commit(...)``: the current commit at the head, or a new one."""
    return make_commit(*args, **kwargs)


def generate_commit(*args: Any, **kwargs: Any) -> ContextCommit:
    """``make_commit(..., rerun=True)``: the rules run again at ``now``."""
    return make_commit(*args, rerun=True, **kwargs)
