"""A commit is reused only under the cache prices it was decided at.

The cache-aware rules of the default preset change what the provider cached only when
that pays at the model's cache prices (``ctxrules.ruleapi.cache``), so one session at
the same HEAD can call for different commits for two models: OpenAI's gpt-4o reads its
cache at half the input price, gpt-5 at a tenth, and aging old results pays sooner at
the dearer read.  Two engines sharing a store must each get the commits they would make
alone, not the ones the other stored first."""

from __future__ import annotations

from ctxrules import dag
from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.engine import Engine, EngineConfig
from ctxrules.ruleapi.cache import CachePricing
from ctxrules.store import MemoryStore

from .conftest import QUIET, grep_turn

NOW = 1_767_225_600.0
TURNS = 6


def _engine(store: MemoryStore, model: str, preset: str = "default") -> Engine:
    config = EngineConfig(provider="openai-chat", model=model, sources=QUIET)
    return Engine(store, config, pipeline=PipelineConfig.preset(preset))


def _play(store: MemoryStore, engines: list[Engine]) -> list[list[tuple[str, ...]]]:
    """A session of ``TURNS`` tool calls seconds apart (the cache stays warm), every
    engine preparing each request in turn; per engine, the states of the tool results
    in each of its commits."""
    store.create_session(session_id="s1", metadata={})
    dag.append(store, "s1", "user", "Where are the handlers?", node_id="u0", created_at=NOW)
    seen: list[list[tuple[str, ...]]] = [[] for _ in engines]
    for k in range(TURNS):
        t = NOW + 10 * k
        grep_turn(store, "s1", k, at=t)
        for e, engine in enumerate(engines):
            prep = engine.prepare("s1", now=t + 3)
            seen[e].append(tuple(it.state for it in prep.commit.items if it.role == "tool"))
    return seen


def _alone(model: str) -> list[tuple[str, ...]]:
    store = MemoryStore()
    (states,) = _play(store, [_engine(store, model)])
    return states


def test_two_models_sharing_a_store_each_get_their_own_decisions():
    dear, cheap = _alone("gpt-4o"), _alone("gpt-5")
    # The premise: at gpt-4o's prices aging pays within the session, at gpt-5's it
    # does not, so the two models call for different commits at the same HEAD.
    assert "aged" in dear[-1] and "aged" not in cheap[-1]
    store = MemoryStore()
    both = _play(store, [_engine(store, "gpt-4o"), _engine(store, "gpt-5")])
    assert both == [dear, cheap]
    # Either order: the second engine does not take the first one's commits either.
    store = MemoryStore()
    assert _play(store, [_engine(store, "gpt-5"), _engine(store, "gpt-4o")]) == [cheap, dear]


def _priced(model: str, config: PipelineConfig | None = None) -> Pipeline:
    """The pipeline an engine for ``model`` prices its commits with."""
    engine_config = EngineConfig(provider="openai-chat", model=model)
    return Engine(MemoryStore(), engine_config, pipeline=config).pipeline


def test_the_version_holds_the_prices_only_where_a_rule_decides_by_them():
    gpt4o, gpt5 = _priced("gpt-4o"), _priced("gpt-5")
    assert gpt4o.cache != gpt5.cache
    assert gpt4o.version != gpt5.version
    # Anthropic's prices are the default: the versions stored before stay valid.
    default = Pipeline.from_config(PipelineConfig.preset("default"))
    assert default.priced(CachePricing()).version == default.version
    assert default.priced(gpt4o.cache).version == gpt4o.version
    # No rule waits for the cache: nothing depends on the prices.
    blind = PipelineConfig(pipeline=("result_cap",), rules={"result_cap": {"cache_aware": False}})
    for config in (PipelineConfig.preset("off"), blind):
        unpriced = Pipeline.from_config(config).version
        assert _priced("gpt-4o", config).version == _priced("gpt-5", config).version == unpriced
