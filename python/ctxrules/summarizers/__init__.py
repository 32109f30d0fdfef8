"""Summarizers: turn a run of context items into one summary text.

A summarizer is a plugin registered through ``register_summarizers``; the summarize
rule names one, and the name is checked when the rule is built.  The rule never calls
it: deriving a commit is pure, so the rule asks for a summary (``SummaryRequest``) and
the caller answers it (``run_summarizer``; see ``ctxrules.summarizers.request``).
The built-in ``extractive`` summarizer needs no model: it is offline and
deterministic, and keeps what compaction most often loses: the task statement, the
user's constraints, the files touched, the errors and the open todos.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..model import ContextItem
from .extractive import ExtractiveSummarizer
from .request import SummaryRequest, SummaryResult, request_key, run_summarizer

__all__ = [
    "ExtractiveSummarizer",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "get_summarizer",
    "request_key",
    "run_summarizer",
]


@runtime_checkable
class Summarizer(Protocol):
    """What a summarizer plugin registers.

    ``summarize`` gets the items to fold (in order; a previous summary item may be
    first) and a token budget, and returns the summary text.  Raise, or return an
    empty string, to refuse: the summarize rule then folds nothing and notes why.
    ``run_summarizer`` abandons a call that outlives the request's time limit (the
    rule's ``timeout_seconds``) but cannot stop it: it runs on to its end on a daemon
    thread and its result is discarded.
    """

    name: str

    def summarize(self, items: Sequence[ContextItem], *, budget: int) -> str:
        """The summary of ``items`` in at most about ``budget`` tokens."""
        ...


def get_summarizer(name: str = "extractive") -> Summarizer:
    """The registered summarizer called ``name``."""
    from ..plugins import registry

    obj: Summarizer = registry("summarizers").get(name)
    return obj
