"""A small tune over real corpus sessions, end to end through the library."""

from __future__ import annotations

import itertools

import pytest

from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig, load_config
from ctxrules.errors import ConfigError, PluginError, RenderError
from ctxrules.tune import (
    Param,
    Setting,
    _batch,
    parse_params,
    random_settings,
    setting_config,
    tune,
)

#: The default preset with a cap that cuts as soon as an answer follows (the preset's
#: cap is cache-aware: it waits until cutting pays, which these short sessions never
#: reach), so the cap's effect on tokens shows, and aging at every step with a tail of
#: 3 turns, so tokens grow with the tail and the default point (3, 16000) is inside
#: the swept grids.
BASE = (
    PipelineConfig.preset("default")
    .with_params("result_cap", cache_aware=False)
    .with_params("tool_aging", tail_turns=3, cache_aware=False)
)
CAPS = [1000, 4000, 8000, 16000]
TAILS = [1, 2, 3]


@pytest.fixture(scope="module")
def swept(three, tmp_path_factory):
    cache = tmp_path_factory.mktemp("tune") / "cache"
    return tune(
        three,
        ["tool_aging.tail_turns=1..3", "result_cap.max_tool_result_chars=1000,4000,8000,16000"],
        base=BASE,
        jobs=1,
        cache_dir=cache,
    )


def test_every_grid_setting_is_measured_on_every_session(swept, three):
    assert swept.search == "grid"
    grid = [(r.setting["tool_aging.tail_turns"], r.setting["result_cap.max_tool_result_chars"])
            for r in swept.results]  # fmt: skip
    assert grid == list(itertools.product(TAILS, CAPS))  # the default (3, 16000) is one of them
    assert len(swept.sessions) == len(three)  # one session per transcript
    assert all(r.sessions == len(three) for r in swept.results)
    # The recording fixes the requests; a rule setting cannot add or drop one.
    assert len({r.requests for r in swept.results}) == 1 and swept.results[0].requests > 0
    assert swept.partial == ()


def test_the_default_point_is_the_tuned_configuration(swept):
    (default,) = [r for r in swept.results if r.default]
    assert default.setting == {
        "tool_aging.tail_turns": 3,
        "result_cap.max_tool_result_chars": 16000,
    }


def test_a_much_smaller_cap_sends_fewer_tokens(swept):
    """result_cap at 1,000 characters cuts the two long tool results of the OpenHands
    trajectory (2,197 and 4,017 characters), which 8,000 leaves whole."""
    by = {
        (r.setting["tool_aging.tail_turns"], r.setting["result_cap.max_tool_result_chars"]): r
        for r in swept.results
    }
    for tail in TAILS:
        assert by[tail, 1000].prompt_tokens < by[tail, 8000].prompt_tokens


def test_frontier_and_choice(swept):
    results = swept.results
    front = [results[i] for i in swept.frontier]
    assert front and all(r.ok for r in front)
    costs = [r.cost_usd for r in front]
    assert costs == sorted(costs)  # listed by objective
    for r in results:  # nothing beats a frontier point on both axes
        for f in front:
            assert not (
                r.cost_usd <= f.cost_usd
                and r.quality >= f.quality
                and (r.cost_usd < f.cost_usd or r.quality > f.quality)
            )
    chosen = results[swept.chosen]
    (default,) = [r for r in results if r.default]
    assert swept.chosen in swept.frontier and chosen.quality >= default.quality
    assert chosen.cost_usd <= default.cost_usd


def test_the_chosen_toml_loads_back_to_the_chosen_setting(swept, tmp_path):
    path = tmp_path / "ctxrules.toml"
    path.write_text(swept.toml, encoding="utf-8")
    loaded = load_config(path)
    chosen = swept.results[swept.chosen]
    expected = setting_config(BASE, Setting(tuple(chosen.setting.items())))
    assert Pipeline.from_config(loaded).version == Pipeline.from_config(expected).version
    rules = {r.name: r for r in loaded.build()}
    assert rules["tool_aging"].tail_turns == chosen.setting["tool_aging.tail_turns"]
    cap = chosen.setting["result_cap.max_tool_result_chars"]
    assert rules["result_cap"].max_tool_result_chars == cap


