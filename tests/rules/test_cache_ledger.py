"""The cache ledger: a rule changes what the provider has cached only when the change
pays for the rewrite within its payback horizon; a cold cache or a rewrite already made
in the same commit makes a change free (edits are batched into it); a compaction starts
a new epoch."""

from __future__ import annotations

import itertools

import pytest

from ctxrules.commit import Pipeline
from ctxrules.ruleapi import CacheLedger
from ctxrules.ruleapi.cache import AT, CACHE_READ, CACHE_WRITE, REQUESTS, TTL_SECONDS
from ctxrules.rules import CLEARED_PLACEHOLDER, IdleClearing, ResultCap, Summarize, ToolAging
from ctxrules.testing import Script, Step, check_rule, drive

#: A long answer early in the session: the cached conversation is much larger than
#: any one result, so rewriting it costs more than shortening one result saves.
LONG = " ".join(f"word{k} module_{k % 97}.py" for k in range(3000))
MID = " ".join(f"note{k} part_{k % 89}.md" for k in range(600))


def _ledger(*, cached: int, requests: int, elapsed: float = 60.0, rewritten: bool = False):
    return CacheLedger(
        now=10_000.0,
        cursors={AT: int(10_000 - elapsed), REQUESTS: requests},
        cached_tokens=cached,
        has_parent=True,
        rewritten=lambda: rewritten,
    )


def _tools(commit):
    return [it for it in commit.items if it.role == "tool"]


# -- the ledger's arithmetic ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("cached", "saved", "requests", "payback"),
    [(10_000, 5_000, 20, 20), (10_000, 5_000, 5, 20), (10_000, 5_000, 50, 5), (8_000, 300, 40, 40)],
)
def test_a_change_pays_when_its_savings_over_the_horizon_exceed_the_rewrite(
    cached, saved, requests, payback
):
    ledger = _ledger(cached=cached, requests=requests)
    horizon = min(requests, payback)
    # This request writes what it would have read (less the saving); each of the next
    # `horizon` requests reads `saved` tokens fewer.
    extra = (cached - saved) * CACHE_WRITE - cached * CACHE_READ
    assert ledger.horizon(payback) == horizon
    assert ledger.rewrite_tokens() == cached
    assert ledger.pays(saved, payback=payback) == (saved * CACHE_READ * horizon >= extra)
    # One reckoning for a rule's note: empty exactly when it pays, else why_not's words.
    why = ledger.refusal(saved, payback=payback)
    assert (why == "") == (saved * CACHE_READ * horizon >= extra)
    assert why in ("", ledger.why_not(saved, payback=payback))
    assert ledger.refusal(0, payback=payback) == ledger.why_not(0, payback=payback)


def test_the_payback_horizon_bounds_the_requests_counted():
    assert _ledger(cached=10_000, requests=20).pays(5_000, payback=20)
    assert not _ledger(cached=10_000, requests=20).pays(5_000, payback=5)
    assert not _ledger(cached=10_000, requests=3).pays(5_000, payback=20)


def test_a_cold_cache_or_a_rewrite_already_made_makes_a_change_free():
    cold = _ledger(cached=50_000, requests=1, elapsed=TTL_SECONDS + 1)
    assert cold.cold and cold.rewrite_tokens() == 0 and cold.pays(1, payback=1)
    warm = _ledger(cached=50_000, requests=1, elapsed=TTL_SECONDS)
    assert not warm.cold and not warm.pays(1_000, payback=20)
    batched = _ledger(cached=50_000, requests=1, rewritten=True)
    assert batched.rewrite_tokens() == 0 and batched.pays(1, payback=1)
    assert not batched.pays(0, payback=1)  # a change that saves nothing never pays


# -- rules that wait until a rewrite pays ---------------------------------------------------


def _aging_script(last_minutes: float) -> Script:
    return Script(
        [Step(assistant=LONG), Step(tools=[("Read", 4000, False)])]
        + [Step() for _ in range(3)]
        + [Step(minutes=last_minutes)]
    )


