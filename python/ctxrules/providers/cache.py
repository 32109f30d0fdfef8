"""Prompt-cache prediction: what the vendor would read from and write to its cache.

Given the estimated segments of the previous request and of this one (see
``ctxrules.providers.estimate``), and the seconds between them, each vendor's rules
decide ``read_tokens`` (billed as cache reads) and ``write_tokens`` (cache writes):

* **Anthropic** (explicit breakpoints): a ``cache_control`` marker writes the prefix
  up to it, if that prefix is at least the model's ``cache_min_tokens``; the entry
  lives for its TTL (``"5m"`` default, ``"1h"``), refreshed by every hit.  A request
  reads the longest prefix written by the previous one that ends at or at most 20
  blocks before one of its own breakpoints, and writes from there to its last
  cacheable breakpoint.  Without breakpoints nothing is cached.
* **OpenAI** (automatic prefix caching): prompts of 1,024 tokens or more; the shared
  prefix with the previous request is read in steps of 128 tokens from 1,024 on.  No
  writes are billed.  An entry lives about 5 minutes without use (``"24h"`` with
  ``prompt_cache_retention``).
* **Gemini** (implicit caching): the shared prefix is read once the prompt reaches the
  model's ``cache_min_tokens``; no writes are billed; a hit is likely, not
  guaranteed, so this is the best case.  Entries assumed to live 5 minutes.

The previous request's cache is warm when the seconds between the two requests are at
most the TTL; ``elapsed=None`` (times unknown) is taken as warm.

The rules read an estimate through four things both kinds of estimate have (the
specification's ``PromptEstimate`` and the core's ``RequestEstimate``, whose segments
stay in the core): ``input_tokens``, ``breakpoints()``, ``cumulative(i)`` and
``shared_prefix(previous)``.  A cache entry is a prefix of segments: an entry the
previous request wrote at its segment ``i`` is the prefix this request has at ``i``
exactly when the two share their first ``i + 1`` segments.
"""

from __future__ import annotations

import msgspec

from .estimate import Estimate

__all__ = [
    "ANTHROPIC_LOOKBACK_BLOCKS",
    "CACHE_RULES",
    "OPENAI_CACHE_MIN_TOKENS",
    "OPENAI_CACHE_STEP_TOKENS",
    "TTL_SECONDS",
    "CachePrediction",
    "predict_anthropic",
    "predict_cache",
    "predict_none",
    "predict_prefix",
    "shared_prefix",
]

#: Anthropic's cache TTLs by ``cache_control.ttl``.
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
#: How many blocks before a breakpoint Anthropic looks for an earlier cache entry.
ANTHROPIC_LOOKBACK_BLOCKS = 20
#: OpenAI caches prompts from 1,024 tokens on, in 128-token steps.
OPENAI_CACHE_MIN_TOKENS = 1_024
OPENAI_CACHE_STEP_TOKENS = 128
#: How long an automatic (OpenAI, Gemini implicit) cache entry is assumed to live.
AUTOMATIC_TTL_SECONDS = 300.0


class CachePrediction(msgspec.Struct, frozen=True, kw_only=True):
    """The predicted cache use of one request.

    ``read_tokens`` / ``write_tokens`` are what usage would bill as cache reads and
    writes; ``shared_tokens`` the leading tokens identical to the previous request
    (reads never exceed it); ``rule`` names the vendor rule applied; ``warm`` whether
    the previous request's entries were still alive (``None``: no previous request);
    ``reason`` says in words why the figures are what they are.
    """

    read_tokens: int = 0
    write_tokens: int = 0
    shared_tokens: int = 0
    shared_segments: int = 0
    rule: str = "none"
    warm: bool | None = None
    ttl_seconds: float | None = None
    elapsed_seconds: float | None = None
    min_tokens: int | None = None
    reason: str = ""


def shared_prefix(previous: Estimate, current: Estimate) -> tuple[int, int]:
    """(segments, tokens) at the start of ``current`` identical to ``previous``."""
    return current.shared_prefix(previous)


def _warm(elapsed: float | None, ttl: float) -> bool:
    return elapsed is None or elapsed <= ttl


def predict_none(previous: Estimate | None, current: Estimate, **_: object) -> CachePrediction:
    """A vendor without a prompt cache (or one ctxrules does not model)."""
    return CachePrediction(rule="none", reason="no prompt-cache rules known for this provider")


