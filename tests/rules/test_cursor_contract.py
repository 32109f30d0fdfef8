"""The rule cursor contract: a cursor that names an item position moves with the items
``ctx.insert`` adds (new nodes, a fold's summary); every other cursor is a plain value
and is never touched.  Tool aging's turn counters are counts: a summary inserted by
summarize once inflated them, and the results of the most recent turns came out aged."""

from __future__ import annotations

import json
import random

import msgspec
import pytest

from ctxrules.commit import Pipeline, derive_with_summaries, make_commit, rules_version
from ctxrules.config import PipelineConfig
from ctxrules.dag import branch_path
from ctxrules.importers import import_paths
from ctxrules.rules import ToolAging
from ctxrules.store import open_store
from ctxrules.testing import (
    InvariantViolation,
    Script,
    Step,
    check_commits,
    drive,
    drive_branch,
    tool_turn,
)

TURNS = 34
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 \n"
REGRESSION = PipelineConfig(
    pipeline=("result_cap", "tool_aging", "idle_clearing", "summarize"),
    rules={
        "tool_aging": {"tail_turns": 3, "step_turns": 1},
        "summarize": {"threshold_tokens": 6000, "keep_tail_turns": 12, "min_run_share": 0.0},
    },
)


def _result(turn: int, k: int) -> str:
    # Dense text (like a real file or log: ~1 token per 2.5 characters), so each turn
    # weighs enough that summarize folds short runs early in the session.
    rnd = random.Random(turn * 2 + k)
    return "".join(rnd.choice(ALPHABET) for _ in range(1500))


def _chat_session(turns: int) -> list[dict]:
    """User → assistant with 2 tool calls → 2 tool results of 1,500 characters, per turn."""
    messages: list[dict] = []
    for t in range(turns):
        messages.append({"role": "user", "content": f"step {t}: look at module {t % 9}"})
        calls = [
            {
                "id": f"call_{t}_{k}",
                "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"m{t}_{k}"})},
            }
            for k in range(2)
        ]
        messages.append(
            {"role": "assistant", "content": f"Reading for step {t}.", "tool_calls": calls}
        )
        for k in range(2):
            messages.append(
                {"role": "tool", "tool_call_id": f"call_{t}_{k}", "content": _result(t, k)}
            )
    return messages


@pytest.fixture
def chat_store(tmp_path):
    path = tmp_path / "session.json"
    path.write_text(json.dumps({"model": "gpt-4o", "messages": _chat_session(TURNS)}))
    store = open_store(tmp_path / "store")
    (result,) = import_paths(store, [str(path)])
    yield store, result.id
    store.close()


def test_summary_inserted_by_summarize_does_not_age_the_most_recent_turns(chat_store):
    store, sid = chat_store
    pipeline = Pipeline.from_config(REGRESSION)
    heads = [c for c in branch_path(store, sid) if c.caller is None]
    assert sum(c.role == "assistant" for c in heads) == TURNS
    folded = False
    for head in heads:  # commits generated head by head, each from the previous one
        commit = make_commit(sid, head.id, now=head.created_at, store=store, config=pipeline)
        folded = folded or any(it.state == "summary" for it in commit.items)
        turns = [p for p, it in enumerate(commit.items) if it.role == "assistant"]
        window = turns[-3] if len(turns) >= 3 else 0
        recent = [it for it in commit.items[window:] if it.role == "tool"]
        aged = [f"{it.source_node_id}={it.state}" for it in recent if it.state != "full"]
        assert not aged, f"at head {head.id}: results of the last 3 turns {aged}"
    assert folded, "the session must be long enough for summarize to fold"
    # the tool results of the current turn included
    assert [it.state for it in commit.items[-2:]] == ["full", "full"]


def test_the_kit_checks_the_promises_on_the_regression_session(chat_store):
    store, sid = chat_store
    pipeline = Pipeline.from_config(REGRESSION)
    runs = drive_branch(branch_path(store, sid), pipeline, session_id=sid)
    assert check_commits(runs, pipeline) == 2 * TURNS
    assert any(it.state == "summary" for it in runs[-1][1].commit.items)


