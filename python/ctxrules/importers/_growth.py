"""Transcripts that grow: what an import of a JSON Lines file stored, and resuming it.

A live agent appends lines to its transcript.  The import of such a file records, in
the session metadata under ``import_state``, how far it read each file and a hash of
those bytes::

    {"files": {PATH: {"bytes": N, "sha256": HEX}},   # what the session holds so far
     "steps": [[[PATH, N], ...], ...],                 # how far each import read, in order
     "head": NODE}                                     # HEAD the transcript gave then

A later import of the grown file checks that each file still starts with the bytes
it read (else the file was rewritten, not appended to: an error), replays the steps
so the parser is where the earlier imports left it, and stores only what is new.
The store stays append-only: new nodes are appended, nothing stored is changed.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from ..store import SessionInfo
from ._common import fail
from ._json import JsonlFile

__all__ = [
    "STATE_KEY",
    "Sessions",
    "Step",
    "check_unchanged",
    "last_ends",
    "new_state",
    "steps_of",
]

#: The session metadata key holding the import state.
STATE_KEY = "import_state"


class Sessions(Protocol):
    """What a parse may ask of the store it imports into (a ``Store`` is one)."""

    def find_session(self, import_key: str) -> SessionInfo | None:
        """The session created with ``import_key``, if any."""

    def get_session(self, session_id: str) -> SessionInfo:
        """The session row; ``NotFoundError`` if unknown."""


#: One import's reading: ``(file, byte offset it read to)`` in the order it read them.
Step = list[tuple[str, int]]


class _File(msgspec.Struct):
    bytes: int
    sha256: str


class _State(msgspec.Struct):
    files: dict[str, _File]
    steps: list[list[tuple[str, int]]]
    head: str | None = None


def _state(raw: Any, where: str) -> _State:
    try:
        return msgspec.convert(raw, _State)
    except msgspec.ValidationError as exc:
        raise fail(
            where,
            None,
            f"the stored session's {STATE_KEY} metadata is not one ctxrules wrote ({exc})",
            "import the file into a new store",
        ) from None


def steps_of(raw: Any, where: str) -> list[Step]:
    """The steps of a stored import state (``ImportFormatError`` if it is malformed)."""
    return [list(step) for step in _state(raw, where).steps]


def check_unchanged(raw: Any, readers: dict[str, JsonlFile], where: str) -> None:
    """Refuse a file that is not the one an earlier import read, grown at most: gone,
    shorter, or different in the bytes that import read."""
    for path, seen in _state(raw, where).files.items():
        reader = readers.get(path)
        if reader is None:
            why = "is gone"
        elif reader.size < seen.bytes:
            why = f"is shorter than the {seen.bytes:,} bytes imported before"
        elif reader.digest(0, seen.bytes) != seen.sha256:
            why = f"changed within the {seen.bytes:,} bytes imported before"
        else:
            continue
        raise fail(
            path,
            None,
            f"the transcript {why}: it was rewritten, not appended to, so its new "
            "lines cannot continue the stored session",
            "import it into a new store, or under another path as a new session",
        )


def new_state(
    raw: Any, step: Step, readers: dict[str, JsonlFile], head: str | None, where: str
) -> dict[str, Any]:
    """The import state after reading ``step`` (on top of the stored ``raw``, if any)."""
    steps = steps_of(raw, where) if raw is not None else []
    if raw is None or any(end > dict(last_ends(steps)).get(p, 0) for p, end in step):
        steps.append(step)
    ends = dict(last_ends(steps))
    files = {p: {"bytes": ends[p], "sha256": readers[p].digest(0, ends[p])} for p in ends}
    return {"files": files, "steps": [[list(e) for e in s] for s in steps], "head": head}


def last_ends(steps: list[Step]) -> list[tuple[str, int]]:
    """How far the steps read each file, in the order files first appear."""
    ends: dict[str, int] = {}
    for step in steps:
        for path, end in step:
            ends[path] = max(end, ends.get(path, 0))
    return list(ends.items())
