"""Summary requests: how a rule asks for a summary without calling a summarizer.

Deriving a commit is a pure function of its inputs, so a rule never runs a summarizer
(a model call, a plugin, a clock).  It asks the ``RuleContext`` for the summary of some
items; when the caller handed that summary in, the rule gets it, otherwise the request
is recorded and the derived commit is returned with it (``Generated.requests``).  The
caller answers each request (``run_summarizer`` runs the registered summarizer within
the request's time limit) and derives again with the answers as input: the same
answers give the same commit, however long they took to obtain.

``ctxrules.commit.derive_with_summaries`` does that in one call, and in one derive: it
hands its answer function to the derive, whose context answers each request as the
rule makes it (the rule still calls no summarizer: the caller's function does).

How ``run_summarizer`` gets an answer, in order:

1. **Chunks.**  A summarizer whose ``max_input_tokens`` is smaller than the items
   (counted with the items' own ``tokens``) gets them in chunks of whole units
   (``ctxrules.summarizers.units``): chunk 1, then the summary so far (a ``summary``
   item, like a previous fold's) followed by chunk 2, and so on; the last answer is
   the summary.  So a session already over the model's window can still be summarised.
2. **Prompt too long.**  A call that raises ``PromptTooLongError`` (a provider's
   ``PromptTooLong`` is one) is made again without the oldest unit of its items, up to
   ``TRIMS`` times per call; the summary so far and a previous summary are never
   dropped.  ``SummaryResult.dropped`` counts the items left out.
3. **Transient failures.**  Any other exception is retried ``RETRIES`` times per call,
   except ``ConfigError`` and ``PluginError`` (a missing key or plugin stays missing).

Each call gets the request's time limit; a call that outlives it ends the request
(``timed_out``).  A summarizer that declares itself ``bounded`` (it finishes on its own,
quickly: no model, no network, no lock; the built-in ``extractive`` does) is called on
the caller's thread and timed when it returns: a call that took longer than the limit
is answered ``timed_out`` all the same, its text dropped (a timed-out answer is an
answer too).  Any other summarizer is called on a thread of its own, abandoned when it
outlives the limit: starting that thread costs more than the extractive summary of a
turn.  ``instructions`` reach the summarizer when its ``summarize`` takes an
``instructions`` keyword (or ``**kwargs``); a summarizer written before instructions
existed is called without them, and a ``PluginWarning`` says they were not applied.
"""

from __future__ import annotations

import hashlib
import inspect
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any

import msgspec

from ..errors import ConfigError, CtxrulesError, PluginError, PluginWarning, PromptTooLongError
from ..model import ContextItem
from ..plugins import registry
from ..tokenizers import count
from .units import units

__all__ = [
    "RETRIES",
    "TRIMS",
    "SummaryRequest",
    "SummaryResult",
    "accepts_instructions",
    "request_key",
    "run_summarizer",
]

_encoder = msgspec.msgpack.Encoder(order="sorted")


class SummaryRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a rule wants summarized: ``items`` (in order; a previous summary item may be
    first) by the summarizer named ``summarizer`` in about ``budget`` tokens.

    ``key`` identifies the request by its content (summarizer, budget, items,
    instructions): an answer is handed back under it.  ``timeout_seconds`` is the rule's
    time limit for each summarizer call (0: none); ``rule`` names the rule that asked;
    ``instructions`` are the user's words on what the summary should focus on (e.g.
    ``ctxrules compact --instructions``), empty for an automatic fold.
    """

    key: str
    rule: str
    summarizer: str
    items: tuple[ContextItem, ...]
    budget: int
    timeout_seconds: float = 0.0
    instructions: str = ""


class SummaryResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The answer to a ``SummaryRequest``: the summary ``text``, or why there is none.

    ``error`` says what failed (e.g. ``"RuntimeError: model unavailable"``);
    ``timed_out`` says the summarizer did not answer within the request's time limit.
    An empty ``text`` without either means the summarizer returned nothing.  The rule
    that asked records a failure in the commit's notes and folds nothing.  ``dropped``
    counts the items the summary does not cover: the oldest units left out after the
    summarizer said the prompt was too long (they are folded all the same).
    """

    text: str = ""
    error: str = ""
    timed_out: bool = False
    dropped: int = 0

    def problem(self, timeout_seconds: float | None = None) -> str:
        """Why this answer gives no summary, worded to follow "the summarizer": ``timed
        out`` (``after {timeout_seconds}s`` when given), ``failed: {error}`` or
        ``returned nothing``; ``""`` when ``text`` is a summary to use."""
        if self.timed_out:
            return (
                "timed out" if timeout_seconds is None else f"timed out after {timeout_seconds:g}s"
            )
        if self.error:
            return f"failed: {self.error}"
        if not self.text.strip():
            return "returned nothing"
        return ""


