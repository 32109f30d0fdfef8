"""The context-source contract: ``SourceRequest``, the ``ContextSource`` Protocol, lookups."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import msgspec

from ..errors import ValidationError
from ..limits import check_now
from ..plugins import registry
from .config import SourcesConfig

__all__ = ["ContextSource", "SourceRequest", "context_source_names", "get_context_source"]


class SourceRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a context source is given when it is collected.

    ``working_directory`` is the absolute directory the session works in;
    ``added_directories`` are further directories the user added (searched for
    instruction files like the working directory); ``metadata`` is the session's
    metadata (title, tags, model, …), read-only for the source.  ``now`` is the
    caller's clock (seconds since the epoch): a source that needs the time reads it
    here, never from the system clock, so the same request gives the same text.
    ``config`` says which sources are on and holds their options.
    """

    session_id: str
    working_directory: str
    now: float
    added_directories: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = {}
    config: SourcesConfig = msgspec.field(default_factory=SourcesConfig)

    def __post_init__(self) -> None:
        check_now(self.now, where="SourceRequest.now")
        for field, path in (
            ("working_directory", self.working_directory),
            *(("added_directories", d) for d in self.added_directories),
        ):
            if not isinstance(path, str) or not os.path.isabs(path):
                raise ValidationError(
                    f"{field} must hold absolute paths, got {path!r}",
                    where=f"SourceRequest.{field}",
                    hint="pass os.path.abspath(...) of the directory",
                )
        if not isinstance(self.config, SourcesConfig):
            raise ValidationError(
                f"config must be a SourcesConfig, got {type(self.config).__name__}",
                where="SourceRequest.config",
            )


@runtime_checkable
class ContextSource(Protocol):
    """What a context-source plugin registers: a name and the text it contributes.

    ``collect`` returns the text to add to the system prompt, or ``None`` (or ``""``)
    to add nothing — a disabled source, a directory that is not a git repository.  It
    may read the file system; it should be deterministic for the same state, since the
    answer is memoised per session and refreshed only after a compaction.  It must not
    raise for ordinary conditions (a missing file is ``None``); an exception is a bug.
    """

    name: str

    def collect(self, request: SourceRequest) -> str | None:
        """This source's text for the session described by ``request``."""
        ...


def get_context_source(name: str) -> ContextSource:
    """The registered context source called ``name`` (``PluginError`` lists the known ones)."""

    source: ContextSource = registry("context_sources").get(name, ContextSource)
    return source


def context_source_names() -> list[str]:
    """Names of the registered context sources, in registration order."""

    return registry("context_sources").names()
