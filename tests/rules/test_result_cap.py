"""Per-result cap: head + tail with a marker, in the tail window too."""

from __future__ import annotations

import re

from ctxrules.commit import Pipeline
from ctxrules.rules import ResultCap
from ctxrules.testing import Script, Step, check_rule, drive


def _tools(commit):
    return [it for it in commit.items if it.role == "tool"]


def test_an_old_oversized_result_is_cut_to_head_and_tail_the_newest_is_not():
    script = Script([Step(tools=[("Read", 6000, False), ("Grep", 100, False)]), Step()])
    runs = drive(script, Pipeline.of([ResultCap(max_tool_result_chars=1000)]))
    # While it is the newest input (the agent is about to read it) it stays whole.
    newest = _tools(runs[0][1].commit)[0]
    assert newest.reason == "new" and len(newest.rendered) == 6000
    big, small = _tools(runs[-1][1].commit)
    raw = _tools(drive(script, Pipeline.of([]))[-1][1].commit)[0].rendered
    assert len(raw) == 6000
    assert big.state == "full" and big.reason == "result_cap:1000"
    m = re.search(r"\[… ([\d,]+) of ([\d,]+) characters cut( …|;)", big.rendered)
    assert m and int(m.group(1).replace(",", "")) == 5000
    assert int(m.group(2).replace(",", "")) == 6000
    marker = re.search(r"\n\[… .*? …\]\n", big.rendered, re.S).group(0)
    head, tail = big.rendered.split(marker)
    assert raw.startswith(head) and raw.endswith(tail)
    assert len(head) == 600 and len(tail) == 400
    assert small.reason == "new" and len(small.rendered) == 100


def test_the_newest_result_is_cut_past_newest_max_chars():
    script = Script([Step(tools=[("Read", 9000, False)])])
    runs = drive(
        script, Pipeline.of([ResultCap(max_tool_result_chars=1000, newest_max_chars=5000)])
    )
    (big,) = _tools(runs[-1][1].commit)
    assert big.reason == "result_cap:5000" and "of 9,000 characters cut" in big.rendered


def test_result_cap_keeps_the_invariants():
    check_rule(ResultCap(max_tool_result_chars=500), examples=15)


def test_promise_holds_and_catches_an_uncapped_result():
    rule = ResultCap(max_tool_result_chars=1000)
    script = Script([Step(tools=[("Read", 6000, False), ("Grep", 2000, False)]), Step()])
    capped = drive(script, Pipeline.of([rule]))[-1][1].commit
    assert rule.check_promise(capped) == []
    plain = drive(script, Pipeline.of([]))[-1][1].commit  # the same results, not capped
    broken = rule.check_promise(plain)
    assert len(broken) == 2 and "6,000 characters > 1,000" in broken[0]


def _result(n: int) -> str:
    lines = [
        f"src/pkg/module_{i}.py:{i * 7}: def handler_{i}(request_id): return {i}" for i in range(n)
    ]
    return "\n".join(lines)


def test_a_cut_given_again_is_the_cut_made_afresh():
    # A rule keeps its cuts (a waiting cached result is cut at every commit): the kept
    # cut is the one a new rule makes, per text, limit and parameters.
    rule = ResultCap(cut_identifier_chars=300)
    text, other = _result(200), _result(150)
    for limit in (1000, 2000, 1000):
        for t in (text, other, text):
            assert rule._capped(t, limit) == ResultCap(cut_identifier_chars=300)._cut(t, limit)
    assert rule._capped(text, 1000) != rule._capped(text, 2000)
    narrow = ResultCap(cut_identifier_chars=50)
    assert narrow._capped(text, 1000) != rule._capped(text, 1000)
    assert narrow._capped(text, 1000) == ResultCap(cut_identifier_chars=50)._cut(text, 1000)
    for k in range(ResultCap.CUTS_KEPT + 5):  # past the bound, still each its own
        assert rule._capped(text, 500 + k) == ResultCap(cut_identifier_chars=300)._cut(
            text, 500 + k
        )


def test_a_waiting_cached_cut_gives_the_commits_of_cuts_made_afresh(monkeypatch):
    script = Script([Step(tools=[("Read", 9000, False)]), *[Step(minutes=0.5)] * 6])
    rule = ResultCap(max_tool_result_chars=1000, cache_aware=True)
    kept = [run[1].commit for run in drive(script, Pipeline.of([rule]))]
    assert any("waiting: capping" in n for c in kept for n in c.notes)
    monkeypatch.setattr(ResultCap, "_capped", ResultCap._cut)
    fresh = ResultCap(max_tool_result_chars=1000, cache_aware=True)
    assert [run[1].commit for run in drive(script, Pipeline.of([fresh]))] == kept
