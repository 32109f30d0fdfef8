"""Text helpers shared by the rules: one-line flattening and head/tail cuts."""

from __future__ import annotations

import re

__all__ = ["cut_end", "cut_middle", "one_line"]

_SPACE = re.compile(r"\s+")


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space."""
    return _SPACE.sub(" ", text).strip()


def cut_end(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``…`` when cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…"


def cut_middle(text: str, head: int, tail: int, marker: str = "…") -> str:
    """Keep the first ``head`` and last ``tail`` characters of ``text`` with ``marker``
    between; ``text`` itself when it is not longer than ``head + tail``."""
    if len(text) <= head + tail:
        return text
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")
