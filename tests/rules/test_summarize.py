"""Summarize: folds the oldest run into one summary; anchors, tail, groups and attach blocks
are respected; a failing summarizer loses nothing and says why."""

from __future__ import annotations

import time

import pytest

from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.plugins import registry
from ctxrules.rules import IdleClearing, ResultCap, Summarize, ToolAging
from ctxrules.testing import Script, Step, check_commits, check_rule, drive


def _run(steps, *rules):
    pipeline = Pipeline.of(rules)
    runs = drive(Script(steps), pipeline)
    check_commits(runs, pipeline)
    return runs[-1][1].commit


def _busy(n=12):
    return [Step(user=f"task step {i}", tools=[("Read", 1500, False)]) for i in range(n)]


def test_over_threshold_folds_oldest_items_into_one_summary():
    c = _run(_busy(), Summarize(threshold_tokens=3000, keep_tail_turns=2))
    summaries = [it for it in c.items if it.state == "summary"]
    folded = [it for it in c.items if it.state == "summarized"]
    assert len(summaries) == 1 and summaries[0].source_node_id.startswith("sm_")
    assert folded and {it.merged_into for it in folded} <= {
        it.source_node_id for it in c.items if it.source_node_id.startswith("sm_")
    }
    assert c.total_tokens <= 3000
    assert c.summary == summaries[0].rendered


def test_task_statement_pinned_and_tail_stay_full():
    steps = _busy()
    steps[3] = Step(user="pinned note", pinned=True, tools=[("Read", 1500, False)])
    c = _run(steps, Summarize(threshold_tokens=3000, keep_tail_turns=2))
    first = c.items[0]
    assert first.is_anchor and first.state == "full" and first.rendered == "task step 0"
    pinned = next(it for it in c.items if it.rendered == "pinned note")
    assert pinned.state == "full"
    assert [it.state for it in c.items[-6:]] == ["full"] * 6  # 2 turns × (user, assistant, tool)


def test_assistant_turn_and_its_tools_fold_together():
    c = _run(_busy(), Summarize(threshold_tokens=3000, keep_tail_turns=1))
    by_id = {it.source_node_id: it for it in c.items}
    for it in c.items:
        if it.role == "tool":
            assert (it.state == "summarized") == (by_id[it.caller].state == "summarized")


def test_attach_block_is_never_split():
    steps = [*_busy(4), Step(attach_back=3, tools=[("Read", 1500, False)]), *_busy(8)]
    c = _run(steps, Summarize(threshold_tokens=3000, keep_tail_turns=1, target_ratio=0.9))
    block = [it.state for it in c.items if it.attached_from]
    assert block and (set(block) == {"summarized"} or "summarized" not in block)


def test_aging_does_not_stop_summarize_in_tool_heavy_sessions():
    # The original design locked aged results, so summarize found no run and did nothing.
    c = _run(_busy(30), ToolAging(tail_turns=2, step_turns=1), Summarize(threshold_tokens=2000))
    assert any(it.state == "summary" for it in c.items)


class _Raising:
    name = "test-raising"

    def summarize(self, items, *, budget):
        raise RuntimeError("model unavailable")


class _Empty:
    name = "test-empty"

    def summarize(self, items, *, budget):
        return "   "


class _Slow:
    name = "test-slow"

    def summarize(self, items, *, budget):
        time.sleep(1.0)
        return "late"


@pytest.fixture
def bad_summarizers():
    reg = registry("summarizers")
    added = [_Raising(), _Empty(), _Slow()]
    for s in added:
        reg.items[s.name] = s
    yield
    for s in added:
        reg.items.pop(s.name, None)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("test-raising", "model unavailable"),
        ("test-empty", "returned nothing"),
        ("test-slow", "timed out"),
    ],
)
def test_summarizer_failure_folds_nothing_and_records_why(bad_summarizers, name, says):
    rule = Summarize(threshold_tokens=3000, summarizer=name, timeout_seconds=0.2)
    c = _run(_busy(), rule)
    assert not [it for it in c.items if it.state in ("summary", "summarized")]
    assert any(says in n and "no folding" in n for n in c.notes)


def test_unreachable_threshold_is_reported():
    steps = [Step(user="x", locked=True, tools=[("Read", 1500, False)]) for _ in range(6)]
    c = _run(steps, Summarize(threshold_tokens=200))
    assert any("could not reach the threshold" in n for n in c.notes)


def test_full_pipeline_from_config_keeps_the_invariants():
    rules = PipelineConfig.preset("aggressive").build()
    assert [type(r) for r in rules] == [ResultCap, ToolAging, IdleClearing, Summarize]
    check_rule(Summarize(threshold_tokens=800, keep_tail_turns=1), examples=15)
