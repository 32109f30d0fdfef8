"""The rule author's kit: it passes good rules and catches each kind of broken one."""

from __future__ import annotations

import msgspec
import pytest

from ctxrules.commit import Pipeline
from ctxrules.commit.anchor import AnchorSkip
from ctxrules.ruleapi import RuleContext
from ctxrules.rules import Rule
from ctxrules.testing import (
    InvariantViolation,
    Script,
    Step,
    check_commits,
    check_promises,
    check_rule,
    drive,
    pipelines_with,
)


class Shout(Rule):
    """A well-behaved rule: upper-cases new user text (stays full)."""

    name = "test-shout"

    def apply(self, ctx: RuleContext) -> None:
        for p in ctx.new_positions():
            it = ctx.items[p]
            if it.role == "user" and not it.locked:
                ctx.replace(p, rendered=it.rendered.upper(), reason="shout")


class Loosen(Rule):
    """Broken: turns aged items back to full by going around ctx.replace."""

    name = "test-loosen"

    def apply(self, ctx: RuleContext) -> None:
        for p, it in enumerate(ctx.items):
            if it.state == "aged":
                ctx.items[p] = msgspec.structs.replace(it, state="full")


class TouchLocked(Rule):
    """Broken: rewrites locked items behind the context's back."""

    name = "test-touch-locked"

    def apply(self, ctx: RuleContext) -> None:
        for p, it in enumerate(ctx.items):
            if it.locked:
                ctx.items[p] = msgspec.structs.replace(it, rendered=it.rendered + " (seen)")


class Drop(Rule):
    """Broken: removes items."""

    name = "test-drop"

    def apply(self, ctx: RuleContext) -> None:
        if len(ctx.items) > 4:
            del ctx.items[1]


class WrongTokens(Rule):
    """Broken: claims a token count it did not measure."""

    name = "test-wrong-tokens"

    def apply(self, ctx: RuleContext) -> None:
        for p in ctx.new_positions():
            it = ctx.items[p]
            ctx.items[p] = msgspec.structs.replace(it, tokens=it.tokens + 7)


class FoldCallOnly(Rule):
    """Broken: folds an assistant turn but leaves its tool result shown."""

    name = "test-fold-call-only"

    def apply(self, ctx: RuleContext) -> None:
        for p in range(1, len(ctx.items) - 1):
            it, nxt = ctx.items[p], ctx.items[p + 1]
            if it.role == "assistant" and it.state == "full" and nxt.caller == it.source_node_id:
                ctx.fold(p, p + 1, "gone", reason="bad")
                return


class FoldResultOnly(Rule):
    """Broken: folds a tool result but leaves its call shown (an unanswered tool call)."""

    name = "test-fold-result-only"

    def apply(self, ctx: RuleContext) -> None:
        for p, it in enumerate(ctx.items):
            if it.role == "tool" and it.state == "full":
                ctx.fold(p, p + 1, "gone", reason="bad")
                return


class SplitAttach(Rule):
    """Broken: folds the last item of an attach block only (the summary lands after the
    block, so the block stays contiguous: only the fold itself is wrong)."""

    name = "test-split-attach"

    def apply(self, ctx: RuleContext) -> None:
        items = ctx.items
        for p, it in enumerate(items):
            last = p + 1 == len(items) or items[p + 1].attached_from != it.attached_from
            if it.attached_from is not None and last and it.state == "full":
                ctx.fold(p, p + 1, "half", reason="bad")
                return


def test_a_good_rule_passes_in_a_few_lines():
    check_rule(Shout(), examples=10)


@pytest.mark.parametrize(
    ("rule", "invariant"),
    [
        (Loosen(), "invariant 3"),
        (TouchLocked(), "invariant 4"),
        (Drop(), "changed the number of items"),
        (WrongTokens(), "invariant tokens"),
    ],
)
def test_broken_rules_are_caught(rule, invariant):
    from ctxrules.rules import IdleClearing, ToolAging

    steps = [Step(tools=[("Read", 300, False)], locked=(i == 1)) for i in range(6)]
    # the broken rule runs first, so it sees what the parent commit aged and locked
    pipeline = Pipeline.of([rule, ToolAging(tail_turns=1, step_turns=1), IdleClearing()])
    with pytest.raises(InvariantViolation, match=invariant):
        check_commits(drive(Script(steps), pipeline), pipeline)


