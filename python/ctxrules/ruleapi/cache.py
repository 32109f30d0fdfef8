"""The cache ledger: what a change to the cached prompt costs, and whether it pays.

Every request reads the part of its prompt the previous request left in the provider's
cache (at a tenth of the input price, Anthropic's) and writes the rest (at 1.25 times
it; each model's prices and cache layout: ``CachePricing``, from its profile).  A rule
that shortens an old item saves its tokens on every later request, but the request
that first shows the change cannot read what came after the change from the cache: it
writes it again.  The ledger prices that trade for the rules of one commit:

- **rewrite cost** — what the change makes the provider write again instead of read.
  Rendered requests carry cache breakpoints at the end of the system layers and at the
  end of the request (``ctxrules.render``), and a request finds an entry only at one of
  those, so a change to any cached message rewrites the whole cached conversation (the
  parent commit's tokens).  An automatic prefix cache (OpenAI, Gemini) rewrites only
  from the first changed item on, and bills the write at the input price.  The cost is
  nothing when the cache is **cold** (the previous request is older than the TTL:
  everything is written anyway), when there was no previous request, and when
  something earlier in this commit already changed a cached item: the edits of one
  commit are one rewrite, so the rules that run later batch their own edits into it
  for free (the spirit of Anthropic's ``clear_at_least``: clear rarely, and then a
  lot).
- **payback** — what the change saves: its tokens, read on each later request.  The
  requests to come are not known; the ledger takes as many as the requests of the
  current cache epoch so far (a session that has lasted n requests tends to last about
  n more), bounded by the rule's ``payback`` horizon: a change must pay for itself
  within that many requests.  A compaction ends an epoch (``reset``): it rewrites the
  whole prompt and folds what a rule saved, so savings are counted from there again.

A cache belongs to one model: a request sent to another model than the previous one
finds nothing cached of what that one was sent (the provider caches per model), so a
change there is free, as when the cache is cold — unless the request returns to a model
whose own entry still lives: asked within its TTL, with no cached item changed since
(a change leaves every other model's entry behind, and the ledger forgets it).  Then
the cache is warm, and a change is priced as on that model alone (at the parent's
tokens: what the entry holds is at most that, so the ledger errs on waiting).

The ledger's state lives in value cursors the commit generator keeps (``cache.at``:
when the previous commit was made, in whole seconds; ``cache.requests``: the answers of
the epoch; ``cache.model``: a key of the model the previous commit was priced for,
``model_key``, when the pipeline names one; ``cache.at:<key in hex>``: when the last
commit priced for that model was made, one per model whose entry may live), so a commit
reads it without scanning the history.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, Literal

import msgspec

from ..model import ContextItem

__all__ = [
    "AT",
    "CACHE_READ",
    "CACHE_WRITE",
    "MODEL",
    "MODEL_AT",
    "REQUESTS",
    "TTL_SECONDS",
    "CacheLedger",
    "CachePricing",
    "advance",
    "min_saving",
    "model_at",
    "model_key",
    "reset",
]

#: Prompt-cache prices relative to uncached input, Anthropic's (a read 0.1, a 5-minute
#: write 1.25): the default ``CachePricing``; a model's own come from its profile.
CACHE_READ = 0.1
CACHE_WRITE = 1.25
#: How long the previous request's cache entry lives without use (Anthropic's default
#: ``5m``; OpenAI's automatic cache about as long).
TTL_SECONDS = 300.0
#: Anthropic's price of a one-hour cache write (``cache_control.ttl = "1h"``).
ANTHROPIC_LONG_WRITE = 2.0
#: The ledger's cursors (plain values, not positions).
AT = "cache.at"
REQUESTS = "cache.requests"
MODEL = "cache.model"
#: Prefix of the per-model cursors: ``cache.at:<model_key in hex>`` is when the last
#: commit priced for that model was made (``model_at``).
MODEL_AT = "cache.at:"

Layout = Literal["breakpoints", "prefix", "none"]


class CachePricing(msgspec.Struct, frozen=True, kw_only=True):
    """A model's prompt cache as the ledger prices it: a cache ``read`` and a ``write``
    relative to the uncached input price, how long an entry lives unused
    (``ttl_seconds``) and its ``layout``.

    ``"breakpoints"`` (Anthropic): a request finds an entry only at its breakpoints, so
    a change to any cached message rewrites the whole cached conversation;
    ``"prefix"`` (OpenAI, Gemini): the provider caches the longest shared prefix by
    itself, with no write premium; ``"none"``: nothing is cached, every change is
    free.  The default is Anthropic's (0.1 / 1.25, five minutes).
    """

    read: float = CACHE_READ
    write: float = CACHE_WRITE
    ttl_seconds: float = TTL_SECONDS
    layout: Layout = "breakpoints"

    @classmethod
    def of(cls, profile: Any, cache_rule: str, *, ttl_seconds: float | None = None) -> CachePricing:
        """The pricing of a model: its ``ModelProfile`` (``prices``: cache read and write
        per uncached input token) under its provider's ``cache_rule``
        (``Provider.cache_rule``), entries living ``ttl_seconds`` (longer than five
        minutes with breakpoints: Anthropic's one-hour entries, whose writes cost twice
        the input price).  A model without prices keeps the default ratios of its
        layout."""
        if cache_rule == "none":
            return cls(read=1.0, write=1.0, layout="none")
        layout: Layout = "breakpoints" if cache_rule == "anthropic-breakpoints" else "prefix"
        read, write = (CACHE_READ, CACHE_WRITE) if layout == "breakpoints" else (0.5, 1.0)
        prices = getattr(profile, "prices", None)
        if prices is not None and prices.input > 0:
            # Rounded: $0.30 / $3.00 is Anthropic's 0.1, not 0.09999999999999999.
            read = round(prices.cache_read / prices.input, 6)
            write = round(prices.cache_write / prices.input, 6)
        ttl = ttl_seconds if ttl_seconds is not None else TTL_SECONDS
        if layout == "breakpoints" and ttl > TTL_SECONDS:
            # Anthropic bills a one-hour entry's write at twice the input price, not at
            # the 1.25 times of the profile's (five-minute) cache_write.
            write = round(write * ANTHROPIC_LONG_WRITE / CACHE_WRITE, 6)
        return cls(read=read, write=max(write, read), ttl_seconds=ttl, layout=layout)

    @classmethod
    def for_model(cls, provider: Any, model: str, *, cache_ttl: str | None = None) -> CachePricing:
        """How ``provider``'s prompt cache bills ``model`` (a ``Provider``): its profile
        under the provider's ``cache_rule`` (``of``), entries living ``cache_ttl``
        (``"5m"``, the default, or ``"1h"``); Anthropic's when the model has no
        profile.  What the engine and the proxy price their rules with."""
        # Deferred: the providers package is heavy, and most users of the ledger (a
        # rule, a commit) never price a model by name.
        from ..errors import CtxrulesError
        from ..providers.cache import TTL_SECONDS as VENDOR_TTLS

        try:
            profile = provider.model_profile(model)
        except CtxrulesError:
            return cls()
        ttl = VENDOR_TTLS.get(cache_ttl or "5m", VENDOR_TTLS["5m"])
        return cls.of(profile, provider.cache_rule, ttl_seconds=ttl)

    def signature(self) -> str:
        """The pricing in a line, for a pipeline's version (``""`` for the default:
        the versions of pipelines priced as Anthropic's do not change)."""
        if self == DEFAULT_PRICING:
            return ""
        return f"cache={self.layout}:{self.read:.4g}/{self.write:.4g}/{self.ttl_seconds:g}"