def predict_anthropic(
    previous: Estimate | None,
    current: Estimate,
    *,
    elapsed: float | None,
    min_tokens: int | None,
) -> CachePrediction:
    """Anthropic's explicit breakpoints, minimum cacheable length and TTL."""
    minimum = min_tokens or 0
    bps = current.breakpoints()
    n_shared, shared = current.shared_prefix(previous) if previous else (0, 0)
    base = CachePrediction(
        rule="anthropic-breakpoints",
        shared_tokens=shared,
        shared_segments=n_shared,
        min_tokens=min_tokens,
        elapsed_seconds=elapsed,
    )
    if not bps:
        return msgspec.structs.replace(
            base, reason="no cache_control breakpoint: nothing is cached"
        )
    cacheable = [cum for _, cum, _ in bps if cum >= minimum]
    write_end = cacheable[-1] if cacheable else 0
    read, warm, ttl = 0, None, None
    if previous is not None:
        # Entries the previous request wrote (or refreshed), by segment, with their TTLs.
        entries = {
            i: TTL_SECONDS.get(t, 300.0) for i, cum, t in previous.breakpoints() if cum >= minimum
        }
        ttl = max(entries.values(), default=None)
        alive = {i for i, t in entries.items() if _warm(elapsed, t)}
        warm = bool(alive) if entries else _warm(elapsed, 300.0)
        for b, _, _ in bps:
            for j in range(b, max(-1, b - ANTHROPIC_LOOKBACK_BLOCKS - 1), -1):
                # The entry at j is this request's prefix through j when the first
                # j + 1 segments are shared.
                if j in alive and j < n_shared:
                    read = max(read, current.cumulative(j))
                    break
    write = max(0, write_end - read)
    if not cacheable:
        reason = f"the prefix at each breakpoint is under the model's {minimum:,}-token minimum"
    elif previous is None:
        reason = "no previous request: the prefix up to the last breakpoint is written"
    elif not warm:
        reason = f"the previous request's cache expired ({elapsed:.0f} s since it)"
    elif read == 0:
        reason = "no breakpoint of the previous request is a prefix of this one"
    else:
        reason = "reads what the previous request wrote, writes the rest up to the last breakpoint"
    return msgspec.structs.replace(
        base, read_tokens=read, write_tokens=write, warm=warm, ttl_seconds=ttl, reason=reason
    )


def predict_prefix(
    previous: Estimate | None,
    current: Estimate,
    *,
    elapsed: float | None,
    min_tokens: int | None,
    step: int = 1,
    ttl: float = AUTOMATIC_TTL_SECONDS,
    rule: str = "automatic-prefix",
) -> CachePrediction:
    """Automatic prefix caching: the shared prefix, once the prompt reaches ``min_tokens``,
    read in ``step``-token increments above the minimum; no writes billed."""
    minimum = min_tokens or 0
    n_shared, shared = current.shared_prefix(previous) if previous else (0, 0)
    base = CachePrediction(
        rule=rule,
        shared_tokens=shared,
        shared_segments=n_shared,
        min_tokens=min_tokens,
        elapsed_seconds=elapsed,
        ttl_seconds=ttl,
    )
    if previous is None:
        return msgspec.structs.replace(base, reason="no previous request")
    warm = _warm(elapsed, ttl)
    if not warm:
        return msgspec.structs.replace(
            base,
            warm=False,
            reason=f"the cache expired ({elapsed:.0f} s since the previous request)",
        )
    if current.input_tokens < minimum or shared < minimum:
        return msgspec.structs.replace(
            base, warm=True, reason=f"under the {minimum:,}-token minimum for caching"
        )
    read = minimum + (shared - minimum) // step * step
    return msgspec.structs.replace(
        base, read_tokens=read, warm=True, reason="the shared prefix is read from the cache"
    )


#: The cache rules a provider can name (``Provider.cache_rule``).
CACHE_RULES = ("none", "anthropic-breakpoints", "openai-automatic-prefix", "gemini-implicit")


def predict_cache(
    rule: str,
    previous: Estimate | None,
    current: Estimate,
    *,
    elapsed: float | None,
    min_tokens: int | None,
    step: int = 1,
) -> CachePrediction:
    """The prediction of the named rule (``CACHE_RULES``); an unknown rule predicts none."""
    if rule == "anthropic-breakpoints":
        return predict_anthropic(previous, current, elapsed=elapsed, min_tokens=min_tokens)
    if rule in ("openai-automatic-prefix", "gemini-implicit"):
        return predict_prefix(
            previous, current, elapsed=elapsed, min_tokens=min_tokens, step=step, rule=rule
        )
    return predict_none(previous, current)
