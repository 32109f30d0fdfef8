"""The summaries' tokens kept change by change: the generator writes them as the
``summary.tokens`` cursor and ``RuleContext.summary_tokens`` keeps the parent's figure
up to date through every fold, insert, replace and recount, so the summarize rule's
note ("summaries hold N tokens") looks at no item.  A probe rule checks the figure
against the sum over the items on every derive of random sessions (folds, compaction
boundaries that fold earlier summaries, rule changes)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings

from ctxrules.commit import Pipeline, derive_with_summaries
from ctxrules.config import PipelineConfig
from ctxrules.ruleapi import Rule, RuleContext
from ctxrules.rules import Summarize
from ctxrules.testing import Script, drive, scripts

KEY = "summary.tokens"


def _scan(items) -> int:
    return sum(it.tokens for it in items if it.state == "summary")


class Probe(Rule):
    """Asserts the context's figure is the sum over its items."""

    name = "test-summary-probe"

    def apply(self, ctx: RuleContext) -> None:
        assert ctx.summary_tokens() == _scan(ctx.items)


def _pipeline(preset: str, *extra: Rule) -> Pipeline:
    shipped = Pipeline.from_config(PipelineConfig.preset(preset))
    return shipped.with_rules([Probe(), *extra, *shipped.rules, Probe()])


def _rederive(parent, cursors, pipeline):
    """The rules run again on ``parent`` with ``cursors`` (no new calls)."""
    older = msgspec.structs.replace(parent, cursors=cursors)
    return derive_with_summaries(
        older,
        [],
        session_id=parent.session_id,
        head_node_id=parent.head_node_id,
        pipeline=pipeline,
        now=parent.created_at + 1,
    ).commit


@pytest.mark.parametrize("preset", ["default", "aggressive"])
def test_the_figure_is_the_sum_over_the_summaries_on_random_sessions(preset):
    pipeline = _pipeline(preset, Summarize(threshold_tokens=400, keep_tail_turns=1))
    seen: list[int] = []

    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(scripts(10))
    def run(script: Script) -> None:
        for _, gen, _ in drive(script, pipeline):
            commit = gen.commit
            assert commit.cursors[KEY] == _scan(commit.items)
            if commit.cursors[KEY] and not any(seen):
                # A parent made before the cursor is summed once; a figure a rule wrote
                # over (not a count) is not trusted.
                for bad in (None, -5, True):
                    cursors = {k: v for k, v in commit.cursors.items() if k != KEY}
                    if bad is not None:
                        cursors[KEY] = bad
                    again = _rederive(commit, cursors, pipeline)
                    assert again.cursors[KEY] == _scan(again.items) == commit.cursors[KEY]
            seen.append(commit.cursors[KEY])

    run()
    assert any(seen)  # some sessions folded
