"""The plain data of compaction: its options, its result, and the hook events.

All are frozen msgspec structs: they cross to plugins (the hook events) and to JSON
(``ctxrules compact --json``) as they are.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ..commit import Compaction

__all__ = [
    "CompactOptions",
    "CompactResult",
    "PostCompactEvent",
    "PreCompactEvent",
    "RestoreLimits",
    "Restored",
    "SessionStartEvent",
]


class RestoreLimits(msgspec.Struct, frozen=True, kw_only=True):
    """How much the restore message after a compaction may bring back (tokens counted
    with the pipeline's tokenizer).

    At most ``max_files`` of the most recently read files, each cut to ``file_tokens``,
    ``files_tokens`` in all; invoked skills cut to ``skill_tokens`` each,
    ``skills_tokens`` in all.
    """

    max_files: int = 5
    file_tokens: int = 5_000
    files_tokens: int = 50_000
    skill_tokens: int = 5_000
    skills_tokens: int = 25_000


class CompactOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How ``compact`` summarises and restores.

    ``summarizer`` (a registered name), ``summary_budget_tokens`` and
    ``timeout_seconds`` make the summary request (0: no time limit).
    ``keep_tail_tokens`` keeps whole units before the open turn while they fit (a
    full compaction; the open turn itself always stays).  ``restore`` bounds the
    restore message.
    """

    summarizer: str = "extractive"
    summary_budget_tokens: int = 4_000
    timeout_seconds: float = 120.0
    keep_tail_tokens: int = 0
    restore: RestoreLimits = RestoreLimits()


class Restored(msgspec.Struct, frozen=True, kw_only=True):
    """What the restore message after a boundary holds: the files (and whether each was
    re-read from disk), whether the plan is there, the skills, the deferred tools
    re-declared, and whether ``session_start`` hooks added text."""

    files: tuple[str, ...] = ()
    from_disk: tuple[str, ...] = ()
    skipped_files: tuple[str, ...] = ()
    plan: bool = False
    skills: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    hook_context: bool = False


class CompactResult(msgspec.Struct, frozen=True, kw_only=True):
    """One stored compaction: the ``boundary`` node, the ``restore`` node after it
    (``None`` when there was nothing to restore), the ``commit`` now at HEAD, the
    boundary's ``record`` (trigger, tokens before and after, items folded, summary),
    what was ``restored`` and ``notes`` (hook failures after the boundary was stored,
    what the derive step said)."""

    session_id: str
    boundary: str
    restore: str | None
    commit: str
    record: Compaction
    restored: Restored
    notes: tuple[str, ...] = ()


class PreCompactEvent(msgspec.Struct, frozen=True, kw_only=True):
    """The ``pre_compact`` hook's argument: a compaction of ``session_id`` at ``head``
    is about to ask for its summary."""

    session_id: str
    head: str
    trigger: str
    direction: str
    pivot: str | None
    instructions: str
    tokens_before: int
    working_directory: str | None


class SessionStartEvent(msgspec.Struct, frozen=True, kw_only=True):
    """The ``session_start`` hook's argument: the session starts afresh.

    ``source`` says why (``"compact"``: after the compaction whose boundary node is
    ``boundary``; an engine may send ``"startup"`` / ``"resume"`` / ``"clear"``).
    """

    session_id: str
    source: Literal["startup", "resume", "clear", "compact"]
    boundary: str | None
    working_directory: str | None


class PostCompactEvent(msgspec.Struct, frozen=True, kw_only=True):
    """The ``post_compact`` hook's argument: the stored compaction."""

    result: CompactResult
