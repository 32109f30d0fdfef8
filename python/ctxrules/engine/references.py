"""References in a user's input: ``@path`` mentions of files, read and attached.

An agent's user writes "look at @src/app.py"; the engine reads that file and hands its
text to the model with the message, as the first step of ``prepare`` does — when
``EngineConfig.references`` is on (it is off by default: a library serving users it
does not know must not read its own files for them).  Only files inside the working
directory or a directory the user added are read (a path that leaves them, through
``..`` or a symbolic link, is not a reference), never a hidden file or one inside a
hidden directory (``.env``, ``.ssh/``, ``.git/config``) nor anything in a version
control system's own directory (``CVS``, ``_darcs``, …), each at most ``max_chars``
characters; what was read is recorded on the user's node (metadata
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

__all__ = ["VCS_DIRECTORIES", "Reference", "find_references", "reference_block"]

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


#: Directories of version control systems whose names do not start with a dot (the
#: others — .git, .hg, .svn, .bzr, .jj, .pijul — are hidden names, refused as such).
VCS_DIRECTORIES = frozenset({"CVS", "_darcs", "RCS", "SCCS", "_MTN"})


def _root_of(path: Path, roots: Sequence[Path]) -> Path | None:
    return next((r for r in roots if path == r or r in path.parents), None)


def _private(path: Path, root: Path) -> bool:
    """Whether ``path`` (below ``root``) is hidden or inside a hidden or version-control
    directory: a name starting with a dot, or one of ``VCS_DIRECTORIES``."""
    return any(
        part.startswith(".") or part in VCS_DIRECTORIES for part in path.relative_to(root).parts
    )


def find_references(
    text: str, *, working_directory: str, added_directories: Sequence[str] = (), max_chars: int
) -> list[Reference]:
    """The files ``text`` mentions as ``@path`` that exist inside the working directory or
    an added directory, read (UTF-8, undecodable bytes replaced), each once, in the order
    of their first mention; anything else that looks like a mention — and any hidden or
    version-control file, as mentioned or as a symbolic link resolves — is left alone."""
    dirs = (working_directory, *added_directories)
    roots = [Path(os.path.realpath(d)) for d in dirs]
    named_roots = [Path(os.path.abspath(d)) for d in dirs]
    found: list[Reference] = []
    seen: set[Path] = set()
    for m in _MENTION.finditer(text):
        mention = m.group(1).rstrip(".")
        candidate = Path(os.path.expanduser(mention))
        if not candidate.is_absolute():
            candidate = Path(working_directory) / candidate
        # Private as resolved (a link to .git/config) or as named (.git/x linking out).
        real, named = Path(os.path.realpath(candidate)), Path(os.path.abspath(candidate))
        root, named_root = _root_of(real, roots), _root_of(named, named_roots)
        if real in seen or root is None or _private(real, root) or not real.is_file():
            continue
        if named_root is not None and _private(named, named_root):
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
