"""The cache ledger at each model's prices (``CachePricing``): Anthropic's breakpoints
with a write premium, OpenAI's and Gemini's prefix caches without one; a prefix cache
rewrites only what follows the first changed item; ``min_saving`` is the boundary of
``CacheLedger.pays``; the engine prices its pipeline for its model."""

from __future__ import annotations

import pytest

from ctxrules.engine import Engine, EngineConfig
from ctxrules.providers import get_provider
from ctxrules.ruleapi import CacheLedger
from ctxrules.ruleapi.cache import AT, REQUESTS, CachePricing, min_saving
from ctxrules.store import MemoryStore


def _ledger(pricing: CachePricing, *, cached: int, requests: int, tokens_from=None):
    return CacheLedger(
        now=10_000.0,
        cursors={AT: 9_940, REQUESTS: requests},
        cached_tokens=cached,
        has_parent=True,
        rewritten=lambda: False,
        pricing=pricing,
        tokens_from=tokens_from,
    )


def test_a_models_prices_come_from_its_profile():
    openai = get_provider("openai-chat")
    profile = openai.model_profile("gpt-4o")
    prices = profile.prices
    assert prices is not None and prices.cache_write == prices.input  # no write premium
    priced = CachePricing.of(profile, openai.cache_rule)
    assert priced.layout == "prefix"
    assert priced.read == pytest.approx(prices.cache_read / prices.input)
    assert priced.write == pytest.approx(1.0)
    anthropic = get_provider("anthropic")
    sonnet = CachePricing.of(anthropic.model_profile("claude-sonnet-4-5"), anthropic.cache_rule)
    assert sonnet == CachePricing()  # the default is Anthropic's: 0.1 / 1.25, breakpoints
    assert sonnet.signature() == "" and priced.signature().startswith("cache=prefix:")
    assert CachePricing.of(profile, "none").layout == "none"


@pytest.mark.parametrize("pricing", [CachePricing(), CachePricing(read=0.5, write=1.0)])
@pytest.mark.parametrize(("cached", "requests"), [(10_000, 1), (10_000, 3), (40_000, 20)])
def test_min_saving_is_where_a_change_starts_to_pay(pricing, cached, requests):
    ledger = _ledger(pricing, cached=cached, requests=requests)
    need = min_saving(cached, ledger.horizon(20), pricing)
    assert 0 < need < cached
    assert ledger.pays(need, payback=20) and not ledger.pays(need - 1, payback=20)


def test_a_prefix_cache_rewrites_only_what_follows_the_change():
    cached = 10_000
    after = {0: cached, 7: 1_500}  # the parent's tokens from each position on
    prefix = _ledger(
        CachePricing(read=0.5, write=1.0, layout="prefix"),
        cached=cached,
        requests=3,
        tokens_from=after.__getitem__,
    )
    assert prefix.rewrite_tokens() == cached and prefix.rewrite_tokens(at=0) == cached
    assert prefix.rewrite_tokens(at=7) == 1_500
    # A change near the end pays where the same change at the start would not.
    assert prefix.pays(400, payback=3, at=7) and not prefix.pays(400, payback=3, at=0)
    breakpoints = _ledger(CachePricing(), cached=cached, requests=3, tokens_from=after.__getitem__)
    assert breakpoints.rewrite_tokens(at=7) == cached  # Anthropic: the whole conversation


def test_the_engine_prices_its_pipeline_for_its_model():
    openai = Engine(MemoryStore(), EngineConfig(provider="openai-chat", model="gpt-4o"))
    assert openai.pipeline.cache.layout == "prefix"
    assert openai.pipeline.cache == openai.pricing("gpt-4o")
    anthropic = Engine(MemoryStore(), EngineConfig(provider="anthropic", cache_ttl="1h"))
    assert anthropic.pipeline.cache.layout == "breakpoints"
    assert anthropic.pipeline.cache.ttl_seconds == 3600.0
    assert anthropic.pipeline.cache.write == pytest.approx(2.0)  # a one-hour write
    # The prices decide when the cache-aware rules act: each pricing has its version
    # (tests/engine/test_priced_commits.py).
    assert openai.pipeline.version != anthropic.pipeline.version