def request_key(
    summarizer: str, budget: int, items: Sequence[ContextItem], instructions: str = ""
) -> str:
    """The content key of a request: the same summarizer, budget, items and instructions,
    the same key (without instructions, the key requests had before they existed)."""
    content: tuple[Any, ...] = (summarizer, budget, tuple(items))
    if instructions:
        content += (instructions,)
    digest = hashlib.blake2b(_encoder.encode(content), digest_size=12)
    return f"sr_{digest.hexdigest()}"


_DEFAULT: Any = object()

#: How many more times ``run_summarizer`` calls a summarizer that raised (a transient
#: failure: a dropped connection, an overloaded model) before it reports the error.
RETRIES = 2
#: How many times ``run_summarizer`` drops the oldest unit and calls again after the
#: summarizer said the prompt was too long.
TRIMS = 3
#: Not retried: a missing key, model or plugin stays missing.
_PERMANENT = (ConfigError, PluginError)


def accepts_instructions(summarizer: Any) -> bool:
    """Whether ``summarizer.summarize`` takes an ``instructions`` keyword (or ``**kwargs``)."""
    try:
        params = inspect.signature(summarizer.summarize).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): call it the old way
        return False
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == "instructions" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        for p in params
    )


def run_summarizer(
    request: SummaryRequest,
    *,
    timeout: float | None = _DEFAULT,
    summarizer: Any = None,
    retries: int = RETRIES,
    trims: int = TRIMS,
) -> SummaryResult:
    """Answer ``request`` with the registered summarizer it names (or ``summarizer``).

    Chunks, prompt-too-long trims and retries as the module docstring says.
    ``timeout`` defaults to the request's ``timeout_seconds`` (0 or None: wait for the
    answer).  Python cannot stop a thread, so a summarizer that times out keeps running
    on a daemon thread until it returns; it cannot change anything, since it was handed
    a tuple of immutable items and its result is dropped.  A ``bounded`` summarizer is
    called in-line instead, and its call answered as timed out when it took longer than
    the limit.  The last exception becomes
    ``SummaryResult(error=...)``: a plugin failure never loses content, the rule just
    folds nothing.
    """
    if summarizer is None:
        try:
            summarizer = registry("summarizers").get(request.summarizer)
        except CtxrulesError as exc:  # not installed: no retry will change that
            return SummaryResult(error=f"{type(exc).__name__}: {exc}")
    call = _Call(
        summarizer,
        request,
        request.timeout_seconds if timeout is _DEFAULT else timeout,
        retries=max(0, retries),
        trims=max(0, trims),
    )
    limit = getattr(summarizer, "max_input_tokens", None)
    rounds = units(request.items)
    sizes = [sum(it.tokens for it in unit) for unit in rounds]  # each unit's tokens, once
    if not isinstance(limit, int) or sum(sizes) <= limit:
        return call.answer(rounds, None)
    carry: ContextItem | None = None  # the summary so far
    dropped = 0
    start = 0
    while True:
        room = limit - (carry.tokens if carry is not None else 0)
        # At least one unit per chunk, however large: a refusal then trims it.
        end, used = start + 1, sizes[start]
        while end < len(rounds) and used + sizes[end] <= room:
            used += sizes[end]
            end += 1
        result = call.answer(rounds[start:end], carry)
        start = end
        dropped += result.dropped
        if result.problem() or start == len(rounds):
            return msgspec.structs.replace(result, dropped=dropped)
        carry = _summary_item(result.text)


