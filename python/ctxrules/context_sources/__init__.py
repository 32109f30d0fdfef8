"""Context sources: plugins that contribute text to the session-constant system prompt.

A context source (git status, workspace instruction files, today's date, …) is
registered through ``register_context_sources`` and looked up by name.  It is asked for
its text with a ``SourceRequest`` — the session, the working directory, the
directories added to it, the session's metadata, the caller's clock and the sources
configuration — and answers with text or ``None``.

When it is asked, and why: the caller (the turn engine) collects each source once per
session and memoises the answer (``SourceMemo``), because the text lands in the L0
layer that every request of the session starts with; a source that changed its answer
on every call would invalidate the provider's prompt cache each time.  After a
compaction the caller collects every source again exactly once (instruction files are
re-read from disk then) and memoises the new answers; nothing else refreshes them.
Metadata such as the title and tags carries over a compaction, so a source may rely on
it.

The built-in sources (``instruction_files``, ``git_status``, ``date``,
``cache_breaker``) are registered by ``ctxrules.context_sources._plugin`` like any
plugin; ``collect_sources`` asks the enabled ones in a fixed order.
"""

from __future__ import annotations

from .base import ContextSource, SourceRequest, context_source_names, get_context_source
from .collect import CollectedSources, SourceMemo, SourceText, collect_sources, source_order
from .config import BUILTIN_SOURCES, DEFAULT_INSTRUCTION_FILES, SourcesConfig

__all__ = [
    "BUILTIN_SOURCES",
    "DEFAULT_INSTRUCTION_FILES",
    "CollectedSources",
    "ContextSource",
    "SourceMemo",
    "SourceRequest",
    "SourceText",
    "SourcesConfig",
    "collect_sources",
    "context_source_names",
    "get_context_source",
    "source_order",
]
