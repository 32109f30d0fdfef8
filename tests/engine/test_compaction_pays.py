"""The engine's automatic compaction goes through the cache ledger (engine/compacting.py).

Past ``compact_at`` with the provider's cache warm, a compaction rewrites the cached
prompt: it is made only when it takes enough off the request to pay for that within
the next few requests, or when the rewrite is free (the cache went cold, the model
changed).  Past ``critical_at`` the window forces it.  On a recorded session whose
requests come seconds apart, compacting at the first request past the threshold
(as before the ledger) billed 1.05 times the recording's prompts; now the engine waits
for the pause in the session and bills less than the recording."""

from __future__ import annotations

from typing import Any

import pytest

from ctxrules.batch import ReplayOptions, session_data
from ctxrules.batch.session import replay_detail
from ctxrules.compaction import CompactOptions
from ctxrules.config import PipelineConfig
from ctxrules.engine import Engine, EngineConfig
from ctxrules.importers import import_paths
from ctxrules.store import MemoryStore

from .conftest import QUIET

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
#: A recorded session of 8 requests, most of them seconds apart, one after a pause.
PAUSED = "claude-code-jsonl/entirecli/ec_38b74f08e3_0_full.jsonl"
NOW = 1_767_225_600.0
#: ``compact`` from about 1,800 tokens of a 200K model's usable window; ``critical``
#: out of reach.
LOW = {"warn_at": 0.001, "compact_at": 0.01, "critical_at": 0.99}
#: The same with ``critical`` at about 2,700 tokens.
CRITICAL = {"warn_at": 0.001, "compact_at": 0.01, "critical_at": 0.015}
#: A user message of some 4,000 tokens: what makes a request grow past the threshold.
LONG = " ".join(
    f"Step {i}: check the module parser_{i}.py for the flag --opt-{i}." for i in range(320)
)


def _engine(store, **config: Any) -> Engine:
    options = CompactOptions(timeout_seconds=0)
    config.setdefault("model", "claude-sonnet-4-5")
    return Engine(
        store,
        EngineConfig(sources=QUIET, compaction=options, **config),
        pipeline=PipelineConfig.preset("off"),
    )


def _answer(text: str = "done") -> dict:
    return {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
    }


def _started(store, corpus, **config: Any) -> tuple[Engine, str]:
    """An imported session and an engine that has just sent a request and recorded its
    answer: the provider's cache holds that request."""
    (res,) = import_paths(store, [str(corpus / CC)])
    engine = _engine(store, **config)
    first = engine.prepare(res.id, "Summarise the work so far.", now=NOW)
    # The recording's last answer is months before NOW: the cache is cold, so the
    # compaction the threshold asks for is free and is made.
    assert first.compaction is not None
    engine.record(first, _answer(), now=NOW + 2)
    return engine, res.id


def test_a_warm_cache_holds_off_a_compaction_that_would_not_pay(store, corpus):
    engine, sid = _started(store, corpus, **LOW)
    nodes = len(list(store.nodes(sid)))
    prep = engine.prepare(sid, LONG, now=NOW + 5)
    assert prep.level == "compact"
    # Folding the short history before the long message saves far less than the
    # rewrite of the cached prompt costs: the request goes as it is, saying why.
    assert prep.compaction is None
    assert "not compacted" in prep.compaction_error and "pay" in prep.compaction_error
    assert len(list(store.nodes(sid))) == nodes + 1  # the message; no boundary
    assert engine.breaker(sid).failures == 0  # declining is no failure


def test_a_cold_cache_makes_the_compaction_free(store, corpus):
    engine, sid = _started(store, corpus, **LOW)
    engine.record(engine.prepare(sid, LONG, now=NOW + 5), _answer(), now=NOW + 6)
    # The user comes back after ten minutes: the cache expired, the rewrite is free.
    prep = engine.prepare(sid, "And now the tests.", now=NOW + 5 + 600)
    assert prep.compaction is not None
    assert prep.compaction.record.tokens_after < prep.compaction.record.tokens_before


