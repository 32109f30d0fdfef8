"""Text helpers shared by the rules: one-line flattening, head/tail cuts and the list of
identifiers a shortened text keeps."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..summarizers.facts import exact_identifiers, occurs

__all__ = ["cut_end", "cut_middle", "identifier_list", "one_line"]

_SPACE = re.compile(r"\s+")
#: A run of word characters: what ``occurs`` takes for a letter, digit or underscore.
_WORD = re.compile(r"\w+")


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


#: Which identifiers a shortened text names first: the most specific kinds; bare
#: numbers and dates (line numbers, timestamps) only when room is left.
_KIND_ORDER = {"number": 2, "date": 1}


def identifier_list(
    text: str,
    budget: int,
    shown: Sequence[str] = (),
    found: Sequence[tuple[str, str]] | None = None,
) -> str:
    """The exact identifiers of ``text`` that none of ``shown`` holds, joined by
    ``", "`` within ``budget`` characters: paths, symbols, ids and the like first, then
    dates, then numbers, each kind in first-seen order (those that do not fit are left
    out).  ``found``: ``exact_identifiers(text)`` when the caller has it already (from a
    batch)."""
    words: list[frozenset[str] | None] = [None] * len(shown)

    def in_shown(token: str) -> bool:
        if not _WORD.fullmatch(token):
            return any(occurs(token, s) >= 0 for s in shown)
        # A token of word characters only occurs as a whole token exactly where it is
        # one of the text's maximal runs of word characters (``occurs``' boundaries are
        # ``\w``'s): a set lookup, where ``occurs`` searched the whole text for each.
        for k, s in enumerate(shown):
            runs = words[k]
            if runs is None:
                runs = words[k] = frozenset(_WORD.findall(s))
            if token in runs:
                return True
        return False

    found = [
        (kind, token)
        for kind, token in (exact_identifiers(text) if found is None else found)
        if "\n" not in token and not in_shown(token)
    ]
    found.sort(key=lambda kt: _KIND_ORDER.get(kt[0], 0))  # stable: first seen first
    out: list[str] = []
    size = 0
    for _, token in found:
        extra = len(token) + (2 if out else 0)
        if size + extra <= budget:
            out.append(token)
            size += extra
    return ", ".join(out)