DEFAULT_PRICING = CachePricing()


def min_saving(rewrite: int, horizon: int, pricing: CachePricing = DEFAULT_PRICING) -> int:
    """The fewest tokens a change must take off the prompt to pay for making the provider
    write ``rewrite`` cached tokens again instead of reading them, when each of the
    next ``horizon`` requests reads the saving fewer.

    This request: without the change it reads ``R`` (``rewrite``); with it, it writes
    ``R − S`` (``S`` the saving): ``(write − read)·R − write·S`` more.  Later requests:
    ``read·S·horizon`` less.  So ``S ≥ (write − read)·R / (read·horizon + write)``; 0
    when nothing cached is rewritten."""
    if rewrite <= 0 or pricing.layout == "none":
        return 0
    extra = (pricing.write - pricing.read) * rewrite
    if extra <= 0:
        return 0
    return math.ceil(extra / (pricing.read * max(1, horizon) + pricing.write))


def model_key(model: str) -> int:
    """The ``cache.model`` cursor's value for ``model``: a 48-bit hash of its name (a
    cursor holds an integer; 48 bits stay exact as a JSON number)."""
    return int.from_bytes(hashlib.blake2b(model.encode(), digest_size=6).digest(), "big")


def model_at(model: str) -> str:
    """The cursor holding when the last commit priced for ``model`` was made."""
    return f"{MODEL_AT}{model_key(model):x}"


