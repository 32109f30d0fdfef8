"""Tool aging: the tail window, the stub, protected tools, stepped boundaries."""

from __future__ import annotations

from ctxrules.commit import Pipeline
from ctxrules.rules import ToolAging
from ctxrules.testing import Script, Step, check_rule, commit_of, drive, tool_turn


def _last(script: Script, rule: ToolAging):
    runs = drive(script, Pipeline.of([rule]))
    return runs, runs[-1][1].commit


def _tools(commit):
    return [it for it in commit.items if it.role == "tool"]


def test_results_outside_the_tail_window_are_aged_the_window_stays_full():
    steps = [Step(tools=[("Read", 300, False)]) for _ in range(6)]
    _, c = _last(Script(steps), ToolAging(tail_turns=3, step_turns=1))
    states = [it.state for it in _tools(c)]
    # one tool per turn: the first 6 - 3 turns are outside the window
    assert states == ["aged"] * 3 + ["full"] * 3


def test_stub_is_one_line_naming_tool_args_head_and_tail():
    out_tail = "THE-END"
    steps = [Step(tools=[("Bash", 6000, True)])] + [Step() for _ in range(4)]
    runs, c = _last(Script(steps), ToolAging(tail_turns=1, step_turns=1, max_tool_args_chars=10))
    (tool,) = _tools(c)
    original = runs[0][1].commit.items[-1].rendered
    assert tool.state == "aged" and tool.reason == "tail_window"
    assert "\n" not in tool.rendered
    assert tool.rendered.startswith("[tool Bash error] ")
    assert "src/f0.py" in tool.rendered
    assert original.split()[0] in tool.rendered  # head of the output
    assert original.split()[-1][-5:] in tool.rendered  # tail of the output
    stub, _, ids = tool.rendered.partition(" | identifiers: ")
    assert len(stub) < 300 and out_tail not in original
    # the output's identifiers the stub does not show, within stub_identifier_chars
    assert 0 < len(ids) <= 300 and all(t not in stub for t in ids.split(", "))
    assert len(tool.tool_input) <= 10


def test_protected_tools_are_never_aged():
    names = ["todo_update", "web_search", "TodoWrite", "Read"]
    steps = [Step(tools=[(n, 200, False) for n in names])] + [Step() for _ in range(5)]
    rule = ToolAging(tail_turns=1, step_turns=1, extra_protected_tools=["TodoWrite"])
    _, c = _last(Script(steps), rule)
    assert {it.name: it.state for it in _tools(c)} == {
        "todo_update": "full",
        "web_search": "full",
        "TodoWrite": "full",
        "Read": "aged",
    }


def test_aging_does_not_lock():
    steps = [Step(tools=[("Read", 200, False)]) for _ in range(5)]
    _, c = _last(Script(steps), ToolAging(tail_turns=1, step_turns=1))
    assert [it.locked for it in _tools(c) if it.state == "aged"] == [False] * 4


def test_boundary_moves_in_steps_so_old_items_are_rewritten_rarely():
    turns = 20
    steps = [Step(tools=[("Read", 200, False)]) for _ in range(turns)]
    for step_turns in (1, 5):
        runs, _ = _last(Script(steps), ToolAging(tail_turns=3, step_turns=step_turns))
        rewrites = sum(1 for _, gen, _ in runs if any("aged" in n for n in gen.commit.notes))
        # turns - tail_turns results leave the window; with steps they leave in batches
        expected = turns - 3 if step_turns == 1 else (turns - 3) // step_turns
        assert rewrites == expected


def test_clear_at_least_tokens_waits_until_the_saving_is_worth_it():
    steps = [Step(tools=[("Read", 40, False)]) for _ in range(4)]
    _, c = _last(Script(steps), ToolAging(tail_turns=1, step_turns=1, clear_at_least_tokens=10**6))
    assert all(it.state == "full" for it in _tools(c))
    assert any("waiting" in n for n in c.notes)


def test_tool_aging_keeps_the_invariants():
    check_rule(ToolAging(tail_turns=1, step_turns=2), examples=15)


def test_pinned_and_cited_results_stay_full():
    first = tool_turn(
        {"name": "Read", "output": "pinned result " * 20, "metadata": {"pinned": True}},
        {"name": "Read", "output": "cited result " * 20},
        {"name": "Read", "output": "plain result " * 20},
    )
    later = tool_turn(prefix="n", predecessor="a", seq=6, reads=["t2"])
    c = commit_of([ToolAging(tail_turns=0, step_turns=1)], first + later)
    states = {it.source_node_id: (it.state, it.is_anchor) for it in c.items if it.role == "tool"}
    assert states == {"t1": ("full", True), "t2": ("full", True), "t3": ("aged", False)}


def test_a_late_result_of_an_old_turn_is_seen_by_every_rule():
    """A tool result that arrives after its turn left the window lands beside its call,
    before the end: it is a new position all the same, so it is capped, aged at once and
    cleared once idle (the idle cursor that passed its place steps back for it)."""
    from ctxrules.commit import derive_with_summaries
    from ctxrules.model import Node
    from ctxrules.rules import CLEARED_PLACEHOLDER, IdleClearing, ResultCap

    calls, prev = [], None
    for i in range(4):
        turn = tool_turn({"output": f"result {i} " * 20}, prefix=f"t{i}_", predecessor=prev)
        calls += turn
        prev = turn[1].id
    late = Node(
        id="t0_t2", seq=99, created_at=700.0, role="tool", name="Bash", caller="t0_a",
        input={}, output="late " * 1000, metadata={"tool_use_id": "t0_t2"},
    )  # fmt: skip

    def derive(pipeline, parent, new, now):
        return derive_with_summaries(
            parent, new, session_id="s", head_node_id="t3_a", pipeline=pipeline, now=now
        ).commit

    cap = Pipeline.of([ResultCap(max_tool_result_chars=1000)])
    capped = derive(cap, derive(cap, None, calls, 0.0), [late], 700.0).items[3]
    assert capped.source_node_id == "t0_t2" and capped.reason == "result_cap:1000"
    aging = Pipeline.of([ToolAging(tail_turns=1, step_turns=1), IdleClearing(idle_minutes=1)])
    first = derive(aging, derive(aging, None, calls, 0.0), [], 600.0)
    assert first.items[2].state == "cleared" and first.cursors["idle_clearing.pos"] > 3
    child = derive(aging, first, [late], 700.0)
    assert child.items[3].source_node_id == "t0_t2" and child.items[3].state == "aged"
    later = derive(aging, child, [], 700.0 + 120.0)
    assert later.items[3].state == "cleared" and later.items[3].rendered == CLEARED_PLACEHOLDER


def test_cache_aware_aging_waits_until_it_pays_for_the_rewrite():
    # Small results before a long tail: aging them saves little and would rewrite the
    # whole cached prompt after them, so a cache-aware rule waits; big results pay.
    small = [Step(tools=[("Read", 400, False)])] + [Step(assistant="x" * 4000) for _ in range(4)]
    rule = ToolAging(tail_turns=1, step_turns=1, cache_aware=True)
    _, c = _last(Script(small), rule)
    assert [it.state for it in _tools(c)] == ["full"]
    assert any("would not pay" in n for n in c.notes)
    plain = ToolAging(tail_turns=1, step_turns=1)  # not cache-aware: ages at once
    assert [it.state for it in _tools(_last(Script(small), plain)[1])] == ["aged"]
    big = [Step(tools=[("Read", 40_000, False)])] + [Step() for _ in range(4)]
    assert [it.state for it in _tools(_last(Script(big), rule)[1])] == ["aged"]
