"""The engine prices a model's cache once while the provider gives the same profile for
it (``Engine.pricing``; every request is committed with its model's pricing,
``Engine.pipeline_for``), and prices it anew when the profile changes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from ctxrules import dag
from ctxrules.config import PipelineConfig
from ctxrules.engine import Engine, EngineConfig
from ctxrules.model import TextBlock
from ctxrules.ruleapi.cache import CachePricing
from ctxrules.store import MemoryStore

from .conftest import QUIET

NOW = 1_767_225_600.0


def _engine(model: str) -> tuple[Engine, MemoryStore]:
    store = MemoryStore()
    config = EngineConfig(provider="openai-chat", model=model, sources=QUIET)
    engine = Engine(store, config, pipeline=PipelineConfig.preset("default"))
    store.create_session(session_id="s1", metadata={})
    return engine, store


def test_a_session_at_one_model_is_priced_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    for_model = CachePricing.for_model

    def counting(provider: Any, model: str, *, cache_ttl: str | None = None) -> CachePricing:
        made.append(model)
        return for_model(provider, model, cache_ttl=cache_ttl)

    monkeypatch.setattr(CachePricing, "for_model", counting)
    engine, store = _engine("gpt-4o")
    for k in range(6):
        engine.prepare("s1", f"step {k}", now=NOW + 10 * k)
        dag.append(store, "s1", "assistant", [TextBlock(text=f"done {k}")], name="gpt-4o")
    assert made == ["gpt-4o"]  # once: the engine's pipeline, six requests and their commits
    assert engine.pricing("gpt-5") == for_model(engine.provider, "gpt-5")
    assert made == ["gpt-4o", "gpt-5"]


def test_a_model_whose_profile_changed_is_priced_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    engine, _ = _engine("gpt-4o")
    before = engine.pricing("gpt-4o")
    profile = engine.provider.model_profile("gpt-4o")
    assert profile.prices is not None
    cheaper = msgspec.structs.replace(
        profile,
        prices=msgspec.structs.replace(profile.prices, cache_read=profile.prices.input / 10),
    )
    monkeypatch.setattr(engine.provider, "model_profile", lambda model: cheaper)
    after = engine.pricing("gpt-4o")
    assert after != before
    assert after == CachePricing.for_model(engine.provider, "gpt-4o")
    assert engine.pipeline_for("gpt-4o").cache == after
    # An unknown model is priced as the default, once, like any other.
    assert engine.pricing("no-such-model") == CachePricing.for_model(
        engine.provider, "no-such-model"
    )
