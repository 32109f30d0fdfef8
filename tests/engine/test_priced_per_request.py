"""Each request's rules are priced at the model that request is sent to.

The cache-aware rules of the default preset age old tool results only when the tokens
saved pay for rewriting the provider's cached prompt, at the model's cache prices
(``ctxrules.ruleapi.cache``): at gpt-4o's (cache read at half the input price) aging
pays within a short session of large results, at gpt-5's (a tenth) it does not.  A
session whose agent switched from gpt-4o to gpt-5 is sent to gpt-5 after the switch, so
its rules must decide at gpt-5's prices there — not at the configured model's, nor at
the provider's default (gpt-4o), which is what the engine once priced every request of a
session at.  A caller may also name the model of one request (``prepare(model=...)``,
as a replay does with the model that answered each recorded request)."""

from __future__ import annotations

from ctxrules import dag
from ctxrules.commit import persist
from ctxrules.config import PipelineConfig
from ctxrules.engine import Engine, EngineConfig, TurnPrep, attach, merge, merged_into
from ctxrules.ruleapi.cache import CachePricing
from ctxrules.store import MemoryStore

from .conftest import QUIET, grep_turn

NOW = 1_767_225_600.0


def _play(
    answered_by: list[str], *, model: str | None = None, sent_to: str | None = None
) -> tuple[Engine, list[TurnPrep]]:
    """A session of tool calls seconds apart (the cache stays warm), the k-th answer
    named ``answered_by[k]`` (``""``: unnamed); the engine configured with ``model``,
    each request prepared with ``prepare(model=sent_to)``."""
    store = MemoryStore()
    config = EngineConfig(provider="openai-chat", model=model, sources=QUIET)
    engine = Engine(store, config, pipeline=PipelineConfig.preset("default"))
    store.create_session(session_id="s1", metadata={})
    dag.append(store, "s1", "user", "Where are the handlers?", node_id="u0", created_at=NOW)
    preps = []
    for k, name in enumerate(answered_by):
        t = NOW + 10 * k
        grep_turn(store, "s1", k, at=t, name=name)
        preps.append(engine.prepare("s1", now=t + 3, model=sent_to))
    return engine, preps


def _aged(prep: TurnPrep) -> int:
    return sum(1 for it in prep.commit.items if it.role == "tool" and it.state == "aged")


def _version(engine: Engine, model: str) -> str:
    return engine.pipeline_for(model).version


def test_a_session_that_switched_model_is_priced_at_the_model_after_the_switch():
    # The premise: at gpt-4o's prices the default preset ages this session's results
    # by its last request, at gpt-5's it does not.
    _, dear = _play(["gpt-4o"] * 6)
    _, cheap = _play(["gpt-5"] * 6)
    assert _aged(dear[-1]) > 0 and _aged(cheap[-1]) == 0
    engine, switched = _play(["gpt-4o"] * 3 + ["gpt-5"] * 3)
    assert [p.model for p in switched] == ["gpt-4o"] * 3 + ["gpt-5"] * 3
    # After the switch the ledger decides at gpt-5's prices: nothing is aged, and the
    # commits carry the version of those prices (not the provider default's, gpt-4o).
    assert [_aged(p) for p in switched[3:]] == [0, 0, 0]
    assert {p.commit.rules_version for p in switched[3:]} == {_version(engine, "gpt-5")}
    assert {p.commit.rules_version for p in switched[:3]} == {_version(engine, "gpt-4o")}
    assert _version(engine, "gpt-5") != _version(engine, "gpt-4o")


def test_the_model_a_request_is_sent_with_prices_its_rules():
    # Configured for gpt-4o, each request sent to gpt-5: gpt-5's decisions.
    engine, sent = _play([""] * 6, model="gpt-4o", sent_to="gpt-5")
    assert {p.model for p in sent} == {"gpt-5"}
    assert _aged(sent[-1]) == 0
    assert sent[-1].commit.rules_version == _version(engine, "gpt-5")
    # And the other way round.
    engine, sent = _play([""] * 6, model="gpt-5", sent_to="gpt-4o")
    assert _aged(sent[-1]) > 0
    assert sent[-1].commit.rules_version == _version(engine, "gpt-4o")


def test_one_pricing_of_a_model():
    engine, _ = _play([])
    for model in ("gpt-4o", "gpt-5"):
        expected = CachePricing.for_model(engine.provider, model, cache_ttl=None)
        assert engine.pipeline_for(model).cache == expected == engine.pricing(model)
    # The configured model's (here the provider's default) is ``pipeline``.
    assert engine.pipeline is engine.pipeline_for(engine.provider.default_model)


def test_a_manual_compaction_is_priced_at_the_model_of_the_next_request():
    # No model configured: the session's answers are gpt-5's, so its next request goes
    # to gpt-5, and so does a compaction made now (not to the provider's default).
    engine, preps = _play(["gpt-5"] * 4)
    assert preps[-1].model == "gpt-5"
    result = engine.compact("s1", now=NOW + 100)
    commit = persist.load(engine.store, result.commit)
    assert commit.rules_version == _version(engine, "gpt-5") != _version(engine, "gpt-4o")


def _chat_answer(text: str) -> dict:
    return {
        "id": "chatcmpl-merge",
        "object": "chat.completion",
        "model": "gpt-5",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }


def _peer(store) -> None:
    """A peer session of one gpt-5 turn."""
    store.create_session(session_id="peer", metadata={})
    dag.append(store, "peer", "user", "Try the other package.", node_id="pu", created_at=NOW)
    dag.append(
        store, "peer", "assistant", "Done: pkg9.", name="gpt-5", node_id="pa", created_at=NOW
    )


def test_a_merge_is_priced_at_the_model_of_its_turn():
    # The target's answers are gpt-5's, so the merge turn goes to gpt-5: every commit of
    # the merge is priced there, and the merge commit is the one its request carried
    # (under the provider's default, gpt-4o, the merge recorded another commit).
    engine, _ = _play(["gpt-5"] * 3)
    store = engine.store
    _peer(store)
    assert engine.next_model("s1") == "gpt-5"
    result = merge(
        engine,
        "s1",
        ["peer"],
        instruction="Combine both.",
        call=lambda prep: _chat_answer("Merged."),
        now=NOW + 100,
    )
    assert result.prep.model == "gpt-5"
    assert result.commit == result.prep.commit.id
    assert result.prep.commit.rules_version == _version(engine, "gpt-5")
    (entry,) = merged_into(store, "peer")
    assert entry["merge_commit"] == result.prep.commit.id


def test_an_attached_commit_is_priced_at_the_model_of_the_request_it_is_attached_for():
    # The session's answers are gpt-5's, so its next request goes to gpt-5: the source's
    # commit an attach pointer names is made at gpt-5's prices (an engine's ``pipeline``
    # is priced at the provider's default, gpt-4o, here).
    engine, _ = _play(["gpt-5"] * 3)
    store = engine.store
    _peer(store)
    ptr = attach(store, "s1", "peer", config=engine, now=NOW + 100)
    commit = persist.load(store, ptr.metadata["attach"]["commit"])
    assert commit.rules_version == _version(engine, "gpt-5") != engine.pipeline.version
