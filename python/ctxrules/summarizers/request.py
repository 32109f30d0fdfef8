"""Summary requests: how a rule asks for a summary without calling a summarizer.

Deriving a commit is a pure function of its inputs, so a rule never runs a summarizer
(a model call, a plugin, a clock).  It asks the ``RuleContext`` for the summary of some
items; when the caller handed that summary in, the rule gets it, otherwise the request
is recorded and the derived commit is returned with it (``Generated.requests``).  The
caller answers each request (``run_summarizer`` runs the registered summarizer within
the request's time limit) and derives again with the answers as input: the same
answers give the same commit, however long they took to obtain.

``ctxrules.commit.derive_with_summaries`` does that loop in one call.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import msgspec

from ..model import ContextItem

__all__ = ["SummaryRequest", "SummaryResult", "request_key", "run_summarizer"]

_encoder = msgspec.msgpack.Encoder(order="sorted")


class SummaryRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a rule wants summarized: ``items`` (in order; a previous summary item may be
    first) by the summarizer named ``summarizer`` in about ``budget`` tokens.

    ``key`` identifies the request by its content (summarizer, budget, items,
    instructions): an answer is handed back under it.  ``timeout_seconds`` is the
    rule's time limit for obtaining the answer (0: none); ``rule`` names the rule that
    asked; ``instructions`` what the summary should keep or focus on (a compaction's
    user instructions; ``""``: none).
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
    that asked records a failure in the commit's notes and folds nothing.
    """

    text: str = ""
    error: str = ""
    timed_out: bool = False


def request_key(
    summarizer: str, budget: int, items: Sequence[ContextItem], instructions: str = ""
) -> str:
    """The content key of a request: the same summarizer, budget, items and instructions,
    the same key (a request without instructions keeps the key it always had)."""
    parts: tuple[object, ...] = (summarizer, budget, tuple(items))
    if instructions:
        parts += (instructions,)
    digest = hashlib.blake2b(_encoder.encode(parts), digest_size=12)
    return f"sr_{digest.hexdigest()}"


_DEFAULT: Any = object()

#: How many more times ``run_summarizer`` calls a summarizer that raised (a transient
#: failure: a dropped connection, an overloaded model) before it reports the error.
RETRIES = 2


def run_summarizer(
    request: SummaryRequest,
    *,
    timeout: float | None = _DEFAULT,
    summarizer: Any = None,
    retries: int = RETRIES,
) -> SummaryResult:
    """Answer ``request`` with the registered summarizer it names (or ``summarizer``).

    ``timeout`` defaults to the request's ``timeout_seconds`` (0 or None: wait for the
    answer).  Python cannot stop a thread, so a summarizer that times out keeps running
    on a daemon thread until it returns; it cannot change anything, since it was handed
    a tuple of immutable items and its result is dropped.  A summarizer that raises is
    called again up to ``retries`` times (a time-out is not retried: the rule backs
    off); the last exception becomes ``SummaryResult(error=...)``: a plugin failure
    never loses content, the rule just folds nothing.
    """
    if summarizer is None:
        from ..errors import CtxrulesError
        from ..plugins import registry

        try:
            summarizer = registry("summarizers").get(request.summarizer)
        except CtxrulesError as exc:  # not installed: no retry will change that
            return SummaryResult(error=f"{type(exc).__name__}: {exc}")
    result = _run_once(request, timeout, summarizer)
    for _ in range(max(0, retries)):
        if not result.error:
            break
        result = _run_once(request, timeout, summarizer)
    return result


def _run_once(request: SummaryRequest, timeout: float | None, summarizer: Any) -> SummaryResult:
    limit = request.timeout_seconds if timeout is _DEFAULT else timeout
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["text"] = summarizer.summarize(request.items, budget=request.budget)
        except Exception as exc:  # reported in the result: a plugin failure loses nothing
            outcome["error"] = exc

    if limit:
        # A daemon thread: a summarizer that hangs is abandoned, and cannot keep the
        # process from exiting (an executor's worker would be joined at exit).
        worker = threading.Thread(target=call, name="ctxrules-summarizer", daemon=True)
        worker.start()
        worker.join(limit)
        if worker.is_alive():
            return SummaryResult(timed_out=True)
    else:
        call()
    if "error" in outcome:
        err = outcome["error"]
        return SummaryResult(error=f"{type(err).__name__}: {err}")
    text = outcome.get("text")
    return SummaryResult(text=text if isinstance(text, str) else "")
