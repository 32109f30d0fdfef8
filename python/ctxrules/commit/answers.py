"""Summary answers kept in the store, so a summary is asked for once.

Deriving a commit asks for summaries (``SummaryRequest``); the caller answers them.
``stored_answers(store)`` is the answer function the store's commits are made with: it
looks the request's content key up in the store's key/value table (namespace
``summaries``) and only on a miss runs the summarizer, keeping a good answer.  So
regenerating a commit — a rebuilt chain, another process, a compaction's final commit
after its preview — never calls (or bills) the summarizer again, and gets the same
commit, since the same answers give the same commit.

A failed, timed-out or empty answer is not kept: the next derive may ask again (the
summarize rule's back-off decides when).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ..store import Store
from ..summarizers.request import SummaryRequest, SummaryResult, run_summarizer

__all__ = ["NAMESPACE", "Answer", "stored_answers"]

#: The key/value namespace the answers are kept in, under their request's key.
NAMESPACE = "summaries"

#: A function that answers a summary request.
Answer = Callable[[SummaryRequest], SummaryResult]

_decoder = msgspec.json.Decoder(SummaryResult)


def stored_answers(store: Store, answer: Answer | None = None) -> Answer:
    """An answer function that asks ``store`` first and ``answer`` (``None``:
    ``run_summarizer``) only for a request it has no good answer to, keeping that one."""
    fallback = run_summarizer if answer is None else answer

    def ask(request: SummaryRequest) -> SummaryResult:
        raw = store.kv_get(NAMESPACE, request.key)
        if raw is not None:
            try:
                return _decoder.decode(raw)
            except msgspec.DecodeError:
                pass  # a damaged entry is asked again and overwritten
        result = fallback(request)
        if not result.problem():
            store.kv_put(NAMESPACE, request.key, msgspec.json.encode(result))
        return result

    return ask
