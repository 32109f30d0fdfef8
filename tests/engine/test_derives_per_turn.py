"""A turn whose rules ask for a summary derives its commit once: the summary is
answered in the derive that asks for it (``derive_with_summaries`` hands the answer
function in), not derive → answer → derive again.  A session past the summarize
threshold asks for a summary on every turn (each turn that leaves the kept tail is
folded); the counter (tests/counting.py) is on ``derive_commit``, the summary answers
on the summarizer the engine's store asks."""

from __future__ import annotations

import random

from tests.counting import count_calls
from tests.engine.scripted import CONFIG, answer

import ctxrules.commit.derive as derive_module
from ctxrules.commit import Pipeline
from ctxrules.commit import answers as answers_module
from ctxrules.engine import Engine, ToolResult
from ctxrules.rules import Summarize
from ctxrules.store import open_store


def _file(i: int) -> str:
    rng = random.Random(i)
    return "\n".join(f"value_{i}_{rng.randint(0, 10**6)} = compute({k})" for k in range(60))


def test_a_turn_that_asks_for_a_summary_derives_once(tmp_path, monkeypatch):
    store = open_store(tmp_path / "store")
    sid = store.create_session().id
    pipeline = Pipeline.of([Summarize(threshold_tokens=3000, keep_tail_turns=1)])
    engine = Engine(store, CONFIG, pipeline=pipeline)
    derives = count_calls(monkeypatch, derive_module, "derive_commit")
    asked = count_calls(monkeypatch, answers_module, "run_summarizer")
    prep = engine.prepare(sid, "read every module", now=1e9)
    engine.record(prep, answer(0, prep.tokens.estimate), now=1e9 + 1)
    summarized = 0
    for i in range(1, 16):
        derives.n = asked.n = 0
        results = [ToolResult(f"r{i - 1}", _file(i))]
        prep = engine.prepare(sid, tool_results=results, now=1e9 + 2 * i)
        engine.record(prep, answer(i, prep.tokens.estimate), now=1e9 + 2 * i + 1)
        summarized += asked.n > 0
        assert derives.n == 1, (i, derives.n, asked.n)
    assert summarized >= 5  # the turns past the threshold asked for summaries
    store.close()
