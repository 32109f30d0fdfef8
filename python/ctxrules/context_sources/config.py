"""Which context sources are collected, and their options: ``SourcesConfig``.

A plain frozen struct the turn engine hands over inside every ``SourceRequest``, built
in Python (``SourcesConfig(git_status=False)``) or from a TOML table
(``SourcesConfig.from_mapping(table, source="ctxrules.toml")``), for example::

    [context_sources]
    git_status = false                       # skip the git status
    git_user = true                          # add the git user's name and e-mail
    git_files = true                         # add the changed and untracked file names
    instruction_file_names = ["AGENTS.md", "CLAUDE.md", "CONVENTIONS.md"]
    timezone = "Europe/Berlin"               # the zone "Today's date" is taken in
    cache_breaker = "debug-1"                # debug only: adds [CACHE_BREAKER: debug-1]

Every value is checked when the struct is made: a wrong type, an unknown key or a value
out of range is a ``ConfigError`` naming the key, never a setting silently ignored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from ..errors import ConfigError

__all__ = ["BUILTIN_SOURCES", "DEFAULT_INSTRUCTION_FILES", "SourcesConfig"]

#: The built-in sources in the order they are collected: the most stable text first
#: (instruction files change least), so a change further down keeps more of the cached
#: prefix; the cache breaker, which exists to change the prefix, comes last.  Sources
#: named in ``extra_sources`` are collected after the date, before the cache breaker.
BUILTIN_SOURCES: tuple[str, ...] = ("instruction_files", "git_status", "date", "cache_breaker")
DEFAULT_INSTRUCTION_FILES: tuple[str, ...] = ("AGENTS.md", "CLAUDE.md")


class SourcesConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The context sources to collect and their options (see the module docstring).

    ``git_status`` / ``instruction_files`` / ``date`` switch the built-in sources on
    or off.  The git status is capped at ``git_max_chars`` (with a note to run
    ``git status``), shows ``git_log_count`` recent commits, and every git command is
    given ``git_timeout_seconds``.  What identifies the user or shows the file tree is
    off unless switched on, since a library inside a service should send neither to a
    model by accident: ``git_user`` adds the git user's name and e-mail, ``git_files``
    the staged, unstaged and untracked file names (without it the status gives their
    numbers only).  Instruction files are the ``instruction_file_names``
    found from the working directory upward and in the added directories, together at
    most ``instruction_max_chars``.  ``timezone`` is ``"local"`` (the process's zone),
    ``"UTC"`` or an IANA name.  ``cache_breaker`` is a debug switch, off when empty.
    ``extra_sources`` names further registered sources to collect (in that order) and
    ``source_options`` holds their options by name, for them to read from the request.
    """

    git_status: bool = True
    git_user: bool = False
    git_files: bool = False
    git_max_chars: int = 2000
    git_log_count: int = 5
    git_timeout_seconds: float = 5.0
    instruction_files: bool = True
    instruction_file_names: tuple[str, ...] = DEFAULT_INSTRUCTION_FILES
    instruction_max_chars: int = 40_000
    date: bool = True
    timezone: str = "local"
    cache_breaker: str = ""
    extra_sources: tuple[str, ...] = ()
    source_options: dict[str, dict[str, Any]] = {}

    def __post_init__(self) -> None:
        # msgspec checks types only when decoding: a struct built in Python is checked here.
        for key, kind in _TYPES.items():
            value = getattr(self, key)
            if kind is float:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            elif kind is int:
                ok = isinstance(value, int) and not isinstance(value, bool)
            elif kind is tuple:
                ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
            elif kind is dict:
                ok = isinstance(value, dict) and all(
                    isinstance(k, str) and isinstance(v, dict) for k, v in value.items()
                )
            else:
                ok = isinstance(value, kind)
            if not ok:
                want = _WANT.get(kind, kind.__name__)
                raise _bad(key, f"must be {want}", value)
        _range("git_max_chars", self.git_max_chars, 200, 1_000_000)
        _range("git_log_count", self.git_log_count, 0, 100)
        _range("instruction_max_chars", self.instruction_max_chars, 200, 10_000_000)
        t = self.git_timeout_seconds
        if not math.isfinite(t) or not 0 < t <= 600:
            raise _bad("git_timeout_seconds", "must be a number of seconds in (0, 600]", t)
        _names("instruction_file_names", self.instruction_file_names, files=True)
        _names("extra_sources", self.extra_sources, files=False)
        for name in self.extra_sources:
            if name in BUILTIN_SOURCES:
                raise _bad("extra_sources", f"names the built-in source {name!r}", name)
        for name in self.source_options:
            if name not in self.extra_sources:
                raise _bad(
                    f"source_options.{name}",
                    "gives options for a source that is not in extra_sources",
                    name,
                )
        if self.timezone not in ("local", "UTC"):
            try:
                ZoneInfo(self.timezone)
            except (ZoneInfoNotFoundError, ValueError, OSError):
                raise _bad(
                    "timezone", 'must be "local", "UTC" or an IANA zone name', self.timezone
                ) from None
        if "\n" in self.cache_breaker or "\r" in self.cache_breaker:
            raise _bad("cache_breaker", "must be one line", self.cache_breaker)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "<python>") -> SourcesConfig:
        """A config from a TOML-style table; errors name ``source`` and the key."""
        try:
            return msgspec.convert(dict(data), cls)
        except msgspec.ValidationError as exc:
            message, _, path = str(exc).partition(" - at `$.")
            key = path.rstrip("`") or _unknown_key(message)
            raise ConfigError(
                message,
                where=f"{source}: context_sources{'.' + key if key else ''}",
                hint=f"known keys: {', '.join(cls.__struct_fields__)}",
            ) from None
        except ConfigError as exc:
            raise ConfigError(exc.message, where=f"{source}: {exc.where}", hint=exc.hint) from None


_TYPES: dict[str, type] = {
    "git_status": bool,
    "git_user": bool,
    "git_files": bool,
    "git_max_chars": int,
    "git_log_count": int,
    "git_timeout_seconds": float,
    "instruction_files": bool,
    "instruction_file_names": tuple,
    "instruction_max_chars": int,
    "date": bool,
    "timezone": str,
    "cache_breaker": str,
    "extra_sources": tuple,
    "source_options": dict,
}


_WANT: dict[type, str] = {tuple: "a tuple of strings", dict: "a table of tables"}


def _bad(key: str, message: str, value: object) -> ConfigError:
    return ConfigError(f"{message}, got {value!r}", where=f"context_sources.{key}")


def _range(key: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise _bad(key, f"must be between {low:,} and {high:,}", value)


def _names(key: str, names: tuple[str, ...], *, files: bool) -> None:
    if len(set(names)) != len(names):
        raise _bad(key, "lists a name twice", names)
    for name in names:
        if not name.strip() or name != name.strip():
            raise _bad(key, "holds an empty name or one with surrounding spaces", name)
        if files and (name in (".", "..") or any(c in name for c in "/\\\0")):
            raise _bad(key, "holds file names, not paths", name)


def _unknown_key(message: str) -> str:
    # "Object contains unknown field `x`" names the key only in the message.
    _, sep, rest = message.partition("unknown field `")
    return rest.split("`", 1)[0] if sep else ""
