"""Idle clearing: aged results idle for idle_minutes (by the injected now) get the placeholder."""

from __future__ import annotations

from ctxrules.commit import Pipeline
from ctxrules.rules import CLEARED_PLACEHOLDER, IdleClearing, ToolAging
from ctxrules.testing import Script, Step, check_rule, drive

AGING = ToolAging(tail_turns=1, step_turns=1)


def _states(steps, idle=60.0):
    runs = drive(Script(steps), Pipeline.of([AGING, IdleClearing(idle_minutes=idle)]))
    return [[it.state for it in gen.commit.items if it.role == "tool"] for _, gen, _ in runs]


def test_aged_result_is_cleared_only_after_idle_minutes():
    steps = [
        Step(tools=[("Read", 200, False)], minutes=1),
        Step(minutes=1),
        Step(minutes=30),
        Step(minutes=31),
    ]
    history = _states(steps)
    assert history[1] == ["aged"]  # aged at minute 2
    assert history[2] == ["aged"]  # 30 minutes idle
    assert history[3] == ["cleared"]  # 61 minutes idle


def test_cleared_items_share_one_fixed_placeholder():
    steps = [Step(tools=[("Read", 200, False), ("Bash", 900, True)])] + [Step(minutes=61)] * 3
    runs = drive(Script(steps), Pipeline.of([AGING, IdleClearing()]))
    cleared = [it for it in runs[-1][1].commit.items if it.state == "cleared"]
    assert len(cleared) == 2
    assert {it.rendered for it in cleared} == {CLEARED_PLACEHOLDER}
    assert {it.reason for it in cleared} == {"idle_60min"}


def test_full_items_are_never_cleared_directly():
    steps = [Step(tools=[("Read", 200, False)]), Step(minutes=600)]
    runs = drive(Script(steps), Pipeline.of([IdleClearing()]))
    assert [it.state for it in runs[-1][1].commit.items if it.role == "tool"] == ["full"]


def test_idle_clearing_keeps_the_invariants():
    check_rule(IdleClearing(idle_minutes=1), examples=15)


def test_promise_holds_and_catches_an_idle_result_left_aged():
    rule = IdleClearing(idle_minutes=60)
    steps = [Step(tools=[("Read", 200, False)]), Step(), Step(minutes=61)]
    kept = drive(Script(steps), Pipeline.of([AGING, rule]))[-1][1].commit
    assert rule.check_promise(kept) == [] and "cleared" in [it.state for it in kept.items]
    left = drive(Script(steps), Pipeline.of([AGING]))[-1][1].commit  # aged, never cleared
    (broken,) = rule.check_promise(left)
    assert "is aged and idle since" in broken
