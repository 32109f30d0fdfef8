"""The checks of the test kit: ``check_commits`` (every invariant and promise on
derived commits, rendering included), ``check_rule`` (a property test of a rule alone
and in every shipped pipeline) and ``pipelines_with``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ..commit import Pipeline
from ..commit.invariants import InvariantViolation, check_promises, check_step, fail
from ..config import PRESETS, PipelineConfig
from ..errors import CtxrulesError
from ..model import ContextCommit
from ..render import render_messages
from ..ruleapi import Rule
from .scripts import Script, drive, scripts

__all__ = ["check_commits", "check_rule", "pipelines_with"]


def _check_render(commit: ContextCommit, pipeline: Pipeline) -> None:
    """Invariant 8: rendering is pure (the same commit, decoded again, renders the same)."""
    first = msgspec.json.encode(render_messages(commit))
    again = msgspec.json.encode(
        render_messages(msgspec.json.decode(msgspec.json.encode(commit), type=ContextCommit))
    )
    if first != again:
        fail("8", "render_messages gave different bytes for the same commit", pipeline, commit)


def check_commits(runs: Iterable[Any], pipeline: Pipeline) -> int:
    """Check every ``(parent, generated, nodes)`` of ``drive`` (or your own) against the
    invariants, the promises of ``pipeline``'s rules and ``PIPELINE_PROMISE``; returns
    how many commits were checked.

    ``nodes`` is a mapping of node id → ``Node`` (what ``drive`` and ``drive_branch``
    give), or a set of node ids: then the task anchor is not checked.
    """
    counter = pipeline.tokenizer
    n = 0
    for parent, gen, node_ids in runs:
        pb = msgspec.msgpack.encode(parent) if parent is not None else None
        check_step(
            parent, gen, pipeline=pipeline, node_ids=node_ids, parent_bytes=pb, counter=counter
        )
        check_promises(gen.commit, pipeline, node_ids if isinstance(node_ids, Mapping) else None)
        _check_render(gen.commit, pipeline)
        n += 1
    return n


def pipelines_with(rule: Rule | None = None) -> list[Pipeline]:
    """Every shipped configuration, each with ``rule`` added in front — or in the place
    of the configuration's rule of the same name — plus ``rule`` alone."""
    out = []
    for name in PRESETS:
        shipped = Pipeline.from_config(PipelineConfig.preset(name))
        rules: Sequence[Rule] = shipped.rules
        if rule is not None:
            same = [i for i, r in enumerate(rules) if r.name == rule.name]
            rules = [rule if i in same else r for i, r in enumerate(rules)]
            if not same:
                rules.insert(0, rule)
        out.append(shipped.with_rules(rules))
    if rule is not None:
        out.append(Pipeline.of([rule]))
    return out


def check_rule(
    rule: Rule | None = None,
    *,
    examples: int = 40,
    pipelines: Sequence[Pipeline] | None = None,
    max_steps: int = 10,
) -> None:
    """Property-test ``rule`` (alone and in front of every shipped configuration) against
    the invariants and every rule's promise on ``examples`` generated sessions per
    pipeline."""
    for pipeline in pipelines if pipelines is not None else pipelines_with(rule):
        _property(pipeline, examples, max_steps)()


def _property(pipeline: Pipeline, examples: int, max_steps: int) -> Any:
    # deferred: hypothesis is a test dependency, needed only when a check runs
    from hypothesis import HealthCheck, given, settings

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(scripts(max_steps))
    def run(script: Script) -> None:
        try:
            check_commits(drive(script, pipeline), pipeline)
        except CtxrulesError as exc:
            raise InvariantViolation(f"generation failed: {exc}") from exc

    return run
