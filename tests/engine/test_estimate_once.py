"""Nothing is estimated twice: each request the engine prepares is estimated once, by
the core, with its body; usage fusion pairs a measurement with the estimate kept from
when its request was prepared; the batch accounting reads the estimate the request
carries; an item's token counts are worked out once however many requests hold it.

The counters are ``ctxrules.providers.estimate.estimate_counts`` (estimates the core
and the specification made, item values the core worked out) and the engine's own
``Engine.counters`` (requests composed, earlier requests rendered again for fusion).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.corpus import FIRST
from tests.engine.scripted import CONFIG, answer

from ctxrules.batch import ReplayOptions
from ctxrules.batch import session as replay
from ctxrules.batch._recording import ReplayEngine
from ctxrules.batch.requests import session_data
from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.engine import Engine, ToolResult
from ctxrules.importers import import_paths
from ctxrules.model import ContextCommit, ContextItem
from ctxrules.providers.estimate import estimate_counts
from ctxrules.render import render
from ctxrules.store import MemoryStore, open_store


def _delta(before: dict[str, int]) -> dict[str, int]:
    after = estimate_counts()
    return {k: after[k] - before[k] for k in after}


def test_a_live_session_estimates_each_prepared_request_once():
    store = MemoryStore()
    sid = store.create_session().id
    engine = Engine(store, CONFIG, pipeline=Pipeline.from_config(PipelineConfig.preset("default")))
    before = estimate_counts()
    prep = engine.prepare(sid, "read the modules", now=1e9)
    engine.record(prep, answer(0, prep.tokens.estimate, call=True), now=1e9 + 1)
    preps = [prep]
    for i in range(1, 8):
        results = [ToolResult(f"r{i - 1}", f"module {i}\n" * 40)]
        prep = engine.prepare(sid, tool_results=results, now=1e9 + 2 * i)
        engine.record(prep, answer(i, prep.tokens.fused, call=i < 7), now=1e9 + 2 * i + 1)
        preps.append(prep)
    made = _delta(before)
    # One estimate per prepared request, made by the core with its body.
    assert engine.counters["requests"] == len(preps) == made["core"]
    assert made["spec"] == 0
    # Each measurement was paired with the estimate kept with its request.
    assert engine.counters["fusion_renders"] == 0
    assert all(p.tokens.estimate == p.request.estimate.input_tokens for p in preps)
    later = preps[-1].tokens
    assert later.measured is not None and later.measured_estimate == preps[-2].tokens.estimate


def test_an_items_counts_are_worked_out_once():
    items = [
        ContextItem(source_node_id=f"u{i}", role="user", rendered=f"msg {i} " * 30)
        for i in range(6)
    ]
    commit = ContextCommit(
        id="c", session_id="s", head_node_id="h", rules_version="r", items=tuple(items)
    )
    render(commit, "anthropic", estimate=True)
    before = estimate_counts()
    again = render(commit, "anthropic", estimate=True)
    grown = msgspec.structs.replace(
        commit, items=(*items, ContextItem(source_node_id="u9", role="user", rendered="new"))
    )
    more = render(grown, "anthropic", estimate=True)
    made = _delta(before)
    assert made["core"] == 2
    # The same items again: nothing worked out; one new item: its count alone.
    assert made["item_values"] == 1
    assert more.estimate.input_tokens > again.estimate.input_tokens


@pytest.fixture(scope="module")
def corpus_sessions(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    files = [str(corpus / f) for f in FIRST]
    store = open_store(tmp_path_factory.mktemp("once"))
    ids = [r.id for r in import_paths(store, files)]
    data = [session_data(store, i) for i in ids]
    store.close()
    return data


def test_a_replay_estimates_each_request_once(corpus_sessions: Any, monkeypatch):
    """Every request point of a replayed session is prepared in both replays and each
    preparation is estimated once; the accounting and fusion add none."""
    engines: list[Engine] = []

    class Counted(ReplayEngine):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            engines.append(self)

    monkeypatch.setattr(replay, "ReplayEngine", Counted)
    options = ReplayOptions.of(PipelineConfig.preset("default"))
    checked = 0
    for data in corpus_sessions[:40]:
        engines.clear()
        before = estimate_counts()
        record = replay.replay_session(data, options)
        made = _delta(before)
        assert "error" not in record, record
        composed = sum(e.counters["requests"] for e in engines)
        refused = sum(e.counters["fusion_renders"] for e in engines)
        assert made["spec"] == 0
        assert made["core"] == composed + refused
        # Each request point: one request in each replay (more only after a compaction).
        assert composed == 2 * record["requests"] + record["rules"]["compactions"]
        assert refused == 0, data.id
        checked += record["requests"]
    assert checked > 100