def test_the_same_setting_gives_the_same_figures(sources):
    one = tune(sources, ["tool_aging.tail_turns=2"], base=BASE, jobs=1)
    two = tune(sources, ["tool_aging.tail_turns=2"], base=BASE, jobs=1)
    assert [r.per_session for r in one.results] == [r.per_session for r in two.results]


def test_violations_exclude_a_setting(sources, monkeypatch):
    """A setting whose replay reports violations is shown but never on the frontier."""
    real = _batch.measure

    def broken_at_one(srcs, config, **kwargs):
        out = real(srcs, config, **kwargs)
        if config.rules.get("tool_aging", {}).get("tail_turns") == 1:
            out[0] = type(out[0])(**{**_fields(out[0]), "violations": ("pairing broken",)})
        return out

    monkeypatch.setattr(_batch, "measure", broken_at_one)
    result = tune(sources, ["tool_aging.tail_turns=1..2"], base=BASE, jobs=1, objective="tokens")
    (bad,) = [r for r in result.results if r.setting["tool_aging.tail_turns"] == 1]
    assert bad.violation_count == 1 and bad.violations == ("pairing broken",)
    assert result.results.index(bad) not in result.frontier
    assert result.results[result.chosen] is not bad


def _fields(m):
    import msgspec

    return msgspec.structs.asdict(m)


PARAMS4 = ["tool_aging.tail_turns=1..4", "result_cap.max_tool_result_chars=1000,16000"]


def test_halving_ends_with_survivors_on_every_session(three, tmp_path):
    def halve():
        return tune(
            three,
            PARAMS4,
            base=BASE,
            jobs=1,
            search="halving",
            budget=4,
            seed=1,
            objective="tokens",
        )

    result = halve()
    assert result.search == "halving"
    # 4 settings on 3 sessions: rounds of 2 and 3 sessions; 2 settings go on.
    survivors = [r for r in result.results if not r.default]
    assert len(survivors) == 2 and all(r.sessions == 3 for r in survivors)
    assert len(result.partial) == 2 and all(r.sessions == 2 for r in result.partial)
    started = {s.label for s in random_settings(parse_params(PARAMS4, BASE), 4, seed=1)}
    assert {r.label for r in [*survivors, *result.partial]} == started
    again = halve()
    assert [r.label for r in again.results] == [r.label for r in result.results]


PARAMS_BIG = ["tool_aging.tail_turns=1..6", "result_cap.max_tool_result_chars=1000,4000,8000,16000"]


def test_random_search_measures_the_budget(sources):
    result = tune(
        sources,
        PARAMS_BIG,
        base=BASE,
        jobs=1,
        search="random",
        budget=3,
        seed=4,
        objective="tokens",
    )
    assert result.search == "random"
    drawn = random_settings(parse_params(PARAMS_BIG, BASE), 3, seed=4)
    default = Setting((("tool_aging.tail_turns", 3), ("result_cap.max_tool_result_chars", 16000)))
    expected = [s.label for s in drawn] + ([] if default in drawn else [default.label])
    assert [r.label for r in result.results] == expected
    assert [r.default for r in result.results].count(True) == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"objective": "speed"}, ConfigError, "unknown objective"),
        ({"min_quality": 1.5}, ConfigError, "between 0 and 1"),
        ({"provider": "nope"}, PluginError, "no provider named 'nope'"),
        ({"provider": "anthropic", "model": "gpt-4o"}, RenderError, "belongs to the openai"),
    ],
)
def test_bad_options_fail_before_anything_runs(sources, monkeypatch, kwargs, error, says):
    def never(*a, **k):
        raise AssertionError("measured despite a bad option")

    monkeypatch.setattr(_batch, "measure", never)
    with pytest.raises(error, match=says):
        tune(sources, ["tool_aging.tail_turns=1..2"], base=BASE, jobs=1, **kwargs)
    with pytest.raises(ConfigError, match="nothing to tune"):
        tune(sources, [], base=BASE, jobs=1)
    with pytest.raises(ConfigError, match="unknown rule"):
        tune(sources, ["nope.x=1"], base=BASE, jobs=1)


