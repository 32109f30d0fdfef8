"""Measurements are cached in the output folder: a second run measures nothing new,
and anything that changes the figures (inputs, base configuration, provider) misses."""

from __future__ import annotations

import shutil

import pytest

from ctxrules.config import PipelineConfig
from ctxrules.tune import _batch, tune
from ctxrules.tune.cache import ResultCache, inputs_hash

PARAMS = ["tool_aging.tail_turns=1..2", "result_cap.max_tool_result_chars=1000,4000"]
# the default preset with a three-turn tail: a sweep of 1..2 measures the base's 3 too
BASE = PipelineConfig.preset("default").with_params("tool_aging", tail_turns=3)


@pytest.fixture
def calls(monkeypatch) -> list[tuple]:
    """Every call into the batch engine: (config rules, sessions)."""
    seen: list[tuple] = []
    real = _batch.measure

    def spy(sources, config, **kwargs):
        seen.append((dict(config.rules), tuple(kwargs["sessions"])))
        return real(sources, config, **kwargs)

    monkeypatch.setattr(_batch, "measure", spy)
    return seen


def figures(result) -> list[tuple]:
    return [
        (r.label, r.prompt_tokens, r.cache_read_tokens, r.cost_usd, r.quality, r.requests)
        for r in result.results
    ]


def test_a_second_run_measures_nothing_new(sources, tmp_path, calls):
    cache = tmp_path / "out" / "cache"
    first = tune(sources, PARAMS, base=BASE, jobs=1, cache_dir=cache)
    # 4 grid settings; the default (tail 3, cap 4000) is not among them: 5 calls.
    assert len(calls) == 5 and first.measured == 5 and first.reused == 0
    assert len(list(cache.glob("*.json"))) == 5
    calls.clear()
    second = tune(sources, PARAMS, base=BASE, jobs=1, cache_dir=cache)
    assert calls == [] and second.measured == 0 and second.reused == 5
    assert (second.replayed_sessions, second.replayed_requests) == (0, 0)
    assert first.replayed_sessions == 5 * len(sources)
    assert first.replayed_requests == sum(r.requests for r in first.results)
    assert figures(second) == figures(first)
    assert all(r.cached for r in second.results) and not any(r.cached for r in first.results)
    # A wider sweep measures only its new settings.
    wider = tune(sources, [*PARAMS[:1], "result_cap.max_tool_result_chars=1000,4000,8000"],
                 base=BASE, jobs=1, cache_dir=cache)  # fmt: skip
    assert wider.measured == 2 and wider.reused == 5 and len(calls) == 2
    assert {c[0]["result_cap"]["max_tool_result_chars"] for c in calls} == {8000}


def test_changed_inputs_or_configuration_miss(sources, tmp_path, calls):
    cache = tmp_path / "cache"
    tune(sources, PARAMS[:1], base=BASE, jobs=1, cache_dir=cache)
    assert len(calls) == 3  # tail_turns 1, 2 and the default 3
    calls.clear()
    # Same content under another name: a hit (the key is the content, not the path).
    moved = [shutil.copy(s, tmp_path / f"copy{i}.jsonl") for i, s in enumerate(sources)]
    assert tune(moved, PARAMS[:1], base=BASE, jobs=1, cache_dir=cache).measured == 0
    # One more session: every setting again.
    bigger = tune([*sources, sources[0]], PARAMS[:1], base=BASE, jobs=1, cache_dir=cache)
    assert bigger.measured == 3
    calls.clear()
    # A parameter the sweep does not touch changes the rules version: a miss.
    other = BASE.with_params("idle_clearing", idle_minutes=5)
    assert tune(sources, PARAMS[:1], base=other, jobs=1, cache_dir=cache).measured == 3
    assert (
        tune(
            sources, PARAMS[:1], base=BASE, jobs=1, provider="openai-chat", cache_dir=cache
        ).measured
        == 3
    )


def test_a_broken_entry_is_measured_again(sources, tmp_path, calls):
    cache = tmp_path / "cache"
    tune(sources, PARAMS[:1], base=BASE, jobs=1, cache_dir=cache)
    entries = sorted(cache.glob("*.json"))
    entries[0].write_bytes(b'{"cut')
    again = tune(sources, PARAMS[:1], base=BASE, jobs=1, cache_dir=cache)
    assert again.measured == 1 and again.reused == 2
    assert not list(cache.glob(".*.tmp"))  # written whole, then renamed


def test_without_a_cache_folder_nothing_is_kept(sources, tmp_path, calls):
    tune(sources, PARAMS[:1], base=BASE, jobs=1)
    tune(sources, PARAMS[:1], base=BASE, jobs=1)
    assert len(calls) == 6


def test_inputs_hash_is_the_content(sources, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i, s in enumerate(sources):
        shutil.copy(s, folder / f"{i}.jsonl")
    (folder / ".hidden").write_text("ignored")
    files = [str(folder / "0.jsonl"), str(folder / "1.jsonl")]
    assert inputs_hash([str(folder)], _batch.is_store) == inputs_hash(files, _batch.is_store)
    (folder / "1.jsonl").write_bytes((folder / "1.jsonl").read_bytes() + b"\n")
    assert inputs_hash([str(folder)], _batch.is_store) != inputs_hash(files[:1], _batch.is_store)


def test_a_store_source_hashes_its_sessions_and_nodes(sources, tmp_path):
    from ctxrules.importers import import_paths
    from ctxrules.store import open_store

    location = str(tmp_path / "store")
    store = open_store(location)
    import_paths(store, sources[:1])
    store.close()
    one = inputs_hash([location], _batch.is_store)
    assert one == inputs_hash([location], _batch.is_store)
    store = open_store(location)
    import_paths(store, sources[1:])
    store.close()
    assert inputs_hash([location], _batch.is_store) != one


def test_cache_keys_ignore_the_order_of_their_parts():
    assert ResultCache.key(a=1, b=[1, 2]) == ResultCache.key(b=[1, 2], a=1)
    assert ResultCache.key(a=1) != ResultCache.key(a=2)
