"""The engine's async twins: ``aprepare``, ``arecord``, ``aretry_after_error``,
``acompact`` and ``astats``, for agents written with asyncio (every current agent
framework is).

Each twin runs its synchronous namesake in a worker thread (``asyncio.to_thread``), so
one implementation serves both and the event loop never waits on the store, the rules,
the Rust renderer or a summarizer: the store's I/O and the core's counting release the
event loop, and other sessions' turns go on meanwhile.  Calls on one session take turns
(``Engine.session_lock``, held by the synchronous call itself), so two coroutines that
prepare and record the same session concurrently cannot interleave their appends; calls
on different sessions of one store run side by side.  A cancelled twin stops waiting:
the call it started finishes in its thread (appends are whole or not at all), and the
session's lock is free again once it has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from ..compaction import CompactResult
from ..model import Content
from .results import Recorded, SessionStats, ToolResult, TurnPrep

__all__ = ["AsyncTwins"]


class AsyncTwins:
    """The async twins of ``Engine``'s calls (the part of the engine this module holds)."""

    # The synchronous calls, which ``Engine`` defines (the twins run them in a thread).
    prepare: Callable[..., TurnPrep]
    record: Callable[..., Recorded]
    retry_after_error: Callable[..., TurnPrep]
    compact: Callable[..., CompactResult]
    stats: Callable[..., SessionStats]

    async def aprepare(
        self,
        session: str,
        user_input: Content | None = None,
        *,
        tool_results: Sequence[ToolResult] = (),
        now: float,
        model: str | None = None,
    ) -> TurnPrep:
        """``prepare``, awaited (see the module docstring)."""
        return await asyncio.to_thread(
            self.prepare, session, user_input, tool_results=tool_results, now=now, model=model
        )

    async def arecord(self, prep: TurnPrep, response: Any, *, now: float) -> Recorded:
        """``record``, awaited: the response as received or a finished stream (the list of
        events an async stream yielded, or the SDK's final message)."""
        return await asyncio.to_thread(self.record, prep, response, now=now)

    async def aretry_after_error(
        self, prep: TurnPrep, error: BaseException, *, now: float
    ) -> TurnPrep:
        """``retry_after_error``, awaited: ``error`` raised again when it is not a
        prompt-too-long refusal, or ``prep`` was already such a retry."""
        return await asyncio.to_thread(self.retry_after_error, prep, error, now=now)

    async def acompact(
        self,
        session: str,
        *,
        now: float,
        instructions: str = "",
        direction: str = "full",
        pivot: str | None = None,
    ) -> CompactResult:
        """``compact``, awaited (the summarizer runs in the worker thread)."""
        return await asyncio.to_thread(
            self.compact,
            session,
            now=now,
            instructions=instructions,
            direction=direction,
            pivot=pivot,
        )

    async def astats(self, session: str, *, head: str | None = None, now: float) -> SessionStats:
        """``stats``, awaited."""
        return await asyncio.to_thread(self.stats, session, head=head, now=now)