def test_a_setting_the_rules_refuse_fails_first(sources, monkeypatch):
    """Parsed ``Param``s skip the text checks; every setting's whole configuration is
    still checked by the batch engine before anything is measured."""
    monkeypatch.setattr(_batch, "measure", lambda *a, **k: pytest.fail("measured"))
    unchecked = Param("tool_aging", "tail_turns", (2, -1), "tool_aging.tail_turns=2,-1", 3)
    with pytest.raises(ConfigError, match="tail_turns=-1 is not a valid configuration"):
        tune(sources, [unchecked], base=BASE, jobs=1)


def test_the_default_point_is_what_rerender_reports(swept, three):
    """tune's figures of a setting are the batch engine's for that configuration, as
    ``ctxrules rerender`` reports them (records and totals)."""
    from ctxrules.batch import ReplayOptions, rerender

    (default,) = [r for r in swept.results if r.default]
    run = rerender(three, ReplayOptions.of(BASE), jobs=1)
    by_id = {rec["session"]: rec for rec in run.records}
    assert [m.session_id for m in default.per_session] == sorted(by_id)
    for m in default.per_session:
        rec = by_id[m.session_id]
        assert m.requests == rec["requests"]
        assert m.prompt_tokens == rec["rules"]["prompt_tokens"]
        assert m.cache_read_tokens == rec["rules"]["cache_read_tokens"]
        assert m.cost_usd == rec["rules"]["cost_usd"]
        assert m.compactions == rec["rules"]["compactions"]
        quality = rec["rules"]["quality"]
        assert (m.older_kept, m.older_needed) == (quality["older_kept"], quality["older_needed"])
        assert (m.kept, m.needed) == (quality["kept"], quality["needed"])
    totals = run.totals["rules"]
    assert default.prompt_tokens == totals["prompt_tokens"]
    assert default.cost_usd == pytest.approx(totals["cost_usd"])
    share = totals["quality"]["older_recall"]
    assert default.quality == pytest.approx(1.0 if share is None else share, abs=1e-4)


def test_a_session_that_cannot_be_replayed(sources, monkeypatch):
    """A record with ``error`` makes a setting unusable; under the configuration being
    tuned it stops the run, naming the session."""
    from ctxrules.errors import CtxrulesError

    real = _batch.rerender

    def failing(srcs, options, **kwargs):
        result = real(srcs, options, **kwargs)
        tail = options.config["rules"].get("tool_aging", {}).get("tail_turns", 3)
        if tail in (1, 3):
            first = result.records[0]
            result.records[0] = {"session": first["session"], "error": "boom"}
        return result

    monkeypatch.setattr(_batch, "rerender", failing)
    with pytest.raises(CtxrulesError, match="cannot be replayed: boom"):
        tune(sources, ["tool_aging.tail_turns=1..2"], base=BASE, jobs=1)
    fixed = BASE.with_params("tool_aging", tail_turns=2)
    result = tune(sources, ["tool_aging.tail_turns=1..2"], base=fixed, jobs=1)
    (bad,) = [r for r in result.results if r.setting["tool_aging.tail_turns"] == 1]
    assert not bad.ok and "not replayed: boom" in bad.violations[0]
    assert result.results[result.chosen].setting["tool_aging.tail_turns"] == 2


def test_a_default_dropped_by_halving_is_listed_once_on_every_session(sources):
    # tokens grow with tail_turns on these sessions, so 3 and 4 are the worse half.
    result = tune(
        sources,
        ["tool_aging.tail_turns=1..4"],
        base=BASE,
        jobs=1,
        search="halving",
        budget=4,
        objective="tokens",
    )
    labels = [r.label for r in (*result.results, *result.partial)]
    assert sorted(labels) == sorted(f"tail_turns={t}" for t in (1, 2, 3, 4))
    (default,) = [r for r in (*result.results, *result.partial) if r.default]
    assert default.label == "tail_turns=3" and default.sessions == len(sources)
    assert default in result.results
    assert {r.label for r in result.partial} == {"tail_turns=4"}
