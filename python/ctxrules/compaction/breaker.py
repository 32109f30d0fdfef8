"""What an agent loop needs around ``compact``: a circuit breaker and the reactive retry.

An automatic compaction runs when the request crosses a threshold; a reactive one when
the provider refused it as too long.  Either can fail every time (a summarizer that is
down, a session whose kept part alone is over the window), and a loop that compacts
before every request would then burn a summary call per turn.  ``CircuitBreaker``
stops that: after ``limit`` (3) consecutive failed compactions it refuses to try again
until a compaction succeeds (``reset``, or a manual one the caller reports).

``retry_after_compaction`` is the reactive path: send; if the provider answered
prompt-too-long, compact once (through the breaker) and send once more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import CompactionDeclined, CompactionError, CtxrulesError
from ..providers import Provider, prompt_too_long_of
from .types import CompactResult

__all__ = ["CircuitBreaker", "is_prompt_too_long", "retry_after_compaction"]

T = TypeVar("T")


class CircuitBreaker:
    """Counts consecutive failed compactions and refuses more after ``limit`` of them.

    The engine holds one per session.  ``call(run)`` runs a compaction (``run``
    returns the ``CompactResult``): a ``CtxrulesError`` counts as a failure and is
    raised again (a ``CompactionDeclined`` is raised without counting: a compaction
    that would not pay is no failure), success resets the count.  While ``open``
    (``failures >= limit``) ``call`` raises ``CompactionError`` without running anything.
    """

    def __init__(self, limit: int = 3):
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = limit
        self.failures = 0
        self.last_error = ""

    @property
    def open(self) -> bool:
        """Whether compaction is switched off after ``limit`` consecutive failures."""
        return self.failures >= self.limit

    def call(self, run: Callable[[], CompactResult]) -> CompactResult:
        """Run one compaction through the breaker (see the class docstring)."""
        if self.open:
            raise CompactionError(
                f"compaction is switched off after {self.failures} consecutive failures "
                f"(last: {self.last_error})",
                hint="fix the cause (the session's compaction_failures list them), then "
                "reset() or compact manually",
            )
        try:
            result = run()
        except CompactionDeclined:
            raise  # a compaction that would not pay is no failure
        except CtxrulesError as exc:
            self.failures += 1
            self.last_error = str(exc)
            raise
        self.reset()
        return result

    def reset(self) -> None:
        """Forget the failures (after a compaction that succeeded outside the breaker)."""
        self.failures = 0
        self.last_error = ""


def is_prompt_too_long(exc: BaseException, provider: str | Provider | None = None) -> bool:
    """Whether ``exc`` is a provider's prompt-too-long refusal: a ``PromptTooLongError``
    (what ``Engine.record`` raises for such an error body or stream event), or an error
    of a vendor SDK, of a framework wrapping one, or of a raw HTTP client whose status
    and error body ``provider`` — or another registered provider — recognises
    (``ctxrules.providers.prompt_too_long_of``)."""
    return prompt_too_long_of(exc, provider) is not None


def retry_after_compaction(
    send: Callable[[], T],
    compact_now: Callable[[], CompactResult],
    *,
    breaker: CircuitBreaker | None = None,
    provider: str | Provider | None = None,
    too_long: Callable[[BaseException], bool] | None = None,
) -> tuple[T, CompactResult | None]:
    """Send; on a prompt-too-long refusal compact once and send once more.

    ``send`` builds and sends the request from the session as it is *now* (it is
    called again after the compaction, so it must prepare a new request);
    ``compact_now`` compacts (e.g. ``lambda: compact(store, sid, trigger="reactive",
    now=...)``) and runs through ``breaker`` when one is given.  ``too_long`` says
    whether an exception is the refusal (default ``is_prompt_too_long`` for
    ``provider``).  Returns what ``send`` returned and the compaction (``None`` when
    none was needed).  A second refusal is raised as it is; a failed compaction raises
    ``CompactionError`` chained to it, the refusal in its message.
    """
    check = too_long or (lambda exc: is_prompt_too_long(exc, provider))
    try:
        return send(), None
    except Exception as exc:
        if not check(exc):
            raise
        refusal: Any = exc
    run = breaker.call if breaker is not None else (lambda f: f())
    try:
        result = run(compact_now)
    except CtxrulesError as exc:
        raise CompactionError(
            f"the provider refused the prompt as too long ({refusal}) and the reactive "
            f"compaction failed: {exc}",
            hint="compact manually with other instructions, or use a model with a larger window",
        ) from exc
    return send(), result
