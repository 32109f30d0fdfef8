"""``ChainChecker`` (the batch replay's check of every commit, through what each delta
changed) raises exactly what ``check_step`` raises on the same commits: generated
sessions under the shipped pipelines and under rules that break each invariant, and
hand-corrupted commits of a good chain."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.testing.test_kit import FoldCallOnly, FoldResultOnly, Loosen, WrongTokens

from ctxrules.commit import Generated, Pipeline
from ctxrules.commit._chain_check import ChainChecker
from ctxrules.commit.invariants import InvariantViolation, check_step
from ctxrules.errors import CtxrulesError
from ctxrules.ruleapi.delta import encode as encode_delta
from ctxrules.ruleapi.delta import replay
from ctxrules.rules import ToolAging
from ctxrules.testing import Script, Step, drive, pipelines_with, scripts

BROKEN = [Loosen(), WrongTokens(), FoldResultOnly(), FoldCallOnly()]
PIPELINES = [
    *pipelines_with(None),
    *(Pipeline.of([rule, ToolAging(tail_turns=1, step_turns=1)]) for rule in BROKEN),
]


def _outcome(check, parent, gen) -> str | None:
    try:
        check(parent, gen)
    except InvariantViolation as exc:
        return str(exc)
    return None


def _compare(runs, pipeline: Pipeline) -> tuple[list[str | None], ChainChecker]:
    """Every run through both checkers, with the last run's nodes (a checker's node set
    is fixed); asserts they agree and returns the outcomes."""
    nodes = runs[-1][2]
    chain = ChainChecker(pipeline, nodes, pipeline.tokenizer)

    def spec(parent, gen):
        check_step(
            parent,
            gen,
            pipeline=pipeline,
            node_ids=nodes,
            parent_bytes=None,
            counter=pipeline.tokenizer,
        )

    outcomes = []
    for parent, gen, _ in runs:
        want = _outcome(spec, parent, gen)
        assert _outcome(chain.check, parent, gen) == want
        outcomes.append(want)
    return outcomes, chain


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scripts(8), st.sampled_from(range(len(PIPELINES))), st.booleans())
def test_chain_checker_raises_what_check_step_raises(script: Script, which: int, plain: bool):
    pipeline = PIPELINES[which]
    if plain:  # no attach block, where the changes alone decide (as in most recordings)
        script = Script([dataclasses.replace(s, attach_back=0) for s in script.steps])
    try:
        runs = drive(script, pipeline)
    except (CtxrulesError, AssertionError):
        return  # a broken rule the rule context refuses outright: nothing to check
    _compare(runs, pipeline)


def _good_chain():
    pipeline = Pipeline.of([ToolAging(tail_turns=1, step_turns=1)])
    steps = [Step(tools=[("Read", 300, False), ("Bash", 40, True)]) for _ in range(5)]
    return drive(Script(steps), pipeline), pipeline


def test_a_good_chain_passes_through_the_changes():
    runs, pipeline = _good_chain()
    outcomes, chain = _compare(runs, pipeline)
    assert outcomes == [None] * len(runs)
    assert chain.fast == len(runs) - 1  # every commit but the root, by its changes


def _corrupt(runs, at: int, **changes):
    """``runs`` with commit ``at`` changed as ``changes`` say (items by position)."""
    parent, gen, nodes = runs[at]
    c = gen.commit
    items = list(c.items)
    for p, fields in changes.pop("items", {}).items():
        items[p] = msgspec.structs.replace(items[p], **fields)
    bad = msgspec.structs.replace(c, items=tuple(items), **changes)
    return [*runs[:at], (parent, Generated(bad, gen.delta, gen.requests, gen.reasons), nodes)]


def _with_delta(runs, at: int, delta):
    """``runs`` with commit ``at`` rebuilt from ``delta`` (so the delta check passes)."""
    parent, gen, nodes = runs[at]
    items = list(parent.items)
    data = encode_delta(delta)
    replay(items, data)
    total = sum(it.tokens for it in items if it.state != "summarized")
    bad = msgspec.structs.replace(gen.commit, items=tuple(items), total_tokens=total)
    return [*runs[:at], (parent, Generated(bad, data), nodes)]


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (
            lambda r: _corrupt(r, 3, total_tokens=r[3][1].commit.total_tokens + 1),
            "invariant tokens",
        ),
        (lambda r: _corrupt(r, 3, parent_ids=("c_elsewhere",)), "invariant 7"),
        (lambda r: _corrupt(r, 3, items={0: {"rendered": "changed"}}), "invariant 2"),
    ],
)
def test_a_corrupted_commit_fails_as_check_step_says(corrupt, message):
    runs, pipeline = _good_chain()
    outcomes, _ = _compare(corrupt(runs), pipeline)
    assert outcomes[-1] is not None and message in outcomes[-1]


def test_a_delta_that_loosens_or_orphans_fails_as_check_step_says():
    runs, pipeline = _good_chain()
    parent = runs[3][0]
    aged = next(p for p, it in enumerate(parent.items) if it.state == "aged")
    tool = parent.items[aged]
    loosened = msgspec.structs.replace(tool, state="full", rendered=tool.rendered)
    outcomes, _ = _compare(_with_delta(runs, 3, ([], [(aged, loosened)], [])), pipeline)
    assert outcomes[-1] is not None and "invariant 3" in outcomes[-1]
    # a result folded alone: its call stays shown
    result = next(p for p, it in enumerate(parent.items) if it.role == "tool")
    outcomes, _ = _compare(
        _with_delta(runs, 3, ([], [], [("sm_x", "bad", 1.0, [result])])), pipeline
    )
    assert outcomes[-1] is not None and "invariant" in outcomes[-1]
