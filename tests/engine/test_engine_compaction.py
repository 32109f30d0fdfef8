"""Compaction inside the engine's loop: automatic at the ``compact`` level (or
``critical`` for the emergency switch), reactive after a prompt-too-long refusal (once),
behind a per-session circuit breaker; context sources collected afresh after it; the
usage record of an answer the vendor compacted on its side."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxrules import dag
from ctxrules.compaction import CompactOptions, boundaries
from ctxrules.context_sources import SourcesConfig
from ctxrules.engine import Engine, EngineConfig
from ctxrules.errors import CompactionError, PromptTooLongError, ProviderError
from ctxrules.importers import import_paths
from ctxrules.plugins import registry
from ctxrules.summarizers import ExtractiveSummarizer

from .conftest import QUIET

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
NOW = 1_767_225_600.0
#: Thresholds low enough that a corpus session is at ``compact`` (a fraction of the
#: usable window of a 200K model: about 1,800 tokens); ``critical`` out of reach.
LOW = {"warn_at": 0.001, "compact_at": 0.01, "critical_at": 0.99}


class Counting:
    name = "engine-counting"

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, items, *, budget, **kwargs):
        self.calls += 1
        return ExtractiveSummarizer().summarize(items, budget=budget)


class Failing:
    name = "engine-failing"

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, items, *, budget, **kwargs):
        self.calls += 1
        raise RuntimeError("summary model unavailable")


@pytest.fixture
def summarizers():
    reg = registry("summarizers")
    added = {s.name: s for s in (Counting(), Failing())}
    reg.items.update(added)
    yield added
    for name in added:
        reg.items.pop(name, None)


def _engine(store, summarizer: str = "engine-counting", **config: Any) -> Engine:
    config.setdefault("sources", QUIET)
    config.setdefault("model", "claude-sonnet-4-5")
    options = CompactOptions(summarizer=summarizer, timeout_seconds=0)
    return Engine(store, EngineConfig(compaction=options, **config), pipeline=None)


def _imported(store, corpus) -> str:
    (res,) = import_paths(store, [str(corpus / CC)])
    return res.id


def test_a_request_at_the_compact_level_is_compacted_first(store, corpus, summarizers):
    sid = _imported(store, corpus)
    quiet = _engine(store, auto_compact=False, emergency_compact=False, **LOW)
    before = quiet.prepare(sid, "Now add a section on testing.", now=NOW)
    assert before.level == "compact" and before.compaction is None  # switched off: as it is
    engine = _engine(store, **LOW)
    prep = engine.prepare(sid, now=NOW + 1)  # the same request, due at HEAD
    result = prep.compaction
    assert result is not None and result.record.trigger == "auto"
    assert summarizers["engine-counting"].calls == 1
    # HEAD moved to the restore message after the boundary; the request carries the
    # summary and still the user's open message, and is smaller than before.
    info = store.get_session(sid)
    assert info.head == prep.head == (result.restore or result.boundary)
    assert prep.appended == tuple(n for n in (result.boundary, result.restore) if n)
    assert [n.id for n, _ in boundaries(store, sid)] == [result.boundary]
    summaries = [it for it in prep.commit.items if it.state == "summary"]
    assert summaries and summaries[-1].rendered == result.record.summary
    sent = json.dumps(prep.body, ensure_ascii=False)
    assert "Now add a section on testing." in sent
    assert result.record.summary.splitlines()[0] in sent
    assert prep.tokens.estimate < before.tokens.estimate
    # stats report the compaction on the branch, as `ctxrules stats --json` prints it
    stats = engine.stats(sid, now=NOW + 2).as_dict()
    assert [c["node"] for c in stats["compactions"]] == [result.boundary]
    assert stats["compactions"][0]["trigger"] == "auto"


def test_each_trigger_has_its_own_switch(store, corpus, summarizers):
    sid = _imported(store, corpus)
    dag.append(store, sid, "user", "Go on.")
    # at ``critical``: the emergency switch compacts even with automatic compaction off
    critical = {"warn_at": 0.001, "compact_at": 0.002, "critical_at": 0.003}
    off = _engine(store, auto_compact=False, emergency_compact=False, **critical)
    assert off.prepare(sid, now=NOW).compaction is None
    assert summarizers["engine-counting"].calls == 0
    emergency = _engine(store, auto_compact=False, emergency_compact=True, **critical)
    prep = emergency.prepare(sid, now=NOW)
    assert prep.compaction is not None and summarizers["engine-counting"].calls == 1
    # at ``compact`` only, the emergency switch alone does nothing
    sid2 = _imported(store, corpus)
    dag.append(store, sid2, "user", "Go on.")
    only_emergency = _engine(store, auto_compact=False, emergency_compact=True, **LOW)
    assert only_emergency.prepare(sid2, now=NOW).compaction is None


def test_failed_automatic_compactions_open_the_breaker(store, corpus, summarizers):
    failing = summarizers["engine-failing"]
    sid = _imported(store, corpus)
    engine = _engine(store, summarizer="engine-failing", **LOW)
    nodes = len(store.nodes(sid))
    errors = []
    for k in range(4):
        prep = engine.prepare(sid, f"question {k}", now=NOW + k)
        assert prep.compaction is None and prep.level == "compact"
        assert prep.request.body  # the request still goes
        errors.append(prep.compaction_error)
    # the summarizer is asked (with its retries) for the first three turns only
    assert all("summary model unavailable" in e for e in errors[:3]), errors
    assert "switched off after 3 consecutive failures" in errors[3]
    calls = failing.calls
    engine.prepare(sid, "question 4", now=NOW + 4)
    assert failing.calls == calls  # open: nothing is run
    assert len(store.nodes(sid)) == nodes + 5  # only the five user messages were stored
    assert boundaries(store, sid) == []
    engine.breaker(sid).reset()
    engine.prepare(sid, "question 5", now=NOW + 5)
    assert failing.calls > calls  # tried again after a reset


def test_a_prompt_too_long_refusal_compacts_and_prepares_once_more(store, corpus, summarizers):
    sid = _imported(store, corpus)
    engine = _engine(store)  # default thresholds: no automatic compaction here
    prep = engine.prepare(sid, "Now add a section on testing.", now=NOW)
    assert prep.compaction is None and prep.level == "ok"
    refusal = PromptTooLongError("prompt is too long: 250000 tokens > 200000 maximum")
    retry = engine.retry_after_error(prep, refusal, now=NOW + 1)
    assert retry.attempt == 1 and retry.compaction is not None
    assert retry.compaction.record.trigger == "reactive"
    assert retry.tokens.estimate < prep.tokens.estimate
    assert "Now add a section on testing." in json.dumps(retry.body, ensure_ascii=False)
    # a second refusal after compacting is the caller's: raised as it is
    with pytest.raises(PromptTooLongError):
        engine.retry_after_error(retry, refusal, now=NOW + 2)
    # another error is never a reason to compact
    other = ProviderError("overloaded")
    with pytest.raises(ProviderError, match="overloaded"):
        engine.retry_after_error(prep, other, now=NOW + 3)
    assert len(boundaries(store, sid)) == 1


def test_a_failed_reactive_compaction_says_both_causes(store, corpus, summarizers):
    sid = _imported(store, corpus)
    engine = _engine(store, summarizer="engine-failing")
    prep = engine.prepare(sid, "Go on.", now=NOW)
    refusal = PromptTooLongError("prompt is too long")
    with pytest.raises(CompactionError, match=r"refused the prompt as too long.*unavailable"):
        engine.retry_after_error(prep, refusal, now=NOW + 1)
    assert engine.breaker(sid).failures == 1


def test_context_sources_are_collected_afresh_after_a_compaction(store, corpus, tmp_path):
    (tmp_path / "AGENTS.md").write_text("Always run the tests.")
    sid = _imported(store, corpus)
    engine = _engine(
        store,
        summarizer="extractive",
        sources=SourcesConfig(git_status=False, date=False),
        working_directory=str(tmp_path),
    )
    first = engine.prepare(sid, "Go on.", now=NOW)
    assert "Always run the tests." in json.dumps(first.body["system"])
    (tmp_path / "AGENTS.md").write_text("Never run the tests.")
    answer = {"id": "m", "role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    engine.record(first, answer, now=NOW + 1)
    same = engine.prepare(sid, "More.", now=NOW + 2)  # memoised: the prefix stays
    assert "Always run the tests." in json.dumps(same.body["system"])
    retry = engine.retry_after_error(same, PromptTooLongError("too long"), now=NOW + 3)
    system = json.dumps(retry.body["system"])
    assert "Never run the tests." in system and "Always run the tests." not in system


def test_a_vendor_compaction_is_paired_with_the_request_as_sent(store):
    """Anthropic's server-side compaction: the top-level usage is the compacted prompt
    (what the next request carries), the ``compaction`` iteration the request as sent —
    the figure our estimate of that request is calibrated against."""
    engine = _engine(store)
    sid = dag.create_session(store).id
    prep = engine.prepare(sid, "hello", now=NOW)
    sent = prep.tokens.estimate * 3  # the vendor read far more than the answer's prompt
    answer = {
        "id": "msg_c",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 40,
            "output_tokens": 5,
            "iterations": [
                {"type": "compaction", "input_tokens": sent, "output_tokens": 300},
                {"type": "message", "input_tokens": 40, "output_tokens": 5},
            ],
        },
    }
    done = engine.record(prep, answer, now=NOW + 1)
    assert done.usage.total_used == 40
    assert done.usage.calibration == pytest.approx(sent / prep.tokens.estimate, rel=1e-3)
    nxt = engine.prepare(sid, "and then?", now=NOW + 2)
    assert nxt.tokens.measured == sent
    assert nxt.tokens.fused == sent + nxt.tokens.estimate - prep.tokens.estimate


def test_a_compaction_that_cannot_shrink_the_request_is_not_made(store, summarizers):
    # The vendor measured 150,000 tokens for a conversation of a few dozen: the rest is
    # text the engine does not hold (a harness's prompt, a conversation before the
    # recording).  Folding the history would not shrink the request, only rewrite the
    # cache, again at every turn: the request goes as it is and says why.
    sid = store.create_session().id
    engine = _engine(store)
    prep = engine.prepare(sid, "Summarise the design doc.", now=NOW)
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "It proposes a cache."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 150_000, "output_tokens": 6},
    }
    engine.record(prep, answer, now=NOW + 1)
    nxt = engine.prepare(sid, "And its risks?", now=NOW + 2)
    assert nxt.level == "compact" and nxt.compaction is None
    assert nxt.compaction_error.startswith("not compacted:")
    assert summarizers["engine-counting"].calls == 0 and boundaries(store, sid) == []
