"""Tool aging's settled stretch: while its boundary waits, the walk to the target turn
resumes where the previous walk found the first result that could still be aged
(``tool_aging.seek``), and finds exactly what a walk from the boundary finds.

Each commit is derived a second time from its parent with the two seek cursors taken
out (what a parent made before them holds: the walk then starts at the boundary): the
two commits must hold the same items, notes and other cursors.  A counter shows the
walk of a long, folded session does not start again at position 0."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from tests.counting import count_calls
from tests.presets import EVERY_RULE

from ctxrules.commit import Pipeline, derive_with_summaries
from ctxrules.config import PipelineConfig
from ctxrules.model import ContextCommit, Node
from ctxrules.rules import ToolAging
from ctxrules.rules import tool_aging as tool_aging_module
from ctxrules.testing import Script, Step, drive, scripts

SEEK = ("tool_aging.seek", "tool_aging.seek_turn")


def _folding(threshold: int) -> PipelineConfig:
    """The default rules (cache-aware aging that waits while the cache is warm) with a
    summarize threshold a short session passes: the bench's live session in small."""
    return PipelineConfig.preset("default").with_params("summarize", threshold_tokens=threshold)


PIPELINES = {
    "default": Pipeline.from_config(PipelineConfig.preset("default")),
    "aggressive": Pipeline.from_config(PipelineConfig.preset("aggressive")),
    "every-rule": Pipeline.from_config(EVERY_RULE),
    "default-folding": Pipeline.from_config(_folding(3000)),
    "aging-alone": Pipeline.of([ToolAging(tail_turns=2, step_turns=3, cache_aware=True)]),
}


def _without_seek(commit: ContextCommit) -> ContextCommit:
    cursors = {k: v for k, v in commit.cursors.items() if k not in SEEK}
    return msgspec.structs.replace(commit, cursors=cursors)


def _same_without_seek(runs: list, pipeline: Pipeline) -> int:
    """Derive every run's commit again from its parent without the seek cursors and
    compare; returns how many runs had a seek past the boundary to take out."""
    by_id = {gen.commit.id: gen.commit for _, gen, _ in runs}
    known: set[str] = set()
    resumed = 0
    for parent, gen, nodes in runs:
        new = sorted((n for i, n in nodes.items() if i not in known), key=lambda n: n.seq)
        known.update(nodes)
        if parent is None:
            continue
        cur = parent.cursors
        resumed += cur.get("tool_aging.seek", 0) > cur.get("tool_aging.pos", 0)
        again = derive_with_summaries(
            _without_seek(parent),
            new,
            session_id="s",
            head_node_id=gen.commit.head_node_id,
            pipeline=pipeline,
            now=gen.commit.created_at,
            load_commit=by_id.get,
        ).commit
        one, other = gen.commit, again
        assert one.items == other.items
        assert one.notes == other.notes
        assert one.total_tokens == other.total_tokens
        assert _without_seek(one).cursors == _without_seek(other).cursors
    return resumed


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_a_resumed_walk_gives_the_commit_a_walk_from_the_boundary_gives(name):
    pipeline = PIPELINES[name]

    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(scripts(12))
    def run(script: Script) -> None:
        _same_without_seek(drive(script, pipeline), pipeline)

    run()


def _reads(rounds: int, size: int = 1500, minutes: float = 0.05) -> Script:
    """One task, then ``rounds`` turns that each read a file (answers seconds apart: the
    cache stays warm, so cache-aware aging waits)."""
    return Script([Step(tools=[("Read", size, False)], minutes=minutes) for _ in range(rounds)])


def test_the_folded_session_resumes_its_walk_and_gives_the_same_commits():
    pipeline = PIPELINES["default-folding"]
    runs = drive(_reads(40), pipeline)
    last = runs[-1][1].commit
    assert any(it.state == "summarized" for it in last.items)  # summarize folded
    assert last.cursors["tool_aging.pos"] == 0  # aging waited the whole session
    assert _same_without_seek(runs, pipeline) > 20  # most commits resumed past the boundary


def test_the_walk_does_not_start_again_at_the_boundary(monkeypatch):
    """A counter of the items the rule looks at (``is_turn`` calls) in one derive at the
    end of a long folded session: with the seek cursors a few turns' worth, without them
    (the walk from the boundary at position 0) every item up to the target turn."""
    pipeline = PIPELINES["default-folding"]
    runs = drive(_reads(60), pipeline)
    parent, gen, nodes = runs[-1]
    new = [n for n in nodes.values() if n.seq > max(nodes[i].seq for i in runs[-2][2])]
    looked = count_calls(monkeypatch, tool_aging_module, "is_turn")

    def derive(from_commit: ContextCommit) -> ContextCommit:
        looked.n = 0
        return derive_with_summaries(
            from_commit,
            new,
            session_id="s",
            head_node_id=gen.commit.head_node_id,
            pipeline=pipeline,
            now=gen.commit.created_at,
        ).commit

    resumed = derive(parent)
    walked_resumed = looked.n
    from_boundary = derive(_without_seek(parent))
    walked_from_boundary = looked.n
    assert resumed.items == from_boundary.items and resumed.notes == from_boundary.notes
    assert parent.cursors["tool_aging.pos"] == 0
    assert walked_from_boundary > len(parent.items) // 2
    assert walked_resumed * 5 < walked_from_boundary


def test_a_late_result_inside_the_settled_stretch_is_walked_again():
    """A tool result that arrives for a turn long folded lands beside its call, inside
    the stretch the walk skips: the walk goes over it again, as a walk from the
    boundary does."""
    pipeline = PIPELINES["default-folding"]
    runs = drive(_reads(30), pipeline)
    _, gen, nodes = runs[-1]
    commit = gen.commit
    assert commit.cursors["tool_aging.seek"] > 10
    # The call of the third turn: an assistant item whose tool result came long ago.
    caller = next(
        it.source_node_id
        for it in commit.items[: commit.cursors["tool_aging.seek"]]
        if it.role == "assistant" and it.state == "summarized" and it.source_node_id in nodes
    )
    seq = max(n.seq for n in nodes.values()) + 1
    late = Node(
        id="late",
        seq=seq,
        created_at=commit.created_at + 3,
        role="tool",
        name="Read",
        caller=caller,
        input={"path": "late.py"},
        output="late output line\n" * 200,
        metadata={"tool_use_id": "late"},
    )
    made = derive_with_summaries(
        commit,
        [late],
        session_id="s",
        head_node_id=commit.head_node_id,
        pipeline=pipeline,
        now=commit.created_at + 3,
    )
    runs2 = [*runs, (commit, made, {**nodes, "late": late})]
    child = runs2[-1][1].commit
    at = next(p for p, it in enumerate(child.items) if it.source_node_id == "late")
    assert at < commit.cursors["tool_aging.seek"]
    assert child.cursors["tool_aging.seek"] <= at
    _same_without_seek(runs2, pipeline)
