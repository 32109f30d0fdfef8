"""Probes: a command's work is bounded before it starts.  A tune grid is counted, not
built (a grid of 10^16 settings is refused at once with one line, where the old code
built it until memory ran out); a budget past the limit is refused; a random sample of
a grid larger than a C long is drawn without a range of that size; a parameter of
10,000 values gets a readable plot (ticks thinned) instead of 10,000 labels; a worker
count past the limit is refused before any process starts.

Against the code before issue 25: the grid and the budget ended in MemoryError
tracebacks, the sample in an OverflowError, the plot carried 10,000 tick labels, and
``--jobs 1000000`` was accepted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ctxrules.store import open_store
from ctxrules.tune import Param, random_settings
from ctxrules.tune import plot as tune_plot
from ctxrules.tune.results import SessionMetrics, aggregate
from ctxrules.tune.sweep import ParamInfo, TuneResult

sys.path.insert(0, str(Path(__file__).parent))
from _cli import ctxrules, one_line_error, tau_sessions

HUGE = [f"--param={p}" for p in (
    "tool_aging.tail_turns=1..10000",
    "result_cap.max_tool_result_chars=1000..10999",
    "summarize.threshold_tokens=20000..29999",
    "tool_aging.step_turns=1..10000",
)]  # fmt: skip


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return tau_sessions(tmp_path_factory.mktemp("src"), 2)


def test_a_huge_grid_is_counted_and_refused_before_anything_runs(tmp_path, source):
    proc = ctxrules(
        "tune", str(source), *HUGE, "--preset", "aggressive", "--search", "grid",
        "--out", str(tmp_path / "o"), timeout=240,
    )  # fmt: skip
    one_line_error(proc, "10,000,000,000,000,000 settings", "--search random")
    assert not (tmp_path / "o").exists()


def test_a_budget_past_the_limit_is_refused(tmp_path, source):
    proc = ctxrules(
        "tune", str(source), *HUGE, "--preset", "aggressive", "--search", "random",
        "--budget", "1000000000000", "--out", str(tmp_path / "o"), timeout=240,
    )  # fmt: skip
    one_line_error(proc, "--budget", "at most 10,000")


def test_a_sample_of_a_grid_beyond_a_c_long_is_drawn():
    params = [Param("r", f"p{i}", tuple(range(10_000)), f"r.p{i}=0..9999") for i in range(8)]
    picked = random_settings(params, 5, seed=1)  # a grid of 10^32 settings
    assert len(picked) == len(set(picked)) == 5
    assert picked == random_settings(params, 5, seed=1)  # deterministic given the seed


def test_a_sample_is_announced(tmp_path, source):
    proc = ctxrules(
        "tune", str(source), "--param", "tool_aging.tail_turns=1..200", "--preset", "aggressive",
        "--search", "random", "--budget", "2", "--jobs", "1", "--out", str(tmp_path / "o"),
        "--json", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "the grid holds 200 settings; --search random measures 2 of them" in proc.stderr


def test_the_sweep_plot_of_a_long_range_labels_few_ticks(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    values = tuple(range(1, 10_001))
    results = tuple(
        aggregate(
            {"tool_aging.tail_turns": v},
            f"tail_turns={v}",
            [
                SessionMetrics(
                    session_id="s",
                    requests=1,
                    prompt_tokens=1000 - v // 20,
                    cache_read_tokens=0,
                    cost_usd=0.01,
                    compactions=0,
                    older_kept=1,
                    older_needed=1,
                )
            ],
        )
        for v in (1, 500, 9999)
    )
    result = TuneResult(
        objective="cost", search="random", seed=0, budget=3, provider=None, model=None,
        sessions=("s",), params=(ParamInfo(key="tool_aging.tail_turns", values=values, default=2),),
        results=results, partial=(), frontier=(0,), chosen=0, toml="", measured=3, reused=0,
        replayed_sessions=3, replayed_requests=3, version="0",
    )  # fmt: skip
    figures = []
    made = tune_plot._figure
    monkeypatch.setattr(tune_plot, "_figure", lambda *a: figures.append(made(*a)) or figures[-1])
    tune_plot.plot_sweep(result, tmp_path / "sweep.png")
    (axes,) = figures[0].axes
    labels = [t.get_text() for t in axes.get_xticklabels() if t.get_text()]
    assert 2 <= len(labels) <= 30  # readable on a panel 4 inches wide
    assert labels[0] == "1"
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_a_worker_count_past_the_limit_is_refused(tmp_path):
    empty = tmp_path / "empty"
    open_store(str(empty)).close()
    one_line_error(ctxrules("rerender", str(empty), "--jobs", "1000000", "--quiet"), "--jobs")