@pytest.mark.parametrize(
    ("rule", "steps", "invariant"),
    [
        (FoldCallOnly(), [Step(tools=[("Read", 300, False)])] * 2, "invariant pairing"),
        (FoldResultOnly(), [Step(tools=[("Read", 300, False)])] * 2, "invariant pairing"),
        (
            SplitAttach(),
            [Step(), Step(), Step(attach_back=1), Step()],
            "invariant attach",
        ),
    ],
)
def test_folds_that_break_a_group_are_caught(rule, steps, invariant):
    pipeline = Pipeline.of([rule])
    with pytest.raises(InvariantViolation, match=invariant):
        check_commits(drive(Script(steps), pipeline), pipeline)


def test_context_refuses_loosening_and_locked_changes_through_replace():
    class Bad(Rule):
        name = "test-bad"

        def apply(self, ctx: RuleContext) -> None:
            for p, it in enumerate(ctx.items):
                if it.locked:
                    ctx.replace(p, rendered="x", reason="bad")

    steps = [Step(locked=True), Step()]
    with pytest.raises(InvariantViolation, match="locked items may not be changed"):
        drive(Script(steps), Pipeline.of([Bad()]))


def test_context_refuses_changing_a_summarys_state_through_replace():
    """A summary never starts a turn: only a fold changes its state (to summarized)."""
    from ctxrules.rules import Summarize

    class AgeSummaries(Rule):
        name = "test-age-summaries"

        def apply(self, ctx: RuleContext) -> None:
            for p, it in enumerate(ctx.items):
                if it.state == "summary":
                    ctx.replace(p, state="aged", rendered="[old summary]", reason="bad")

    steps = [Step(tools=[("Read", 6000, False)]) for _ in range(6)]
    folding = Summarize(threshold_tokens=2000, keep_tail_turns=1)
    folded = drive(Script(steps), Pipeline.of([folding]))
    assert any(it.state == "summary" for it in folded[-1][1].commit.items)
    with pytest.raises(InvariantViolation, match="a summary's state changes only through fold"):
        drive(Script(steps), Pipeline.of([folding, AgeSummaries()]))


def test_pytest_plugin_fixture(ctxrules_kit):
    assert ctxrules_kit.check_rule is check_rule


class AgeEverything(Rule):
    """Ages every tool result at once, the current turn's too: it keeps the invariants
    (states only tighten, through ctx.replace) but breaks tool aging's promise."""

    name = "test-age-everything"

    def apply(self, ctx: RuleContext) -> None:
        for p in ctx.new_positions():
            it = ctx.items[p]
            if it.role == "tool" and it.state == "full" and not it.locked and not it.is_anchor:
                ctx.replace(p, state="aged", rendered="[old]", reason="too eager")


class EmptyPromise(Rule):
    """Promises that no user text is empty, and does nothing to keep it."""

    name = "test-empty-promise"
    promise = "no user item has empty text"

    def apply(self, ctx: RuleContext) -> None:
        return None

    def check_promise(self, commit):
        return [
            f"user item {it.source_node_id} is empty"
            for it in commit.items
            if it.role == "user" and not it.rendered.strip()
        ]


def test_a_rule_that_breaks_another_rules_promise_is_caught_in_the_shipped_pipelines():
    with pytest.raises(InvariantViolation, match=r"promise of rule 'tool_aging'.* is aged inside"):
        check_rule(AgeEverything(), examples=10)


def test_a_rule_that_breaks_its_own_promise_is_caught():
    steps = [Step(user="   "), Step()]
    pipeline = Pipeline.of([EmptyPromise()])
    with pytest.raises(InvariantViolation, match="promise of rule 'test-empty-promise'"):
        check_commits(drive(Script(steps), pipeline), pipeline)
    check_promises(drive(Script([Step(user="fine")]), pipeline)[-1][1].commit, pipeline)


def test_every_builtin_rule_states_its_promise():
    from ctxrules.rules import BUILTIN_RULES

    for cls in BUILTIN_RULES:
        assert cls.promise, cls.name
        assert cls.check_promise is not Rule.check_promise, cls.name


def _unlocked_anchor(ctx: RuleContext) -> int | None:
    """Position of the full, unlocked task anchor once the session moved on, if any."""
    for p, it in enumerate(ctx.items):
        if it.reason == "anchor" and not it.locked and it.state == "full" and len(ctx.items) > 4:
            return p
    return None


class FoldAnchor(Rule):
    """Broken: folds the task anchor (a single user item: pairing and groups are kept,
    and summarize, which promises the same, is not in the pipeline to notice)."""

    name = "test-fold-anchor"

    def apply(self, ctx: RuleContext) -> None:
        p = _unlocked_anchor(ctx)
        if p is not None:
            ctx.fold(p, p + 1, "the user wanted something", reason="bad")