def _forget_others(cursors: MutableMapping[str, int], keep: str | None) -> None:
    """Drop every model's entry but ``keep``'s: what they cached no longer matches."""
    for key in [k for k in cursors if k.startswith(MODEL_AT) and k != keep]:
        del cursors[key]


def _answers(items: Sequence[ContextItem], positions: Sequence[int]) -> int:
    return sum(1 for p in positions if items[p].role == "assistant" and items[p].state != "summary")


def advance(
    cursors: MutableMapping[str, int],
    items: Sequence[ContextItem],
    new_positions: Sequence[int],
    now: float,
    model: str = "",
    *,
    changed: bool = False,
) -> None:
    """Record a derived commit in the ledger: its time, the answers it added and the
    model it was priced for (``model``; ``""``, not known: the record is dropped, so
    the next commit does not take its cache for another model's), whose entry now
    lives from ``now``.  ``changed``: the commit changed a cached item, so no other
    model's entry matches the prompt any more (they are forgotten)."""
    cursors[AT] = int(now)
    cursors[REQUESTS] = cursors.get(REQUESTS, 0) + _answers(items, new_positions)
    if not model:
        if changed:
            _forget_others(cursors, None)
        cursors.pop(MODEL, None)
        return
    mine = model_at(model)
    if changed:
        _forget_others(cursors, mine)
    cursors[MODEL] = model_key(model)
    cursors[mine] = int(now)


def reset(cursors: MutableMapping[str, int]) -> None:
    """Start a new cache epoch (a compaction rewrote the prompt: only the model it was
    made for keeps an entry)."""
    cursors[REQUESTS] = 0
    previous = cursors.get(MODEL)
    _forget_others(cursors, None if previous is None else f"{MODEL_AT}{previous:x}")


