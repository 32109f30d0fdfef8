"""Per-result cap: head + tail with a marker, in the tail window too."""

from __future__ import annotations

import re

from ctxrules.commit import Pipeline
from ctxrules.rules import ResultCap
from ctxrules.testing import Script, Step, check_rule, drive


def test_oversized_result_is_cut_to_head_and_tail_even_in_the_tail_window():
    script = Script([Step(tools=[("Read", 6000, False), ("Grep", 100, False)])])
    runs = drive(script, Pipeline.of([ResultCap(max_tool_result_chars=1000)]))
    big, small = [it for it in runs[-1][1].commit.items if it.role == "tool"]
    raw = next(  # the same result with no rules
        it.rendered
        for it in drive(script, Pipeline.of([]))[-1][1].commit.items
        if it.role == "tool"
    )
    assert len(raw) == 6000
    assert big.state == "full" and big.reason == "result_cap:1000"
    m = re.search(r"\[… ([\d,]+) of ([\d,]+) characters cut …\]", big.rendered)
    assert m and int(m.group(1).replace(",", "")) == 5000
    assert int(m.group(2).replace(",", "")) == 6000
    head, tail = big.rendered.split(m.group(0))
    assert raw.startswith(head.rstrip("\n")) and raw.endswith(tail.lstrip("\n"))
    assert len(head.rstrip("\n")) == 600 and len(tail.lstrip("\n")) == 400
    assert small.reason == "new" and len(small.rendered) == 100


def test_result_cap_keeps_the_invariants():
    check_rule(ResultCap(max_tool_result_chars=500), examples=15)


def test_promise_holds_and_catches_an_uncapped_result():
    rule = ResultCap(max_tool_result_chars=1000)
    script = Script([Step(tools=[("Read", 6000, False), ("Grep", 2000, False)])])
    capped = drive(script, Pipeline.of([rule]))[-1][1].commit
    assert rule.check_promise(capped) == []
    plain = drive(script, Pipeline.of([]))[-1][1].commit  # the same results, not capped
    broken = rule.check_promise(plain)
    assert len(broken) == 2 and "6,000 characters > 1,000" in broken[0]