def _summary_item(text: str) -> ContextItem:
    """The summary so far as the next chunk's first item: a ``summary`` item, as a
    previous fold leaves one, counted with the default tokenizer."""

    return ContextItem(
        source_node_id="sm_chunk",
        role="assistant",
        state="summary",
        rendered=text,
        tokens=count(text),
        reason="summary so far",
    )


class _Call:
    """One summarizer, the request's budget, instructions and time limit, and the
    retry and trim policy of a single call."""

    def __init__(
        self,
        summarizer: Any,
        request: SummaryRequest,
        limit: float | None,
        *,
        retries: int,
        trims: int,
    ) -> None:
        self.summarizer = summarizer
        self.request = request
        self.limit = limit
        # Bounded: called in-line and timed when it returns (see the module docstring).
        self.in_line = getattr(summarizer, "bounded", False) is True
        self.retries = retries
        self.trims = trims
        self.kwargs: dict[str, Any] = {"budget": request.budget}
        if accepts_instructions(summarizer):
            self.kwargs["instructions"] = request.instructions
        elif request.instructions:
            warnings.warn(
                f"summarizer {getattr(summarizer, 'name', summarizer)!r} takes no "
                f"instructions: summarising without them (add an ``instructions`` keyword "
                f"to its summarize method)",
                PluginWarning,
                stacklevel=3,
            )

    def answer(
        self, rounds: Sequence[tuple[ContextItem, ...]], carry: ContextItem | None
    ) -> SummaryResult:
        """The summary of ``carry`` (the summary so far) and ``rounds``, trimmed and
        retried by the policy."""
        rounds = list(rounds)
        dropped = 0
        retries, trims = self.retries, self.trims
        while True:
            items = ((carry,) if carry is not None else ()) + tuple(
                it for unit in rounds for it in unit
            )
            outcome = self._once(items)
            if isinstance(outcome, SummaryResult):
                return msgspec.structs.replace(outcome, dropped=dropped)
            if isinstance(outcome, str):
                return SummaryResult(text=outcome, dropped=dropped)
            oldest = _oldest_droppable(rounds)
            if isinstance(outcome, PromptTooLongError) and trims and oldest is not None:
                trims -= 1
                dropped += len(rounds.pop(oldest))
                continue
            if isinstance(outcome, (PromptTooLongError, *_PERMANENT)) or not retries:
                return SummaryResult(error=f"{type(outcome).__name__}: {outcome}", dropped=dropped)
            retries -= 1

    def _once(self, items: tuple[ContextItem, ...]) -> str | Exception | SummaryResult:
        """One call: the text, the exception it raised, or a timed-out result."""
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["text"] = self.summarizer.summarize(items, **self.kwargs)
            except Exception as exc:  # reported in the result: a plugin failure loses nothing
                outcome["error"] = exc

        if self.limit and self.in_line:
            began = time.monotonic()
            call()
            if time.monotonic() - began > self.limit:
                return SummaryResult(timed_out=True)
        elif self.limit:
            # A daemon thread: a summarizer that hangs is abandoned, and cannot keep the
            # process from exiting (an executor's worker would be joined at exit).
            worker = threading.Thread(target=call, name="ctxrules-summarizer", daemon=True)
            worker.start()
            worker.join(self.limit)
            if worker.is_alive():
                return SummaryResult(timed_out=True)
        else:
            call()
        if "error" in outcome:
            err: Exception = outcome["error"]
            return err
        text = outcome.get("text")
        return text if isinstance(text, str) else ""


def _oldest_droppable(rounds: Sequence[tuple[ContextItem, ...]]) -> int | None:
    """The index of the oldest unit that may be dropped: not a previous summary, and
    never the last one left (a summary of nothing is no summary)."""
    candidates = [i for i, u in enumerate(rounds) if u[0].state != "summary"]
    return candidates[0] if len(candidates) > 1 else None
