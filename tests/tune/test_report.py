"""The files a tune writes: CSV and JSON that agree with the result, non-empty PNG
plots, and the chosen configuration as TOML."""

from __future__ import annotations

import csv
import io
import json

import pytest
from PIL import Image
from rich.console import Console

from ctxrules.config import PipelineConfig, load_config
from ctxrules.tune import SessionMetrics, _batch, print_table, tune, write_report

PARAMS = ["tool_aging.tail_turns=1..2", "summarize.threshold_tokens=2000,100000"]


@pytest.fixture(scope="module")
def result(sources):
    return tune(sources, PARAMS, base=PipelineConfig.preset("default"), jobs=1)


@pytest.fixture(scope="module")
def written(result, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return write_report(result, out)


def test_the_files(written):
    assert set(written) == {"json", "csv", "frontier", "sweep", "toml"}
    assert all(p.is_file() and p.stat().st_size > 0 for p in written.values())


@pytest.mark.parametrize("name", ["frontier", "sweep"])
def test_the_plots_are_real_pngs(written, name):
    path = written[name]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as img:
        img.load()
        assert img.format == "PNG"
        width, height = img.size
        assert width >= 400 and height >= 300
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50  # drawn on, not a blank page
    import matplotlib.image

    assert matplotlib.image.imread(path).shape[:2] == (height, width)


def test_the_json_is_the_result(written, result):
    data = json.loads(written["json"].read_text(encoding="utf-8"))
    assert data["objective"] == "cost" and data["chosen"] == result.chosen
    assert data["frontier"] == list(result.frontier)
    assert [r["label"] for r in data["results"]] == [r.label for r in result.results]
    for row, r in zip(data["results"], result.results):
        assert row["prompt_tokens"] == r.prompt_tokens and row["quality"] == r.quality
        assert [s["session_id"] for s in row["per_session"]] == list(result.sessions)
        assert sum(s["prompt_tokens"] for s in row["per_session"]) == r.prompt_tokens
    assert data["toml"] == result.toml


def test_the_csv_has_a_row_per_setting(written, result):
    with written["csv"].open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(result.results)
    by_label = {r.label: r for r in result.results}
    assert {row["setting"] for row in rows} == set(by_label)
    for row in rows:
        r = by_label[row["setting"]]
        assert int(row["tool_aging.tail_turns"]) == r.setting["tool_aging.tail_turns"]
        assert int(row["prompt_tokens"]) == r.prompt_tokens
        assert int(row["cache_read_tokens"]) == r.cache_read_tokens
        assert float(row["cost_usd"]) == pytest.approx(r.cost_usd)
        assert float(row["quality"]) == pytest.approx(r.quality)
        assert row["default"] == str(r.default)
    chosen = [row for row in rows if row["chosen"] == "True"]
    assert [row["setting"] for row in chosen] == [result.results[result.chosen].label]
    costs = [float(row["cost_usd"]) for row in rows]
    assert costs == sorted(costs)  # best first


def test_the_toml_file_loads(written, result):
    config = load_config(written["toml"])
    chosen = result.results[result.chosen].setting
    rules = {r.name: r for r in config.build()}
    assert rules["tool_aging"].tail_turns == chosen["tool_aging.tail_turns"]
    assert rules["summarize"].threshold_tokens == chosen["summarize.threshold_tokens"]


def test_the_table(result):
    buf = io.StringIO()
    print_table(result, Console(file=buf, width=220))
    text = buf.getvalue()
    for r in result.results:
        assert f"{r.prompt_tokens:,}" in text
    assert "→" in text and "★" in text and "◆" in text
    assert f"measured {result.measured}" in text


def test_violations_and_dropped_settings_are_marked(sources, tmp_path, monkeypatch):
    real = _batch.measure

    def broken(srcs, config, **kwargs):
        out = real(srcs, config, **kwargs)
        if config.rules.get("tool_aging", {}).get("tail_turns") == 1:
            out = [SessionMetrics(**{**_asdict(m), "violations": ("x",)}) for m in out]
        return out

    monkeypatch.setattr(_batch, "measure", broken)
    # a base whose own tail (3) is not the broken setting
    base = PipelineConfig.preset("default").with_params("tool_aging", tail_turns=3)

    def rows_of(res, folder):
        files = write_report(res, folder)
        with files["csv"].open(encoding="utf-8", newline="") as f:
            return {row["setting"]: row for row in csv.DictReader(f)}

    grid = rows_of(tune(sources, ["tool_aging.tail_turns=1..4"], base=base, jobs=1), tmp_path / "g")
    assert grid["tail_turns=1"]["status"] == "violations"
    assert grid["tail_turns=1"]["violations"] == "2"  # one per session
    assert grid["tail_turns=1"]["frontier"] == grid["tail_turns=1"]["chosen"] == "False"
    assert {row["status"] for s, row in grid.items() if s != "tail_turns=1"} == {"measured"}
    # Halving: 4 settings on 2 sessions, one round on 1 session; the broken one ranks
    # last and is dropped with its one-session figures.
    res = tune(
        sources, ["tool_aging.tail_turns=1..4"], base=base, jobs=1, search="halving", budget=4
    )
    halved = rows_of(res, tmp_path / "h")
    assert halved["tail_turns=1"]["status"] == "dropped"
    assert halved["tail_turns=1"]["sessions"] == "1"
    assert sum(row["status"] == "dropped" for row in halved.values()) == 2


def _asdict(m):
    import msgspec

    return msgspec.structs.asdict(m)
