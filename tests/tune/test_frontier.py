"""The Pareto frontier of (objective ↓, quality ↑), checked against a brute-force
dominance test, and the choice of a setting on it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxrules.tune import SessionMetrics, aggregate, choose, frontier_ranks, pareto_front, ranked


def dominates(a, b) -> bool:
    return a[0] <= b[0] and a[1] >= b[1] and (a[0] < b[0] or a[1] > b[1])


def brute_front(points) -> list[int]:
    return [i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)]


def test_hand_made_points():
    points = [
        (10.0, 0.50),  # 0: cheapest
        (12.0, 0.80),  # 1
        (12.0, 0.70),  # 2: same cost as 1, less quality
        (15.0, 0.80),  # 3: dearer than 1 for the same quality
        (20.0, 1.00),  # 4: best quality
        (25.0, 0.90),  # 5: dominated by 4
        (20.0, 1.00),  # 6: a duplicate of 4
    ]
    assert pareto_front(points) == [0, 1, 4, 6]
    assert frontier_ranks(points) == [0, 0, 1, 1, 0, 1, 0]


def test_empty_and_single():
    assert pareto_front([]) == []
    assert pareto_front([(1.0, 0.0)]) == [0]
    assert frontier_ranks([]) == []


coords = st.integers(0, 6).map(float)


@given(st.lists(st.tuples(coords, coords), max_size=30))
def test_the_frontier_is_what_nothing_dominates(points):
    assert pareto_front(points) == brute_front(points)


@given(st.lists(st.tuples(coords, coords), max_size=25))
def test_ranks_peel_frontiers(points):
    ranks = frontier_ranks(points)
    left = list(range(len(points)))
    level = 0
    while left:
        front = [left[j] for j in brute_front([points[i] for i in left])]
        assert all(ranks[i] == level for i in front)
        left = [i for i in left if i not in front]
        level += 1


def result(cost, quality, *, violations=0, default=False, label="x"):
    found = round(quality * 100)
    m = SessionMetrics(
        session_id="s",
        requests=1,
        prompt_tokens=int(cost * 1000),
        cache_read_tokens=0,
        cost_usd=cost,
        compactions=0,
        older_kept=found,
        older_needed=100,
        violations=tuple(f"v{i}" for i in range(violations)),
    )
    return aggregate({"r.p": label}, label, [m], default=default)


def test_choose_the_cheapest_frontier_setting_as_good_as_the_default():
    results = [
        result(10, 0.50, label="cheap"),
        result(12, 0.80, label="mid"),
        result(14, 0.90, default=True, label="default"),
        result(16, 0.95, label="best"),
        result(8, 0.99, violations=2, label="broken"),
    ]
    assert choose(results, "cost") == 2  # nothing cheaper keeps 0.90
    assert choose(results, "cost", min_quality=0.8) == 1
    assert choose(results, "cost", min_quality=0.0) == 0
    # Nothing reaches the bar: the best quality on the frontier.
    assert choose(results, "cost", min_quality=0.99) == 3
    # A setting with violations is never chosen and ranks last.
    assert ranked(results, "cost")[-1] == 4
    assert choose([result(1, 1.0, violations=1)], "cost") is None


def test_the_default_wins_a_tie():
    results = [result(10, 0.9, label="a"), result(10, 0.9, default=True, label="d")]
    assert choose(results, "cost") == 1


def test_ranked_orders_by_frontier_then_objective():
    results = [
        result(20, 0.6, label="dominated"),
        result(15, 0.7, label="front-dear"),
        result(10, 0.5, label="front-cheap"),
        result(30, 0.9, violations=1, label="broken"),
    ]
    assert ranked(results, "cost") == [2, 1, 0, 3]
    assert ranked(results, "tokens") == [2, 1, 0, 3]


def test_aggregate_sums_sessions_and_pools_the_facts():
    a = SessionMetrics(
        session_id="a",
        requests=3,
        prompt_tokens=100,
        cache_read_tokens=40,
        cost_usd=0.5,
        compactions=1,
        older_kept=1,
        older_needed=4,
    )
    b = SessionMetrics(
        session_id="b",
        requests=2,
        prompt_tokens=50,
        cache_read_tokens=10,
        cost_usd=0.25,
        compactions=0,
        older_kept=6,
        older_needed=6,
        violations=("b: broken",),
    )
    r = aggregate({"r.p": 1}, "p=1", [a, b])
    assert (r.sessions, r.requests, r.prompt_tokens, r.cache_read_tokens) == (2, 5, 150, 50)
    assert r.cost_usd == 0.75 and r.compactions == 1
    assert r.quality == 7 / 10  # pooled older facts, not the mean of 0.25 and 1.0
    assert r.violation_count == 1 and not r.ok
    unpriced = aggregate({}, "", [a, msgspec_replace(b, cost_usd=None)])
    assert unpriced.cost_usd is None and unpriced.objective("cost") == float("inf")
    nothing = aggregate({}, "", [msgspec_replace(a, older_kept=0, older_needed=0)])
    assert nothing.quality == 1.0  # nothing was needed, nothing lost


def msgspec_replace(m, **changes):
    import msgspec

    return msgspec.structs.replace(m, **changes)
