"""The token budget of one request: the window split four ways, and how full it is.

A request's prompt is the system prompt, the tool declarations and the history; the
output reserve is kept free for the answer.  ``usable = window - output_reserve`` is
what the prompt may fill.  The level says what the engine does next:

* ``ok`` below ``warn_at × usable``;
* ``warn`` from there (a user interface shows it);
* ``compact`` from ``compact_at × usable``: the engine compacts before sending, when
  ``auto_compact`` is on;
* ``critical`` from ``critical_at × usable``: the emergency compaction, when
  ``emergency_compact`` is on, even if the automatic one is switched off.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ..providers import ModelProfile
from .config import DEFAULT_OUTPUT_RESERVE, EngineConfig

__all__ = ["LEVELS", "Budget", "Level", "budget", "output_reserve"]

Level = Literal["ok", "warn", "compact", "critical"]
#: The levels, from the least to the most urgent.
LEVELS: tuple[Level, ...] = ("ok", "warn", "compact", "critical")


class Budget(msgspec.Struct, frozen=True, kw_only=True):
    """The window of one request split four ways, with its thresholds and level.

    ``system`` / ``tools`` / ``history`` are the prompt's parts (they add up to
    ``used``, the request's billed-prompt size as the engine expects it: the local
    estimate fused with the last measurement); ``output_reserve`` is kept for the
    answer; ``usable`` = ``window`` - ``output_reserve``.  ``warn_tokens``,
    ``compact_tokens`` and ``critical_tokens`` are the thresholds in tokens; ``free``
    is ``usable - used`` (negative: over the usable window).
    """

    window: int
    output_reserve: int
    usable: int
    system: int
    tools: int
    history: int
    used: int
    warn_tokens: int
    compact_tokens: int
    critical_tokens: int
    level: Level
    free: int


def output_reserve(profile: ModelProfile, config: EngineConfig) -> int:
    """Tokens kept free for the answer: the configured reserve, else 16K within the
    model's output limit and a quarter of its window."""
    if config.output_reserve is not None:
        return min(config.output_reserve, profile.context_window - 1)
    return max(
        1, min(DEFAULT_OUTPUT_RESERVE, profile.max_output_tokens, profile.context_window // 4)
    )


def budget(
    profile: ModelProfile, config: EngineConfig, *, system: int, tools: int, used: int
) -> Budget:
    """The ``Budget`` of a request whose prompt is ``used`` tokens, ``system`` and
    ``tools`` of them for the system prompt and the declarations (the rest is history)."""
    window = profile.context_window
    reserve = output_reserve(profile, config)
    usable = window - reserve
    warn = int(usable * config.warn_at)
    compact = int(usable * config.compact_at)
    critical = int(usable * config.critical_at)
    level: Level = (
        "critical"
        if used >= critical
        else "compact"
        if used >= compact
        else "warn"
        if used >= warn
        else "ok"
    )
    return Budget(
        window=window,
        output_reserve=reserve,
        usable=usable,
        system=system,
        tools=tools,
        history=max(0, used - system - tools),
        used=used,
        warn_tokens=warn,
        compact_tokens=compact,
        critical_tokens=critical,
        level=level,
        free=usable - used,
    )