def test_aging_that_would_not_pay_for_the_rewrite_is_not_made():
    # Aging the result saves ~1K tokens a request, but the request that shows the stub
    # writes the whole cached conversation (~10K tokens) again: it waits.
    rule = ToolAging(tail_turns=1, step_turns=1, cache_aware=True)
    runs = drive(_aging_script(1), Pipeline.of([rule]))
    for _, gen, _ in runs[2:]:
        assert [it.state for it in _tools(gen.commit)] == ["full"]
        assert any("would not pay" in n for n in gen.commit.notes)
    assert check_rule is not None and rule.check_promise(runs[-1][1].commit) == []


def test_aging_waits_for_the_cache_to_go_cold_then_ages_at_once():
    rule = ToolAging(tail_turns=1, step_turns=4, cache_aware=True)
    runs = drive(_aging_script(TTL_SECONDS / 60 + 1), Pipeline.of([rule]))
    before, last = runs[-2][1].commit, runs[-1][1].commit
    assert [it.state for it in _tools(before)] == ["full"]
    # Cold: everything is written anyway, so the result ages though fewer than
    # step_turns turns left the window since the boundary last moved.
    assert [it.state for it in _tools(last)] == ["aged"]


def test_idle_clearing_waits_while_the_cache_is_warm():
    aging = ToolAging(tail_turns=1, step_turns=1)
    rule = IdleClearing(idle_minutes=1, cache_aware=True)
    steps = [Step(assistant=LONG), Step(tools=[("Read", 400, False)])] + [Step()] * 4
    runs = drive(Script(steps), Pipeline.of([aging, rule]))
    last = runs[-1][1].commit
    assert [it.state for it in _tools(last)] == ["aged"]
    assert any("idle_clearing: waiting" in n for n in last.notes)
    assert rule.check_promise(last) == []
    cold = drive(Script([*steps, Step(minutes=10)]), Pipeline.of([aging, rule]))
    assert [it.rendered for it in _tools(cold[-1][1].commit)] == [CLEARED_PLACEHOLDER]
    plain = drive(Script(steps), Pipeline.of([aging, IdleClearing(idle_minutes=1)]))
    assert [it.state for it in _tools(plain[-1][1].commit)] == ["cleared"]


def test_edits_ride_on_a_rewrite_another_rule_made_in_the_same_commit():
    # Aging (not cache-aware) changes a cached result every turn: clearing the idle
    # stubs in the same commit costs nothing more, so they are cleared at once.
    aging = ToolAging(tail_turns=1, step_turns=1)
    rule = IdleClearing(idle_minutes=1, cache_aware=True)
    steps = [Step(assistant=LONG)] + [Step(tools=[("Read", 400, False)]) for _ in range(6)]
    last = drive(Script(steps), Pipeline.of([aging, rule]))[-1][1].commit
    states = [it.state for it in _tools(last)]
    assert "cleared" in states and not any("waiting" in n for n in last.notes)


def test_capping_an_old_result_waits_until_it_pays():
    rule = ResultCap(max_tool_result_chars=1000, cache_aware=True)
    steps = [Step(assistant=LONG), Step(tools=[("Read", 3000, False)]), Step(), Step()]
    runs = drive(Script(steps), Pipeline.of([rule]))
    for _, gen, _ in runs[2:]:
        (tool,) = _tools(gen.commit)
        assert len(tool.rendered) == 3000  # whole: capping would rewrite the cache
        assert any("result_cap: waiting" in n for n in gen.commit.notes)
        assert rule.check_promise(gen.commit) == []
    cold = drive(Script([*steps, Step(minutes=10)]), Pipeline.of([rule]))
    (tool,) = _tools(cold[-1][1].commit)
    assert tool.reason == "result_cap:1000" and len(tool.rendered) < 3000


def test_a_cap_is_priced_at_what_it_takes_off():
    # A cached result of token-dense output, most of the cached conversation (a short
    # session's shape): its cut keeps 1,000 characters and names up to 1,000 more of
    # the cut part's identifiers.  Priced at the text's share alone (9/10 of it) the cut
    # paid at once; what it really takes off does not pay within these requests.
    steps = [Step(tools=[("Read", 10_000, False)]), Step(), Step()]
    rule = ResultCap(max_tool_result_chars=1000, cache_aware=True)
    runs = [gen.commit for _, gen, _ in drive(Script(steps), Pipeline.of([rule]))]
    plain = drive(Script(steps), Pipeline.of([ResultCap(max_tool_result_chars=1000)]))
    (whole,), (cut,) = _tools(runs[0]), _tools(plain[1][1].commit)
    assert cut.reason == "result_cap:1000"
    saved = whole.tokens - cut.tokens
    for parent, commit in itertools.pairwise(runs):
        ledger = CacheLedger(
            now=commit.created_at,
            cursors=parent.cursors,
            cached_tokens=parent.total_tokens,
            has_parent=True,
            rewritten=lambda: False,
        )
        (tool,) = _tools(commit)
        capped = tool.reason == "result_cap:1000"
        assert capped == ledger.pays(saved, payback=rule.payback), commit.notes
        assert capped or any(f"~{saved:,} tokens fewer" in n for n in commit.notes)


