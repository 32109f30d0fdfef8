"""When the engine compacts on its own: when the request must shrink, or when it pays.

A compaction rewrites the prompt the provider has cached: the request after it writes
the summary and everything after it again (at Anthropic's 1.25 times the input price)
where it would have read the conversation at a tenth.  Compacting at the first
request past the threshold while the cache is warm therefore bills more than not
compacting, again at every compaction.  So at the ``compact`` level the engine prices
the rewrite with the cache ledger (``ctxrules.ruleapi.cache.min_saving``, the same
arithmetic the cache-aware rules use, at the model's prices) and compacts only when

- the rewrite is **free**: the cache went cold (more than its TTL since the previous
  request, from the engine's record of it or the time of the last answer), the model
  changed (a cache belongs to one model), or the rules of this commit already rewrote
  the cached prefix (the previous request's cache holds little of this one); or
- it **pays**: the compaction takes at least ``min_saving`` tokens off the request,
  so that the saving read on each of the next requests (as many as came since the
  last compaction, at most ``COMPACTION_PAYBACK``) covers the rewrite.

At the ``critical`` level the hard limit forces it: a request must never outgrow the
model's window, whatever the cache.  Either way a compaction is not made when it could
not make the request smaller (``futile``) and, once summarised, is dropped when the
request it leaves (restore message included) is not smaller by the saving asked
(``ctxrules.compaction.compact``'s ``min_saving_tokens``: declined, not a failure).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..model import ContextItem
from ..ruleapi import COMPACTION_REASON
from ..ruleapi.cache import CachePricing, min_saving

__all__ = [
    "COMPACTION_PAYBACK",
    "MIN_COMPACTABLE_SHARE",
    "MIN_REGROWTH_SHARE",
    "Sent",
    "compaction_price",
    "futile",
]

#: A compaction is not made when the history the engine holds is less than this share
#: of the measured request: folding it could not make the request much smaller.
MIN_COMPACTABLE_SHARE = 0.1
#: Nor before the conversation after the last compaction holds this share of the
#: compaction threshold: compacting again sooner rewrites the whole cached prompt to
#: save little (a threshold under what a compaction leaves would compact every turn).
MIN_REGROWTH_SHARE = 0.5
#: The most later requests a compaction's saving is counted over when the cache is
#: warm (chosen on the corpus's fit set: benches/README.md, "Quality against cost").
COMPACTION_PAYBACK = 3


class Sent(NamedTuple):
    """The previous request of a session as the engine prepared it: when, for which
    model, and its estimate (the core's, with its segments: what the cache holds)."""

    at: float
    model: str
    estimate: Any


def since_compaction(items: Sequence[ContextItem]) -> tuple[int | None, int]:
    """Tokens shown after the summary of the last compaction (``None``: none on the
    branch) and the answers since then (all of the branch's without one): the
    requests of the cache epoch so far."""
    tokens: int | None = None
    answers = 0
    for p in range(len(items) - 1, -1, -1):
        it = items[p]
        if it.state == "summarized":
            continue
        if it.state == "summary" and it.reason.startswith(COMPACTION_REASON):
            tokens = sum(i.tokens for i in items[p + 1 :] if i.state != "summarized")
            break
        if it.role == "assistant" and it.state != "summary":
            answers += 1
    return tokens, answers


def _held(prep: Any, tokens: int) -> int:
    """The part of ``tokens`` (a request's, or a prefix of it) that is the history the
    engine holds: what is left past ``prep``'s system prompt and tools."""
    return max(0, tokens - prep.budget.system - prep.budget.tools)


def futile(prep: Any) -> str:
    """Why compacting before ``prep`` (a ``TurnPrep``) could not help (``""``: it could):
    the history the engine holds (our estimate less the system prompt and tools) is
    under ``MIN_COMPACTABLE_SHARE`` of the measured request — what makes the request
    large is text the engine does not hold (a harness's, or a conversation from before
    the recording) — or too little came since the last compaction
    (``MIN_REGROWTH_SHARE``); either way a compaction would mostly rewrite the cached
    prompt, and again at the next request."""
    plan, tokens = prep.budget, prep.tokens
    history = _held(prep, tokens.estimate)
    if history < MIN_COMPACTABLE_SHARE * tokens.fused:
        return (
            f"not compacted: the request is {tokens.fused:,} tokens and the history the "
            f"engine holds only {history:,}: the rest is text the engine does not hold"
        )
    since, _ = since_compaction(prep.commit.items)
    if since is not None and since < MIN_REGROWTH_SHARE * plan.compact_tokens:
        return (
            f"not compacted: only {since:,} tokens came since the last compaction (less "
            f"than {MIN_REGROWTH_SHARE:.0%} of the threshold {plan.compact_tokens:,})"
        )
    return ""


def compaction_price(
    prep: Any,
    previous: Sent | None,
    last_answer: tuple[float, str | None] | None,
    *,
    pricing: CachePricing,
    now: float,
    own: Sent | None = None,
) -> tuple[int, str]:
    """The fewest tokens a compaction before ``prep`` must save to pay for its rewrite
    of the cached prompt (0: the rewrite is free), and why, in words.

    ``previous`` is the engine's record of the session's previous request (``None``:
    it prepared none); ``last_answer`` the time and request model of the branch's last
    answer (``None``: no answer yet), which stands in for it; ``own`` the engine's
    record of the session's last request to ``prep``'s model, which is what that
    model has cached when the previous request went to another one.  What is cached
    is the history this request shares with that request (all of it when the engine
    did not prepare one); ``pricing`` prices the rewrite."""
    if pricing.layout == "none":
        return 0, "the provider caches nothing"
    if previous is not None:
        at, model = previous.at, previous.model
    elif last_answer is not None:
        at, model = last_answer[0], last_answer[1] or prep.model
    else:
        return 0, "nothing is cached yet"
    if model != prep.model:
        # A cache is per model: what this model holds is its own last request's, if
        # that entry lives (a return to it), else nothing.
        if own is None or own.model != prep.model or own.at > now:
            return 0, f"the model changed ({model} → {prep.model}): nothing of it is cached"
        previous, at = own, own.at
    elapsed = max(0.0, now - at)
    if elapsed > pricing.ttl_seconds:
        return 0, f"the cache went cold ({elapsed:,.0f} s since the previous request)"
    history = _held(prep, prep.tokens.estimate)
    cached = history
    current = prep.request.estimate
    if previous is not None and previous.estimate is not None and current is not None:
        # What this request shares with the previous one, not what the cache rules
        # predict it reads: a request under the model's cache minimum by our count may
        # carry text we do not hold (a harness's), so the shared prefix errs on waiting.
        _, shared = current.shared_prefix(previous.estimate)
        cached = min(history, _held(prep, shared))
        if cached < MIN_COMPACTABLE_SHARE * _held(prep, previous.estimate.input_tokens):
            return 0, "this request rewrites the cached prefix already"
    _, answers = since_compaction(prep.commit.items)
    horizon = max(1, min(answers, COMPACTION_PAYBACK))
    need = min_saving(cached, horizon, pricing)
    return need, (
        f"the cache is warm: a compaction must save ~{need:,} tokens to pay for rewriting "
        f"~{cached:,} cached tokens within {horizon} request(s)"
    )
