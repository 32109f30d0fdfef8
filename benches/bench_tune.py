"""``tune``: the speed of a small sweep over a corpus subset, so a change that slows
measuring settings shows up.

The subset is six sessions (the three Claude Code transcripts, the OpenHands
trajectory and the two SWE-agent trajectories of tests/data/corpus); the sweep is the
grid tool_aging.tail_turns=1..3 × result_cap.max_tool_result_chars=1000,16000 under the
default preset (six settings, the default point among them), each session rendered
for the provider it was recorded for.

* ``cold`` — every setting measured (a fresh cache folder each round), with one
  worker and with a pool of two per batch call;
* ``cached`` — the same sweep again on a cache that holds it: what a repeated run
  costs (nothing is measured; the inputs are read and hashed, the report is built);
* ``halving`` — successive halving from 6 settings over the same sessions.

``extra_info`` records settings measured, sessions and requests replayed, so
settings/s and requests/s follow from the median.  The figures are in
benches/README.md ("Tuning").  Under ``make test`` each runs once.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from tests.corpus import FIRST

from ctxrules.config import PipelineConfig
from ctxrules.tune import tune

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "corpus"
SOURCES = [
    str(CORPUS / rel)
    for rel in FIRST
    if rel.startswith(("claude-code-jsonl/", "openhands-trajectory/", "swe-agent-traj/"))
]
PARAMS = ["tool_aging.tail_turns=1..3", "result_cap.max_tool_result_chars=1000,16000"]
BASE = PipelineConfig.preset("default")
_rounds = itertools.count()


def _info(benchmark, result) -> None:
    benchmark.extra_info.update(
        settings=len(result.results) + len(result.partial),
        measured=result.measured,
        reused=result.reused,
        sessions=len(result.sessions),
        session_replays=result.replayed_sessions,
        requests=result.replayed_requests,
    )


@pytest.mark.parametrize("jobs", [1, 2])
def test_cold(benchmark, tmp_path, jobs):
    def sweep():
        return tune(SOURCES, PARAMS, base=BASE, jobs=jobs, cache_dir=tmp_path / f"c{next(_rounds)}")

    result = benchmark.pedantic(sweep, rounds=3, iterations=1)
    assert result.measured == 6 and result.reused == 0  # the default (3, 16000) is one of them
    assert len(result.sessions) == 6
    _info(benchmark, result)


def test_cached(benchmark, tmp_path):
    cache = tmp_path / "cache"
    tune(SOURCES, PARAMS, base=BASE, jobs=1, cache_dir=cache)
    result = benchmark.pedantic(
        lambda: tune(SOURCES, PARAMS, base=BASE, jobs=1, cache_dir=cache), rounds=5, iterations=1
    )
    assert result.measured == 0 and result.reused == 6
    _info(benchmark, result)


@pytest.mark.parametrize("budget", [6])
def test_halving(benchmark, budget):
    result = benchmark.pedantic(
        lambda: tune(
            SOURCES, PARAMS, base=BASE, jobs=1, search="halving", budget=budget, objective="tokens"
        ),
        rounds=3,
        iterations=1,
    )
    assert result.search == "halving" and result.partial
    _info(benchmark, result)
