"""Per-result cap: head + tail with a marker, in the tail window too."""

from __future__ import annotations

import re

from ctxrules.commit import Pipeline
from ctxrules.rules import ResultCap
from ctxrules.testing import Script, Step, check_rule, drive


def test_oversized_result_is_cut_to_head_and_tail_even_in_the_tail_window():
    runs = drive(
        Script([Step(tools=[("Read", 6000, False), ("Grep", 100, False)])]),
        Pipeline.of([ResultCap(max_tool_result_chars=1000)]),
    )
    big, small = [it for it in runs[-1][1].commit.items if it.role == "tool"]
    raw = "".join("line 0: /repo/src/mod0.py ok value=0\n" * 200)[:6000]
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
