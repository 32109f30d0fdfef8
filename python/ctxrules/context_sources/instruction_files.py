"""The ``instruction_files`` context source: AGENTS.md / CLAUDE.md style workspace files.

Which files, in which order (``instruction_paths``):

- For the working directory and then each added directory, in the request's order: the
  directories from the top of the search down to that directory, and in each one the
  configured ``instruction_file_names`` in their configured order.
- The search goes upward from the directory to the root of the git repository holding
  it (the nearest directory with a ``.git`` entry, itself included) and stops there:
  files above a repository belong to other projects.  A directory in no repository is
  searched up to the filesystem root, which is where per-user files such as
  ``~/AGENTS.md`` are found.
- Outermost first, so the most specific file comes last, nearest the conversation.
  A file reached twice (through two directories, a symlink or a case-insensitive file
  system) is shown once, where it was first reached.

Files that cannot be read (permissions, not a regular file, not UTF-8) and empty ones
are skipped.  Together the contents shown are at most ``instruction_max_chars``
characters: the file that crosses the limit is cut with a note saying where to read
the rest, and the files after it are named but not shown.  ``None`` when no file is
found or ``config.instruction_files`` is off.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from .base import SourceRequest

__all__ = ["InstructionFilesSource", "instruction_paths", "instruction_text"]

INTRO = (
    "Instructions from the workspace's instruction files ({names}), outermost "
    "directory first; where they disagree, the later (more specific) file wins."
)


def _search_dirs(directory: str) -> list[Path]:
    """``directory`` and its parents up to the repository root (or the filesystem root),
    outermost first."""
    start = Path(os.path.normpath(directory))
    chain: list[Path] = []
    for folder in (start, *start.parents):
        chain.append(folder)
        try:
            if (folder / ".git").exists():
                break
        except OSError:  # an unreadable parent ends the search like a repository root
            break
    chain.reverse()
    return chain


def instruction_paths(directories: Sequence[str], names: Sequence[str]) -> list[Path]:
    """The instruction files found for ``directories`` (working directory first), in the
    order they are shown (see the module docstring)."""
    seen: set[tuple[int, int]] = set()
    out: list[Path] = []
    for directory in directories:
        for folder in _search_dirs(directory):
            for name in names:
                path = folder / name
                try:
                    st = path.stat()
                except OSError:
                    continue
                key = (st.st_dev, st.st_ino)
                if not stat.S_ISREG(st.st_mode) or key in seen:
                    continue
                seen.add(key)
                out.append(path)
    return out


def _read(path: Path, limit: int) -> tuple[str, bool] | None:
    """Up to ``limit`` characters of a UTF-8 file and whether there was more; ``None`` if
    it cannot be read as text."""
    try:
        with path.open("rb") as f:
            data = f.read(limit * 4 + 4)  # a character is at most 4 bytes of UTF-8
            more_bytes = bool(f.read(1))
    except OSError:
        return None
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not more_bytes)
    except UnicodeDecodeError:
        return None
    return text[:limit], more_bytes or len(text) > limit


def instruction_text(paths: Iterable[Path], *, names: Sequence[str], max_chars: int) -> str | None:
    """The source's text for the files ``paths`` (at most ``max_chars`` of their content)."""
    parts: list[str] = []
    left_out: list[str] = []
    budget = max_chars
    for path in paths:
        if budget <= 0:
            if _read(path, 1):  # named only if it would have been shown
                left_out.append(str(path))
            continue
        read = _read(path, budget)
        if read is None or not read[0].strip():
            continue
        text, cut = read
        budget -= len(text)
        if cut:
            text += (
                f"\n[… cut here: the instruction files are limited to {max_chars:,} "
                f"characters; read {path} for the rest]"
            )
            budget = 0
        parts.append(f"# {path}\n\n{text.rstrip()}")
    if not parts:
        return None
    if left_out:
        parts.append(
            f"[Not shown, over the {max_chars:,}-character limit: {', '.join(left_out)}; "
            "read them if they matter]"
        )
    return "\n\n".join([INTRO.format(names=", ".join(names)), *parts])


class InstructionFilesSource:
    """The workspace instruction files of the working and added directories."""

    name = "instruction_files"

    def collect(self, request: SourceRequest) -> str | None:
        """The files' text, or ``None`` when off or when there are none."""
        cfg = request.config
        if not cfg.instruction_files:
            return None
        paths = instruction_paths(
            (request.working_directory, *request.added_directories), cfg.instruction_file_names
        )
        return instruction_text(
            paths, names=cfg.instruction_file_names, max_chars=cfg.instruction_max_chars
        )
