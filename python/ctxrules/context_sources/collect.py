"""Collecting the context sources of a session, and the per-session memo the engine keeps.

``collect_sources(request)`` asks every source the request's ``SourcesConfig`` names,
in a fixed order, and returns their texts.  ``SourceMemo`` keeps one collection per
session: the engine asks it on every turn and gets the same texts back (the L0 prefix
stays byte-identical, so the provider's prompt cache keeps hitting) until it calls
``refresh(session_id)`` — once, after a compaction.
"""

from __future__ import annotations

import threading

import msgspec

from ..errors import PluginError
from .base import SourceRequest, get_context_source
from .config import BUILTIN_SOURCES

__all__ = ["CollectedSources", "SourceMemo", "SourceText", "collect_sources", "source_order"]


class SourceText(msgspec.Struct, frozen=True):
    """One source's contribution: the source's name and its text."""

    name: str
    text: str


class CollectedSources(msgspec.Struct, frozen=True, kw_only=True):
    """What the sources answered for one session, in collection order.

    ``texts`` holds only the sources that contributed (a disabled source or one with
    nothing to say is left out); ``now`` is the clock the request carried.
    """

    session_id: str
    now: float
    texts: tuple[SourceText, ...] = ()

    @property
    def text(self) -> str:
        """All texts joined by a blank line (``""`` when no source contributed)."""
        return "\n\n".join(t.text for t in self.texts)


def source_order(request: SourceRequest) -> tuple[str, ...]:
    """The names ``collect_sources`` asks, in order: the built-ins, with the request's
    ``extra_sources`` between the date and the cache breaker."""
    *stable, breaker = BUILTIN_SOURCES
    return (*stable, *request.config.extra_sources, breaker)


def collect_sources(request: SourceRequest) -> CollectedSources:
    """Ask every configured context source for its text, in ``source_order``.

    Each source is looked up in the registry (built-ins and plugins alike) and given
    ``request``; a built-in that its switch turned off answers ``None`` and is left
    out.  This reads the file system and runs git every time it is called: the caller
    memoises the result per session (``SourceMemo``) and collects again only once after
    a compaction, so the prompt prefix the sources feed stays stable in between.  A
    source that raises or answers something other than text is a ``PluginError``
    naming it.
    """
    texts: list[SourceText] = []
    for name in source_order(request):
        source = get_context_source(name)
        try:
            text = source.collect(request)
        except Exception as exc:  # a plugin's bug: say which source it was
            raise PluginError(
                f"context source {name!r} failed: {type(exc).__name__}: {exc}",
                where=f"session {request.session_id}",
                hint="a source should answer None for ordinary conditions; fix or remove it",
            ) from exc
        if text is None or text == "":
            continue
        if not isinstance(text, str):
            raise PluginError(
                f"context source {name!r} answered a {type(text).__name__}, not text",
                where=f"session {request.session_id}",
                hint="collect() returns a str or None",
            )
        texts.append(SourceText(name, text))
    return CollectedSources(session_id=request.session_id, now=request.now, texts=tuple(texts))


class SourceMemo:
    """The collected sources of each session, kept until ``refresh``.

    ``get(request)`` collects the sources the first time a session is asked for and
    returns that same collection on every later call — whatever the request then
    says, and however the files on disk changed — so the session's prompt prefix does
    not move.  ``refresh(session_id)`` forgets the session's collection; the next
    ``get`` collects again.  The engine calls it once after each compaction (the
    summary rewrote the prefix anyway, so that is when fresh instruction files and git
    status cost nothing extra in cache).  Safe to share between threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._memo: dict[str, CollectedSources] = {}

    def get(self, request: SourceRequest) -> CollectedSources:
        """The session's collection: memoised, or collected now (see the class)."""
        with self._lock:  # held while collecting, so two threads never collect twice
            found = self._memo.get(request.session_id)
            if found is None:
                found = collect_sources(request)
                self._memo[request.session_id] = found
            return found

    def kept(self, session_id: str) -> CollectedSources | None:
        """The session's collection if one is kept (``None``: the next ``get`` collects):
        a caller holding it needs no ``SourceRequest`` to ask again."""
        with self._lock:
            return self._memo.get(session_id)

    def refresh(self, session_id: str) -> None:
        """Forget ``session_id``'s collection: the next ``get`` collects the sources again."""
        with self._lock:
            self._memo.pop(session_id, None)

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._memo