def test_a_fold_that_would_not_pay_waits_and_says_why():
    # Folding the first answer (~3.6K tokens into a ~1.8K summary) saves too little
    # to pay for rewriting the ~24K cached tokens within the requests so far.
    rule = Summarize(threshold_tokens=22_000, target_ratio=1.0, keep_tail_turns=1, cache_aware=True)
    steps = [Step(assistant=MID), Step(assistant=LONG), Step(), Step()]
    runs = drive(Script(steps), Pipeline.of([rule]))
    for _, gen, _ in runs[1:]:
        assert not any(it.state == "summary" for it in gen.commit.items)
        assert any("would not pay" in n for n in gen.commit.notes)
        assert rule.check_promise(gen.commit) == []
    cold = drive(Script([*steps, Step(minutes=10)]), Pipeline.of([rule]))[-1][1].commit
    assert any(it.state == "summary" for it in cold.items)
    plain = Summarize(threshold_tokens=22_000, target_ratio=1.0, keep_tail_turns=1)
    folded = drive(Script(steps[:2]), Pipeline.of([plain]))[-1][1].commit
    assert any(it.state == "summary" for it in folded.items)


def test_a_short_run_before_the_task_does_not_hold_back_the_folds_after_it():
    # A slash-command line and its answer come before the task anchor: a run the anchor
    # closes, shorter than any summary, so folding it never pays while the cache is
    # warm.  The long answer after the task pays for its fold; waiting for the short run
    # first kept the whole history full until the cache went cold.
    rule = Summarize(
        threshold_tokens=4000, target_ratio=0.5, keep_tail_turns=1, cache_aware=True, payback=20
    )
    for first in ([], [Step(kind="command")]):
        steps = [*first, Step(assistant=LONG), *(Step() for _ in range(4))]
        runs = drive(Script(steps), Pipeline.of([rule]))
        last = runs[-1][1].commit
        assert any(it.state == "summary" for it in last.items), (first, last.notes)
        assert last.total_tokens < 4000
        for _, gen, _ in runs:
            assert rule.check_promise(gen.commit) == []
    # the short run stays as it is, and a commit says so
    assert all(it.state == "full" for it in last.items[:2])
    assert any(
        "stepped over 2 item(s)" in n and "would not pay within 20 requests" in n
        for _, gen, _ in runs
        for n in gen.commit.notes
    )


@pytest.mark.parametrize("cls", [ToolAging, IdleClearing, ResultCap, Summarize])
def test_cache_aware_rules_keep_the_invariants(cls):
    extra = {"tail_turns": 1, "step_turns": 1} if cls is ToolAging else {}
    if cls is Summarize:
        extra = {"threshold_tokens": 2000, "keep_tail_turns": 1}
    if cls is ResultCap:
        extra = {"max_tool_result_chars": 1000}
    check_rule(cls(cache_aware=True, payback=3, **extra), examples=15)


# -- the ledger's state -------------------------------------------------------------------


def test_the_ledger_counts_answers_and_a_compaction_starts_a_new_epoch():
    steps = [Step(tools=[("Read", 200, False)]) for _ in range(3)] + [Step(compact="full")]
    runs = drive(Script([*steps, Step(), Step()]), Pipeline.of([ToolAging()]))
    cursors = [gen.commit.cursors for _, gen, _ in runs]
    assert [c[REQUESTS] for c in cursors] == [1, 2, 3, 0, 1, 2]
    assert [c[AT] for c in cursors] == [int(gen.commit.created_at) for _, gen, _ in runs]
    off = drive(Script(steps), Pipeline.of([]))  # no rules: no ledger
    assert all(REQUESTS not in gen.commit.cursors for _, gen, _ in off)
