"""A session that fails part way through a rerender: its record says why and where,
keeps the figures of the requests replayed before the failure, and the run goes on
with the other sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxrules.batch import ReplayOptions, rerender
from ctxrules.batch import session as replay
from ctxrules.batch.requests import session_data
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.store import open_store

OPTIONS = ReplayOptions.of(PipelineConfig.preset("default"))


@pytest.fixture(scope="module")
def store_location(first_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    location = str(tmp_path_factory.mktemp("partial") / "store")
    store = open_store(location)
    try:
        import_paths(store, [str(first_corpus / "claude-code-jsonl")])
    finally:
        store.close()
    return location


def _sessions(location: str) -> list[Any]:
    store = open_store(location, create=False)
    try:
        return [session_data(store, s.id) for s in store.list_sessions()]
    finally:
        store.close()


def _fail_at(monkeypatch: pytest.MonkeyPatch, session: str, call: int) -> None:
    """Make the ``call``-th ``prepare`` of ``session``'s replays raise (1-based)."""
    real = replay._Track.prepare
    seen = {"n": 0}

    def prepare(self: Any, now: float, model: str | None = None) -> Any:
        if self.session == session:
            seen["n"] += 1
            if seen["n"] == call:
                raise RuntimeError("the rule broke")
        return real(self, now, model)

    monkeypatch.setattr(replay._Track, "prepare", prepare)


def test_a_failed_session_keeps_what_was_measured(store_location, monkeypatch):
    data = max(_sessions(store_location), key=lambda d: len(d.nodes))
    full = replay.replay_session(data, OPTIONS)
    assert "error" not in full and full["requests"] >= 4
    # Request points 0 and 1 replay in both stores (prepare calls 1-4); point 2 fails.
    _fail_at(monkeypatch, data.id, 5)
    part = replay.replay_session(data, OPTIONS)
    assert part["error"] == "RuntimeError: the rule broke"
    assert part["failed_at"] == 2 and part["requests"] == 2
    for side in ("plain", "rules"):
        assert 0 < part[side]["prompt_tokens"] < full[side]["prompt_tokens"]
        assert 0 < part[side]["body_bytes"] < full[side]["body_bytes"]
    assert part["violations"] == []


def test_the_run_goes_on_after_a_failed_session(store_location, monkeypatch):
    ids = sorted(d.id for d in _sessions(store_location))
    _fail_at(monkeypatch, ids[1], 3)
    result = rerender([store_location], OPTIONS, jobs=1)
    records = {r["session"]: r for r in result.records}
    assert sorted(records) == ids and not result.interrupted
    assert records[ids[1]]["error"] == "RuntimeError: the rule broke"
    assert records[ids[1]]["failed_at"] == 1 and records[ids[1]]["plain"]["prompt_tokens"] > 0
    assert all("error" not in records[i] for i in ids if i != ids[1])
    assert result.totals["errors"] == 1 and result.totals["sessions"] == len(ids)
