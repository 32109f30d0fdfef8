"""What an ``Engine`` is set up with: ``EngineConfig`` (provider, model, system prompt parts,
tools, thresholds, output reserve, reference scanning) and ``Skill``.

Everything is checked when the struct is made: a wrong type, a threshold out of order or
out of range is a ``ConfigError`` naming the field, never a setting silently ignored.
Thresholds are fractions of the *usable* window (the context window minus the output
reserve) and can be set up as well as down (peers only let users lower them); each
compaction trigger has its own switch.
"""

from __future__ import annotations

import math
import os
from typing import Any

import msgspec

from ..compaction import CompactOptions
from ..context_sources import SourcesConfig
from ..errors import ConfigError
from ..model import ToolSpec

__all__ = ["DEFAULT_OUTPUT_RESERVE", "NOT_RUN_RESULT", "EngineConfig", "Skill"]

#: The result a tool call left without one gets under ``unanswered_calls = "not_run"``.
NOT_RUN_RESULT = (
    "This tool call was not run: the conversation went on without its result. Do not "
    "assume it happened; ask for it again if it is still needed."
)

#: Output reserve when none is configured: 16K tokens, at most the model's output limit
#: and a quarter of its window (so a small window is not mostly reserve).
DEFAULT_OUTPUT_RESERVE = 16_384


class Skill(msgspec.Struct, frozen=True, kw_only=True):
    """A skill the agent can invoke: listed by ``name`` and ``description`` in the system
    prompt (its ``text`` is what an invocation loads; compaction restores it)."""

    name: str
    description: str = ""
    text: str = ""


class EngineConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How an ``Engine`` builds each request (see the module docstring).

    ``provider`` / ``model``: where requests go (``model`` ``None``: the session's
    recorded model when it belongs to the provider, else the provider's default).
    ``system`` is the agent's identity text; ``skills`` are listed after it, ``memory``
    texts follow, then the context sources (``sources``: instruction files, git status,
    date) collected once per session.  ``tools`` are the declarations sent (empty: the
    session's recorded tools).  ``working_directory`` / ``added_directories`` feed the
    sources and ``@path`` references (``None``: the process's working directory).

    ``output_reserve`` is kept free for the answer (``None``: ``DEFAULT_OUTPUT_RESERVE``
    within the model's limits) and is the request's ``max_tokens`` unless
    ``max_tokens`` says otherwise.  ``warn_at`` / ``compact_at`` / ``critical_at`` are
    the level thresholds as fractions of the usable window; at ``compact_at`` the
    engine compacts when ``auto_compact``, at ``critical_at`` when
    ``emergency_compact`` (or ``auto_compact``), with ``compaction``'s options (the
    summarizer, its budget and time limit, what is restored); after 3 consecutive
    failures the session's circuit breaker stops trying (``Engine.breaker``).
    ``references`` turns ``@path`` scanning on (off by default: a library must not
    read files for users it does not know; hidden files and version-control internals
    are never read); a referenced file is read up to ``reference_max_chars``.
    ``situation`` adds the L1 situation text (which frame of the call tree a request is
    part of) to every request.
    ``unanswered_calls`` says what ``prepare`` does with tool calls waiting at HEAD that
    the input leaves without a result: ``"refuse"`` (``UnansweredToolCallsError``,
    nothing stored) or ``"not_run"`` (each answered with ``not_run_result`` as an error
    result, listed in ``TurnPrep.not_run``); never dropped (``ctxrules.engine.calls``).
    ``cache`` places the provider's cache breakpoints (``cache_ttl``: their lifetime,
    ``"5m"`` or ``"1h"``); ``extra`` holds body fields sent as they are (``tool_choice``,
    ``temperature``, …).
    """

    provider: str = "anthropic"
    model: str | None = None
    system: str = ""
    skills: tuple[Skill, ...] = ()
    memory: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    sources: SourcesConfig = msgspec.field(default_factory=SourcesConfig)
    working_directory: str | None = None
    added_directories: tuple[str, ...] = ()
    output_reserve: int | None = None
    max_tokens: int | None = None
    warn_at: float = 0.6
    compact_at: float = 0.8
    critical_at: float = 0.95
    auto_compact: bool = True
    emergency_compact: bool = True
    compaction: CompactOptions = msgspec.field(default_factory=CompactOptions)
    references: bool = False
    unanswered_calls: str = "refuse"
    not_run_result: str = NOT_RUN_RESULT
    reference_max_chars: int = 40_000
    situation: bool = False
    cache: bool = True
    cache_ttl: str | None = None
    extra: dict[str, Any] = {}

    def __post_init__(self) -> None:
        for name in ("warn_at", "compact_at", "critical_at"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or not 0.0 < value <= 1.0
            ):
                raise ConfigError(
                    f"{name} must be a fraction of the usable window in (0, 1], got {value!r}",
                    where=f"EngineConfig.{name}",
                )
        if not self.warn_at <= self.compact_at <= self.critical_at:
            raise ConfigError(
                f"thresholds out of order: warn_at {self.warn_at} <= compact_at "
                f"{self.compact_at} <= critical_at {self.critical_at} must hold",
                where="EngineConfig",
                hint="raise or lower them together",
            )
        for name in ("output_reserve", "max_tokens", "reference_max_chars"):
            value = getattr(self, name)
            if value is None and name != "reference_max_chars":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"{name} must be a positive number of tokens, got {value!r}",
                    where=f"EngineConfig.{name}",
                )
        for name in ("auto_compact", "emergency_compact", "references", "situation", "cache"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false", where=f"EngineConfig.{name}")
        if self.unanswered_calls not in ("refuse", "not_run"):
            raise ConfigError(
                f'unanswered_calls must be "refuse" or "not_run", got {self.unanswered_calls!r}',
                where="EngineConfig.unanswered_calls",
            )
        if not isinstance(self.not_run_result, str) or not self.not_run_result.strip():
            raise ConfigError(
                "not_run_result must be a non-empty text", where="EngineConfig.not_run_result"
            )
        if not isinstance(self.provider, str) or not self.provider:
            raise ConfigError("provider must name a provider", where="EngineConfig.provider")
        if not isinstance(self.compaction, CompactOptions):
            raise ConfigError(
                f"compaction must be a CompactOptions, got {type(self.compaction).__name__}",
                where="EngineConfig.compaction",
            )
        if not isinstance(self.sources, SourcesConfig):
            raise ConfigError(
                f"sources must be a SourcesConfig, got {type(self.sources).__name__}",
                where="EngineConfig.sources",
            )
        for path in (self.working_directory, *self.added_directories):
            if path is not None and (not isinstance(path, str) or not os.path.isabs(path)):
                raise ConfigError(
                    f"directories must be absolute paths, got {path!r}",
                    where="EngineConfig",
                    hint="pass os.path.abspath(...)",
                )

    @classmethod
    def from_mapping(cls, data: dict[str, Any], *, source: str = "<python>") -> EngineConfig:
        """Build from a TOML-style table (``[engine]``); errors name ``source`` and the key."""
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as exc:
            raise ConfigError(f"invalid engine settings: {exc}", where=source) from None
