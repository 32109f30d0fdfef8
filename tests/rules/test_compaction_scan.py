"""The scan for a provider's compaction, skipped when no item can hold one: the
generator's ``compaction.blocks`` cursor says whether any item of a commit holds a
``CompactionBlock``, and ``RuleContext.provider_compaction_start`` looks at every item
only when the parent held one or this commit added or changed an item that does.  A
probe rule checks on every derive that the answer is the scan's."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from tests.counting import count_calls

from ctxrules.commit import Pipeline, derive_with_summaries
from ctxrules.config import PipelineConfig
from ctxrules.model import CompactionBlock, ContextCommit, TextBlock, provider_compaction_start
from ctxrules.ruleapi import Rule, RuleContext
from ctxrules.ruleapi import context as context_module
from ctxrules.rules import Summarize
from ctxrules.testing import Script, drive, scripts
from providers.conftest import conversation

KEY = "compaction.blocks"
OLD_TEXT = "an old and long exchange about the header layout " * 40
BLOCK = CompactionBlock(content="Summary: the layout is settled.")


class Probe(Rule):
    """Asserts the context's answer is the scan's, and records it."""

    name = "test-compaction-probe"
    seen: list[int] = []  # noqa: RUF012 (one list for the test module)

    def apply(self, ctx: RuleContext) -> None:
        found = ctx.provider_compaction_start()
        assert found == provider_compaction_start(ctx.items)
        Probe.seen.append(found)


def _pipeline(*rules: Rule) -> Pipeline:
    shipped = Pipeline.from_config(PipelineConfig.preset("default"))
    return shipped.with_rules([Probe(), *rules, *shipped.rules, Probe()])


def _chain(turns: list[tuple[str, Any]], pipeline: Pipeline) -> list[ContextCommit]:
    """A commit per answer, each derived from the previous one."""
    calls = conversation(turns)
    commits: list[ContextCommit] = []
    start = 0
    for end, call in enumerate(calls, 1):
        if call.role != "assistant":
            continue
        parent = commits[-1] if commits else None
        commits.append(
            derive_with_summaries(
                parent,
                calls[start:end],
                session_id="s",
                head_node_id=call.id,
                pipeline=pipeline,
                now=float(end),
            ).commit
        )
        start = end
    return commits


def _turns(block_at: int, n: int = 12) -> list[tuple[str, Any]]:
    turns: list[tuple[str, Any]] = []
    for i in range(n):
        answer: Any = f"{i}: {OLD_TEXT}"
        if i == block_at:
            answer = [BLOCK, TextBlock(text="on")]
        turns += [("user", f"question {i}"), ("assistant", answer)]
    return turns


def test_the_cursor_says_whether_an_item_holds_a_block_and_the_answer_is_the_scans():
    Probe.seen.clear()
    rule = Summarize(threshold_tokens=1500, keep_tail_turns=1)
    commits = _chain(_turns(block_at=6), _pipeline(rule))
    flags = [c.cursors[KEY] for c in commits]
    assert flags == [0] * 6 + [1] * 6
    assert -1 in Probe.seen and any(p >= 0 for p in Probe.seen)


def test_without_a_block_the_scan_is_not_made(monkeypatch):
    """A counter of the scans: none on a parent that says it holds no block; on a parent
    made before the cursor (it cannot tell) one per call."""
    pipeline = _pipeline()
    commits = _chain(_turns(block_at=-1, n=6), pipeline)
    parent = commits[-2]
    assert parent.cursors[KEY] == 0
    scans = count_calls(monkeypatch, context_module, "provider_compaction_start")
    calls = conversation(_turns(block_at=-1, n=6))[-2:]

    def derive(from_commit: ContextCommit) -> ContextCommit:
        return derive_with_summaries(
            from_commit,
            calls,
            session_id="s",
            head_node_id=calls[-1].id,
            pipeline=pipeline,
            now=99.0,
        ).commit

    made = derive(parent)
    assert scans.n == 0
    cursors = {k: v for k, v in parent.cursors.items() if k != KEY}
    older = derive(msgspec.structs.replace(parent, cursors=cursors))
    assert scans.n == 3  # the two probes and the summarize rule
    assert made.items == older.items and made.cursors[KEY] == older.cursors[KEY] == 0


@pytest.mark.parametrize("preset", ["default", "aggressive"])
def test_the_answer_is_the_scans_on_random_sessions(preset):
    shipped = Pipeline.from_config(PipelineConfig.preset(preset))
    pipeline = shipped.with_rules([Probe(), *shipped.rules, Probe()])

    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(scripts(10))
    def run(script: Script) -> None:
        for _, gen, _ in drive(script, pipeline):
            assert gen.commit.cursors[KEY] == 0  # the scripts hold no compaction block

    run()
