"""Context sources: plugins that contribute text to the session-constant system prompt.

A context source (git status, workspace instruction files, today's date, …) is
registered through ``register_context_sources`` and looked up by name.  It is asked for
its text with a ``SourceRequest`` — the session, the working directory, the
directories added to it and the session's metadata — and answers with text or
``None``.

When it is asked, and why: the caller (the turn engine) collects each source once per
session and memoises the answer, because the text lands in the L0 layer that every
request of the session starts with; a source that changed its answer on every call
would invalidate the provider's prompt cache each time.  After a compaction the caller
collects every source again exactly once (instruction files are re-read from disk then)
and memoises the new answers; nothing else refreshes them.  Metadata such as the title
and tags carries over a compaction, so a source may rely on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import msgspec

__all__ = ["ContextSource", "SourceRequest", "context_source_names", "get_context_source"]


class SourceRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a context source is given when it is collected.

    ``working_directory`` is the absolute directory the session works in;
    ``added_directories`` are further directories the user added (searched for
    instruction files like the working directory); ``metadata`` is the session's
    metadata (title, tags, model, …), read-only for the source.
    """

    session_id: str
    working_directory: str
    added_directories: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = {}


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
    from ..plugins import registry

    source: ContextSource = registry("context_sources").get(name, ContextSource)
    return source


def context_source_names() -> list[str]:
    """Names of the registered context sources, in registration order."""
    from ..plugins import registry

    return registry("context_sources").names()