def test_past_the_critical_level_the_window_forces_it(store, corpus):
    engine, sid = _started(store, corpus, **CRITICAL)
    long = engine.prepare(sid, LONG, now=NOW + 5)
    # Folding what came before the long message would not make the request smaller.
    assert long.compaction is None and "no smaller" in long.compaction_error
    engine.record(long, _answer(), now=NOW + 6)
    prep = engine.prepare(sid, "And now the tests.", now=NOW + 8)
    assert prep.level == "critical"
    assert prep.compaction is not None  # warm, but the window wins


@pytest.fixture(scope="module")
def paused(corpus):
    store = MemoryStore()
    import_paths(store, [str(corpus / PAUSED)])
    (info,) = store.list_sessions()
    return session_data(store, info.id)


def test_compacting_past_the_threshold_bills_no_more_than_no_rules(paused):
    off = ReplayOptions.of(PipelineConfig.preset("off"))
    plain = replay_detail(paused, off)
    last = plain.plain[-1][1]
    # The benchmark's policy (benches/bench_quality.py): compact whenever a request
    # passes half the session's final size.
    at = 0.5 * last.commit.total_tokens / last.budget.usable
    engine = {"warn_at": at / 2, "compact_at": at, "critical_at": 0.95}
    done = replay_detail(paused, ReplayOptions.of(PipelineConfig.preset("off"), engine=engine))
    made = [(point, prep) for point, prep, *_ in done.rules if prep.compaction is not None]
    assert made, "the session passes the threshold: a compaction is due"
    times = [point.now for point, *_ in done.rules]
    models = [prep.model for _, prep, *_ in done.rules]
    for point, _ in made:
        k = times.index(point.now)
        # Only once the cache went cold, or when the request goes to another model than
        # the one before (the replay sends each request to the model that answered it:
        # this agent switched from Sonnet to Opus, which has nothing cached).
        assert k == 0 or point.now - times[k - 1] > 300 or models[k] != models[k - 1]
    plain_cost = done.record["plain"]["input_cost_usd"]
    assert 0 < done.record["rules"]["input_cost_usd"] <= plain_cost


@pytest.mark.parametrize(
    ("model", "compacts"), [("claude-sonnet-4-5", False), ("claude-opus-4-5", True)]
)
def test_another_model_has_nothing_cached(store, corpus, model, compacts):
    engine, sid = _started(store, corpus, **LOW)
    engine.record(engine.prepare(sid, LONG, now=NOW + 5), _answer(), now=NOW + 6)
    # Another engine (another process) goes on seconds later: what the provider has
    # cached is the last answer's request, made for claude-sonnet-4-5.
    other = _engine(store, **{**LOW, "model": model})
    prep = other.prepare(sid, "And now the tests.", now=NOW + 8)
    assert prep.level == "compact"
    assert (prep.compaction is not None) is compacts, prep.compaction_error


def test_a_return_to_a_model_finds_its_own_entry(store, corpus):
    # The previous request went to Opus, but Sonnet's own entry — the request before,
    # three seconds earlier — still lives: going back to Sonnet, the cache is warm and a
    # compaction must pay for rewriting it.  The engine remembered only the previous
    # request's model and took the return as free.
    from ctxrules.engine.compacting import Sent, compaction_price

    engine, sid = _started(store, corpus, **LOW)
    sonnet = engine.prepare(sid, LONG, now=NOW + 5)
    engine.record(sonnet, _answer(), now=NOW + 6)
    prep = engine.prepare(sid, "And now the tests.", now=NOW + 10)
    assert prep.model == "claude-sonnet-4-5" and prep.level == "compact"
    pricing = engine.pricing(prep.model)
    opus = Sent(NOW + 8, "claude-opus-4-5", None)
    own = Sent(NOW + 5, prep.model, sonnet.request.estimate)

    def price(own: Sent | None, now: float = NOW + 10) -> tuple[int, str]:
        return compaction_price(prep, opus, None, pricing=pricing, now=now, own=own)

    assert price(None) == (0, price(None)[1]) and "model changed" in price(None)[1]
    need, why = price(own)
    warm, _ = engine._compaction_price(prep, own, NOW + 10)  # as if Opus was never asked
    assert need == warm > 0 and "warm" in why
    # Past Sonnet's TTL (from its own request, not Opus's) the return is cold again.
    assert price(own, now=NOW + 5 + pricing.ttl_seconds + 1)[0] == 0
