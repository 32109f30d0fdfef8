"""The ``cache_breaker`` context source: a debug switch that changes the prompt prefix.

With ``SourcesConfig(cache_breaker="TEXT")`` the line ``[CACHE_BREAKER: TEXT]`` is
added last to the session-constant prompt, so a new TEXT makes the provider's cached
prefix miss from there on: a way to force fresh state while debugging.  Empty (the
default) adds nothing.
"""

from __future__ import annotations

from .base import SourceRequest

__all__ = ["CacheBreakerSource"]


class CacheBreakerSource:
    """``[CACHE_BREAKER: …]`` when the debug switch holds a text; nothing otherwise."""

    name = "cache_breaker"

    def collect(self, request: SourceRequest) -> str | None:
        """The breaker line, or ``None`` when ``config.cache_breaker`` is empty."""
        text = request.config.cache_breaker
        return f"[CACHE_BREAKER: {text}]" if text else None
