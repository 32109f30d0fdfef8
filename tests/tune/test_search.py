"""Which settings grid, random and successive-halving search measure: the grid is
``itertools.product``, a random sample is a seeded subset of it, halving keeps the
better half each round on more sessions."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxrules.config import PipelineConfig
from ctxrules.errors import ConfigError
from ctxrules.tune import (
    Param,
    Setting,
    grid,
    grid_size,
    halving,
    halving_rounds,
    parse_params,
    random_settings,
    setting_at,
    starting_settings,
)

PARAMS = parse_params(
    [
        "tool_aging.tail_turns=1..6",
        "result_cap.max_tool_result_chars=1000,2000,4000,8000",
        "result_cap.head_ratio=0.4..0.6:0.1",
    ],
    PipelineConfig.preset("default"),
)
KEYS = ["tool_aging.tail_turns", "result_cap.max_tool_result_chars", "result_cap.head_ratio"]


def product() -> list[tuple]:
    return list(itertools.product([1, 2, 3, 4, 5, 6], [1000, 2000, 4000, 8000], [0.4, 0.5, 0.6]))


def as_tuples(settings: list[Setting]) -> list[tuple]:
    assert all([k for k, _ in s.items] == KEYS for s in settings)
    return [tuple(v for _, v in s.items) for s in settings]


def test_the_grid_is_the_product_in_order():
    assert as_tuples(list(grid(PARAMS))) == product()
    assert grid_size(PARAMS) == 72


def test_setting_at_is_the_product_at_that_index():
    expected = product()
    assert [tuple(v for _, v in setting_at(PARAMS, i).items) for i in range(72)] == expected


def test_a_random_sample_is_distinct_settings_of_the_grid_in_grid_order():
    picked = as_tuples(random_settings(PARAMS, 10, seed=3))
    assert len(picked) == len(set(picked)) == 10
    expected = product()
    assert set(picked) <= set(expected)
    assert picked == sorted(picked, key=expected.index)


def test_a_random_sample_is_fixed_by_its_seed():
    assert random_settings(PARAMS, 10, seed=3) == random_settings(PARAMS, 10, seed=3)
    samples = {tuple(as_tuples(random_settings(PARAMS, 10, seed=s))) for s in range(5)}
    assert len(samples) > 1  # five seeds do not all draw the same ten of 72


def test_a_budget_as_large_as_the_grid_takes_all_of_it():
    assert as_tuples(random_settings(PARAMS, 72, seed=1)) == product()
    assert as_tuples(random_settings(PARAMS, 500, seed=1)) == product()


def test_a_huge_grid_is_sampled_without_being_built():
    huge = [Param("r", f"p{i}", tuple(range(1000)), f"r.p{i}=0..999") for i in range(6)]
    assert grid_size(huge) == 1000**6
    picked = random_settings(huge, 5, seed=0)
    assert len(set(picked)) == 5
    for s in picked:
        assert all(0 <= v < 1000 for _, v in s.items)


def test_auto_sweeps_a_small_grid_and_halves_a_large_one():
    search, settings = starting_settings(PARAMS, "auto", 100, seed=0)
    assert search == "grid" and as_tuples(settings) == product()
    search, settings = starting_settings(PARAMS, "auto", 16, seed=0)
    assert search == "halving" and settings == random_settings(PARAMS, 16, seed=0)
    search, settings = starting_settings(PARAMS, "grid", 16, seed=0)
    assert search == "grid" and len(settings) == 72  # grid ignores the budget
    search, settings = starting_settings(PARAMS, "random", 7, seed=2)
    assert search == "random" and settings == random_settings(PARAMS, 7, seed=2)
    with pytest.raises(ConfigError, match="--budget must be at least 1"):
        starting_settings(PARAMS, "random", 0, seed=0)


@pytest.mark.parametrize(
    ("settings", "sessions", "expected"),
    [
        (16, 8, [1, 2, 4, 8]),  # three halvings: 16 -> 8 -> 4 -> 2
        (16, 100, [7, 13, 25, 50, 100]),  # four halvings take 16 settings to 1
        (5, 3, [2, 3]),  # one halving: 3 sessions allow no more
        (1, 10, [10]),  # one setting: nothing to halve
        (10, 1, [1]),  # one session: a plain random search
        (3, 4, [1, 2, 4]),
    ],
)
def test_halving_rounds(settings, sessions, expected):
    assert halving_rounds(settings, sessions) == expected


def test_halving_keeps_the_better_half_on_more_sessions_each_round():
    settings = [Setting((("r.p", v),)) for v in range(8)]
    sessions = [f"s{i}" for i in range(8)]
    calls: list[tuple[int, tuple[str, ...]]] = []

    def measure(setting, subset):
        value = setting.items[0][1]
        calls.append((value, subset))
        return value

    def best_first(results):  # smaller is better
        return sorted(range(len(results)), key=lambda i: results[i])

    rounds = halving(settings, sessions, measure, best_first, seed=5)
    assert [(r, v) for r, v in rounds] == [
        (0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7),
        (1, 0), (1, 1), (1, 2), (1, 3),
        (2, 0), (2, 1),
        (3, 0),
    ]  # fmt: skip
    subsets = [subset for _, subset in calls]
    assert [len(s) for s in subsets] == [1] * 8 + [2] * 4 + [4] * 2 + [8]
    # Each round's sessions start with the previous round's: one shuffled order.
    assert subsets[8][:1] == subsets[0] and subsets[12][:2] == subsets[8]
    assert sorted(subsets[-1]) == sessions
    again: list = []
    halving(settings, sessions, lambda s, sub: again.append(sub) or 0, best_first, seed=5)
    assert again[0] == subsets[0]  # the order is fixed by the seed


@given(st.integers(1, 40), st.integers(1, 40))
def test_halving_rounds_grow_to_every_session(settings, sessions):
    counts = halving_rounds(settings, sessions)
    assert counts[-1] == sessions and counts[0] >= 1
    assert all(a < b for a, b in itertools.pairwise(counts))
    assert len(counts) - 1 <= max(0, (settings - 1).bit_length())