class CacheLedger:
    """The cache trade of one commit being derived (``RuleContext.cache``).

    ``cached_tokens``: the parent commit's tokens, what the provider holds (0 without a
    parent); ``rewritten``: whether a cached item already changed in this commit
    (then further changes cost nothing more); ``cold``: whether nothing is cached for
    this request — the cache expired, or the previous commit was priced for another
    model and this one's own entry (``model``: the one this commit is priced for;
    ``""`` when not known) is gone or expired;
    ``pricing``: the model's cache prices and TTL (``CachePricing``; the pipeline's).
    """

    def __init__(
        self,
        *,
        now: float,
        cursors: Mapping[str, Any],
        cached_tokens: int,
        has_parent: bool,
        rewritten: Any,
        pricing: CachePricing = DEFAULT_PRICING,
        tokens_from: Any = None,
        model: str = "",
    ) -> None:
        self.now = now
        self.pricing = pricing
        self._tokens_from = tokens_from  # a callable: cached tokens from a position on
        self.cached_tokens = cached_tokens if has_parent and pricing.layout != "none" else 0
        self._rewritten = rewritten  # a callable: whether a cached item changed so far
        at = cursors.get(AT)
        # Without a record of the previous commit (a parent made before the ledger, or
        # under other rules) the cache is taken as warm: the ledger errs on waiting.
        expired = at is not None and now - at > pricing.ttl_seconds
        # The provider caches per model: after a request to another model, this one
        # finds only its own entry, if it lives (``advance`` forgets it once a cached
        # item changed).  Unknown on either side: taken as the same model.
        previous = cursors.get(MODEL)
        if model and previous is not None and previous != model_key(model):
            back = cursors.get(model_at(model))
            expired = back is None or now - back > pricing.ttl_seconds
        self.cold = has_parent and expired
        self.requests = int(cursors.get(REQUESTS, 0))

    @property
    def rewritten(self) -> bool:
        """Whether this commit already changed a cached item (the rewrite is paid)."""
        return bool(self._rewritten())

    def rewrite_tokens(self, at: int | None = None) -> int:
        """The tokens a change to a cached item (the first at position ``at``) makes the
        provider write again instead of reading them: nothing when the cache is cold,
        there is none, or the rewrite is already paid for by an earlier change of this
        commit.  With breakpoints, the whole cached conversation; with a prefix cache,
        what comes from ``at`` on (all of it when ``at`` is not given).  (With a prefix
        cache an earlier change after ``at`` is taken as paying for this one too, which
        errs on acting; rules change the oldest items first.)"""
        if self.cold or not self.cached_tokens or self.rewritten:
            return 0
        if self.pricing.layout == "prefix" and at is not None and self._tokens_from is not None:
            return min(self.cached_tokens, int(self._tokens_from(at)))
        return self.cached_tokens

    def horizon(self, payback: int) -> int:
        """The later requests a saving is counted over: the requests of the epoch so
        far, at most ``payback`` (at least 1)."""
        return max(1, min(self.requests, payback))

    def pays(self, saved: int, *, payback: int, at: int | None = None) -> bool:
        """Whether changing cached items so that the prompt is ``saved`` tokens shorter
        costs less than it saves within ``payback`` later requests.

        This request: without the change it would read ``R`` cached tokens; with it, it
        writes ``R − saved`` (``R``: ``rewrite_tokens``).  Each later request reads
        ``saved`` tokens fewer.  Free changes (cold cache, rewrite already paid) pay
        whenever they save anything.  ``at``: the position of the first cached item
        the change touches (``rewrite_tokens``).
        """
        return not self.refusal(saved, payback=payback, at=at)

    def refusal(self, saved: int, *, payback: int, at: int | None = None) -> str:
        """``""`` when the change pays (``pays``), else why not in words (``why_not``):
        one reckoning of the rewrite for a rule that notes why it waits."""
        rewrite = self.rewrite_tokens(at)
        if saved > 0:
            if rewrite == 0:
                return ""
            read, write = self.pricing.read, self.pricing.write
            extra = max(0, rewrite - saved) * write - rewrite * read
            if saved * read * self.horizon(payback) >= extra:
                return ""
        return self._words(saved, payback, rewrite)

    def why_not(self, saved: int, *, payback: int, at: int | None = None) -> str:
        """In words, why a change saving ``saved`` tokens does not pay (for notes)."""
        return self._words(saved, payback, self.rewrite_tokens(at))

    def _words(self, saved: int, payback: int, rewrite: int) -> str:
        return (
            f"would not pay yet: ~{saved:,} tokens fewer on each of the next "
            f"{self.horizon(payback)} request(s) against rewriting ~{rewrite:,} cached tokens"
        )
