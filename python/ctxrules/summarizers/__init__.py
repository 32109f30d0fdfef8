"""Summarizers: turn a run of context items into one summary text.

A summarizer is a plugin registered through ``register_summarizers``; the summarize
rule names one, and the name is checked when the rule is built.  The rule never calls
it: deriving a commit is pure, so the rule asks for a summary (``SummaryRequest``) and
the caller answers it (``run_summarizer``; see ``ctxrules.summarizers.request``).
The built-in ``extractive`` summarizer needs no model: it is offline and
deterministic, and keeps what compaction most often loses: the task statement, the
user's constraints, the files touched, the errors, the open todos and an index of the
exact identifiers (``ctxrules.summarizers.facts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..model import ContextItem
from ..plugins import registry
from .extractive import ExtractiveSummarizer
from .request import (
    SummaryRequest,
    SummaryResult,
    accepts_instructions,
    request_key,
    run_summarizer,
)
from .units import unit_end, units

__all__ = [
    "ExtractiveSummarizer",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "accepts_instructions",
    "get_summarizer",
    "request_key",
    "run_summarizer",
    "unit_end",
    "units",
]


@runtime_checkable
class Summarizer(Protocol):
    """What a summarizer plugin registers.

    ``summarize`` gets the items to fold (in order; a previous summary item may be
    first), a token budget and the user's ``instructions`` (what to focus on; empty
    for an automatic fold), and returns the summary text.  Raise, or return an empty
    string, to refuse: the summarize rule then folds nothing and notes why.  Raise
    ``ctxrules.errors.PromptTooLongError`` when the items did not fit the model: the
    caller drops the oldest unit and asks again.  ``run_summarizer`` retries other
    exceptions (not ``ConfigError`` / ``PluginError``) and abandons a call that outlives
    the request's time limit (the rule's ``timeout_seconds``) but cannot stop it: it
    runs on to its end on a daemon thread and its result is discarded.

    Optional attribute ``max_input_tokens: int | None``: the most item tokens (the
    items' own ``tokens``) one call can take; over it, ``run_summarizer`` hands the
    items over in chunks, each after the summary so far.  Missing or ``None``: no
    limit.  Optional attribute ``bounded: bool``: ``True`` when a call finishes on its
    own, quickly (no model, no network, no lock): ``run_summarizer`` then calls it on the
    caller's thread, and answers a call that took longer than the time limit as timed
    out when it returns.  Missing or ``False``: a thread of its own per call.  A
    ``summarize`` without the ``instructions`` keyword (written before it
    existed) still works: it is called without them, with a ``PluginWarning`` when
    there were some.
    """

    name: str

    def summarize(
        self, items: Sequence[ContextItem], *, budget: int, instructions: str = ""
    ) -> str:
        """The summary of ``items`` in at most about ``budget`` tokens, focused as
        ``instructions`` ask."""
        ...


def get_summarizer(name: str = "extractive") -> Summarizer:
    """The registered summarizer called ``name``."""

    obj: Summarizer = registry("summarizers").get(name)
    return obj
