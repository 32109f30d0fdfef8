"""References in a user's input: ``@path`` mentions of files, read and attached.

An agent's user writes "look at @src/app.py"; the engine reads that file and hands its
text to the model with the message, as the first step of ``prepare`` does.  Only files
inside the working directory or a directory the user added are read (a path that
leaves them, through ``..`` or a symbolic link, is not a reference), each at most
``max_chars`` characters; what was read is recorded on the user's node (metadata
``references``), so the history says exactly what the model was given.  File text is
untrusted: it travels as a text block of the user's own message and cannot change a
role, a tool pairing or a cache marker.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import msgspec

__all__ = ["Reference", "find_references", "reference_block"]

# "@path": a path of word characters, dots, dashes and slashes, not preceded by a word
# character (an e-mail address is not a reference) and not ending in punctuation.
_MENTION = re.compile(r"(?<![\w@])@((?:\.{1,2}/|~/|/)?[\w.\-]+(?:/[\w.\-]+)*)")


class Reference(msgspec.Struct, frozen=True, kw_only=True):
    """A file an input mentioned: its path as mentioned, where it is, what was read."""

    mention: str
    path: str
    text: str
    chars: int
    truncated: bool = False


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def find_references(
    text: str, *, working_directory: str, added_directories: Sequence[str] = (), max_chars: int
) -> list[Reference]:
    """The files ``text`` mentions as ``@path`` that exist inside the working directory or
    an added directory, read (UTF-8, undecodable bytes replaced), each once, in the order
    of their first mention; anything else that looks like a mention is left alone."""
    roots = [Path(os.path.realpath(d)) for d in (working_directory, *added_directories)]
    found: list[Reference] = []
    seen: set[Path] = set()
    for m in _MENTION.finditer(text):
        mention = m.group(1).rstrip(".")
        candidate = Path(os.path.expanduser(mention))
        if not candidate.is_absolute():
            candidate = Path(working_directory) / candidate
        real = Path(os.path.realpath(candidate))
        if real in seen or not _inside(real, roots) or not real.is_file():
            continue
        seen.add(real)
        try:
            with open(real, "rb") as fh:
                raw = fh.read(max_chars * 4 + 4)
        except OSError:
            continue
        body = raw.decode("utf-8", "replace")
        truncated = len(body) > max_chars or real.stat().st_size > len(raw)
        body = body[:max_chars]
        found.append(
            Reference(
                mention=mention, path=str(real), text=body, chars=len(body), truncated=truncated
            )
        )
    return found


def reference_block(ref: Reference) -> str:
    """The text a reference adds to the user's message."""
    note = f" (first {ref.chars} characters)" if ref.truncated else ""
    return f'<file path="{ref.mention}"{note}>\n{ref.text}\n</file>'