class AgeAnchor(Rule):
    """Broken: shortens the task anchor to a stub once the session moved on."""

    name = "test-age-anchor"

    def apply(self, ctx: RuleContext) -> None:
        p = _unlocked_anchor(ctx)
        if p is not None:
            ctx.replace(p, state="aged", rendered=ctx.items[p].rendered[:5], reason="bad")


@pytest.mark.parametrize("rule", [FoldAnchor(), AgeAnchor()])
def test_a_rule_that_folds_or_ages_the_task_anchor_is_caught(rule):
    steps = [Step(user="the real task"), Step(), Step()]
    pipeline = Pipeline.of([rule])
    with pytest.raises(InvariantViolation, match=r"promise of the pipeline: .*task anchor"):
        check_commits(drive(Script(steps), pipeline), pipeline)


def test_check_rule_catches_a_rule_that_folds_the_task_anchor_in_a_shipped_preset():
    # the first shipped preset (default) with the rule in front: the anchor folds
    with pytest.raises(InvariantViolation, match="promise of the pipeline"):
        check_rule(FoldAnchor(), examples=5, pipelines=pipelines_with(FoldAnchor())[:1])


def test_the_kit_finds_the_anchor_with_the_pipelines_own_function():
    # A demonstration first: derived with no skip kinds the demonstration is marked, which
    # the default pipeline's promise says is the wrong item.
    steps = [Step(user="a worked example", kind="demonstration"), Step(user="the task"), Step()]
    wrong = Pipeline.of([], anchor_skip=AnchorSkip(()))
    runs = drive(Script(steps), wrong)
    check_commits(runs, wrong)  # consistent with itself
    right = Pipeline.of([])
    with pytest.raises(InvariantViolation, match="is not the anchor"):
        check_commits(runs, right)
    runs = drive(Script(steps), right)
    check_commits(runs, right)
    (anchor,) = [it for it in runs[-1][1].commit.items if it.is_anchor]
    assert anchor.rendered == "the task"
    # with the node ids only, the anchor cannot be told: the rest is still checked
    check_commits([(p, g, set(nodes)) for p, g, nodes in drive(Script(steps), wrong)], right)


def test_an_unlocked_system_item_breaks_the_promise():
    steps = [Step(system="You are terse."), Step()]
    unlocked = Pipeline.of([], lock_system=False)
    runs = drive(Script(steps), unlocked)
    check_commits(runs, unlocked)
    with pytest.raises(InvariantViolation, match=r"system item \S+ is not locked"):
        check_commits(runs, Pipeline.of([]))


class FoldSystem(Rule):
    """Folds system items: refused while they are locked (the default)."""

    name = "test-fold-system"

    def apply(self, ctx: RuleContext) -> None:
        for p, it in enumerate(ctx.items):
            if it.role == "system" and it.state == "full":
                ctx.fold(p, p + 1, "rules", reason="bad")
                return


def test_system_items_are_locked_unless_the_pipeline_says_otherwise():
    steps = [Step(system="You are terse. Never push."), Step(), Step()]
    with pytest.raises(InvariantViolation, match="locked items may not be folded"):
        drive(Script(steps), Pipeline.of([FoldSystem()]))
    unlocked = Pipeline.of([FoldSystem()], lock_system=False)
    runs = drive(Script(steps), unlocked)
    check_commits(runs, unlocked)
    assert [it.state for it in runs[-1][1].commit.items if it.role == "system"] == ["summarized"]


def test_several_parents_outside_a_merge_are_caught():
    # Invariant 7: a derive that adds no merge instruction has one parent.  A commit
    # claiming two is refused, and so is a merge commit that drops a peer.
    pipeline = Pipeline.of([])
    runs = drive(Script([Step(), Step(), Step()]), pipeline)
    parent, gen, nodes = runs[-1]
    forged = gen._replace(
        commit=msgspec.structs.replace(gen.commit, parent_ids=(parent.id, runs[0][1].commit.id))
    )
    with pytest.raises(InvariantViolation, match="invariant 7: 2 parents outside a merge"):
        check_commits([(parent, forged, nodes)], pipeline)
    merged = drive(Script([Step(), Step(), Step(merge_back=2)]), pipeline)
    parent, gen, nodes = merged[-1]
    assert len(gen.commit.parent_ids) == 2  # the real merge passes
    check_commits(merged, pipeline)
    dropped = gen._replace(commit=msgspec.structs.replace(gen.commit, parent_ids=(parent.id,)))
    with pytest.raises(InvariantViolation, match="invariant 7: parents"):
        check_commits([(parent, dropped, nodes)], pipeline)