def is_turn(item) -> bool:
    """An assistant node's item (summaries, folded or not, have virtual ``sm_`` ids)."""
    return item.role == "assistant" and not item.source_node_id.startswith("sm_")


class CountsAsPositions(ToolAging):
    """Tool aging with its turn counts declared as positions: what every insert did to
    them before positions and values were told apart."""

    position_cursors = ToolAging.position_cursors | {"tool_aging.turn", "tool_aging.turns"}


def test_counts_shifted_like_positions_break_tool_agings_promise_and_the_kit_says_so(chat_store):
    store, sid = chat_store
    rules = [
        CountsAsPositions(**r.values) if r.name == "tool_aging" else r for r in REGRESSION.build()
    ]
    pipeline = Pipeline.of(rules)
    runs = drive_branch(branch_path(store, sid), pipeline, session_id=sid)
    with pytest.raises(InvariantViolation, match=r"promise of rule 'tool_aging'.* is aged inside"):
        check_commits(runs, pipeline)


def test_values_are_never_shifted_positions_always_are():
    """A fold inserts its summary before the tail: the boundary position moves with the
    items, the turn counts and the generator's marks stay as they were."""
    rules = REGRESSION.build()
    pipeline = Pipeline.of(rules)
    assert {"tool_aging.pos", "aged_until", "idle_clearing.pos", "summarize.pos"} <= (
        pipeline.position_cursors
    )
    assert not {"tool_aging.turn", "tool_aging.turns", "anchor"} & pipeline.position_cursors
    steps = [Step(tools=[("Read", 1500, False), ("Bash", 1500, False)]) for _ in range(20)]
    runs = drive(Script(steps), pipeline)
    for _, gen, _ in runs:
        c = gen.commit
        turns = sum(1 for it in c.items if is_turn(it))
        assert c.cursors["tool_aging.turns"] == turns
        boundary = c.cursors["tool_aging.pos"]
        before = sum(1 for it in c.items[:boundary] if is_turn(it))
        assert c.cursors["tool_aging.turn"] == before
        assert c.cursors["anchor"] == 1
    assert sum(it.source_node_id.startswith("sm_") for it in runs[-1][1].commit.items) >= 2


class ToolAgingV1(ToolAging):
    version = 1


def test_a_commit_of_the_previous_tool_aging_is_rederived_in_a_full_pass():
    """Commits stored by tool aging v1 carry turn counts that folds inflated.  Its
    rules_version differs, so the store never builds on them, and a derive handed one
    anyway starts the rules afresh: the counts are recomputed from the items."""
    current = Pipeline.from_config(REGRESSION)
    old_rules = [ToolAgingV1(**r.values) if r.name == "tool_aging" else r for r in current.rules]
    old_version = rules_version(old_rules, encoding=current.encoding, anchor_task=True)
    assert old_version != current.version
    steps = [Step(tools=[("Read", 1500, False), ("Bash", 1500, False)]) for _ in range(20)]
    runs = drive(Script(steps), current)
    last = runs[-1][1].commit
    cursors = dict(last.cursors)
    cursors["tool_aging.turns"] += 4  # as the old insert left them after four folds
    stored_by_v1 = msgspec.structs.replace(last, rules_version=old_version, cursors=cursors)
    turn = tool_turn(
        {"output": "x" * 1500}, {"output": "y" * 1500}, prefix="late", predecessor=last.head_node_id
    )
    child = derive_with_summaries(
        stored_by_v1,
        turn,
        session_id="s",
        head_node_id="latea",
        pipeline=current,
        now=last.created_at + 60,
    ).commit
    assert child.cursors["tool_aging.turns"] == sum(1 for it in child.items if is_turn(it))
    assert ToolAging(tail_turns=3, step_turns=1).check_promise(child) == []
