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
