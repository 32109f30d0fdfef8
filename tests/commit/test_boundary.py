"""The derive step of a compaction boundary: what each direction folds, what stays
(the task anchor, locked and system items, the open turn, whole units), a boundary
adds no text, a recorded summary asks no summarizer, and a bad record folds nothing."""

from __future__ import annotations

import msgspec
import pytest

from ctxrules.commit import Compaction, Pipeline, derive_commit, derive_with_summaries
from ctxrules.commit.boundary import COMPACTION_KEY, protected_tail
from ctxrules.config import PipelineConfig
from ctxrules.model import Node, TextBlock
from ctxrules.render import render_messages
from ctxrules.rules import Summarize
from ctxrules.summarizers import SummaryResult, request_key
from ctxrules.testing import check_commits, tool_turn

OFF = Pipeline.from_config(PipelineConfig.preset("off"))
SUMMARY = "SUMMARY-TEXT of the earlier work"


def _turns(n: int, *, size: int = 400, closed: bool = True) -> list[Node]:
    """``n`` turns (user, assistant calling one tool, result), chained; a closing answer
    after the last when ``closed``."""
    calls: list[Node] = []
    prev = None
    for k in range(n):
        turn = tool_turn(
            {"output": f"result {k} " + "x" * size, "name": "Read", "input": {"path": f"f{k}.py"}},
            user=f"request {k}",
            assistant=f"calling for {k}",
            prefix=f"t{k}",
            predecessor=prev,
            seq=len(calls) + 1,
        )
        calls += turn
        prev = turn[1].id
    if closed:
        calls.append(
            Node(
                id="final",
                seq=len(calls) + 1,
                created_at=0.0,
                role="assistant",
                output=[TextBlock(text="all done")],
                predecessor=prev,
            )
        )
    return calls


def _boundary(calls: list[Node], **record) -> Node:
    head = next(c.id for c in reversed(calls) if c.caller is None)
    rec = Compaction(**{"trigger": "manual", "previous": head, **record})
    return Node(
        id="b1",
        seq=len(calls) + 1,
        created_at=0.0,
        role="system",
        predecessor=head,
        metadata={COMPACTION_KEY: rec.to_metadata()},
    )


def _derive(calls, pipeline=OFF, summaries=None, parent=None):
    head = next(c.id for c in reversed(calls) if c.caller is None)
    return derive_commit(
        parent,
        calls,
        session_id="s",
        head_node_id=head,
        pipeline=pipeline,
        now=10.0,
        summaries=summaries,
    )


def _shown(commit):
    return [it.source_node_id for it in commit.items if it.state != "summarized"]


def test_a_full_boundary_folds_all_but_the_task_anchor_into_the_recorded_summary():
    calls = _turns(4)
    gen = _derive([*calls, _boundary(calls, summary=SUMMARY)])
    assert gen.requests == ()  # the record holds the summary: no summarizer is asked
    c = gen.commit
    (sm,) = [it for it in c.items if it.state == "summary"]
    assert sm.rendered == SUMMARY and sm.reason == "compaction:full:b1"
    assert _shown(c) == ["t0u", sm.source_node_id]  # the anchor, then the summary
    folded = {it.source_node_id for it in c.items if it.state == "summarized"}
    assert folded == {x.id for x in calls} - {"t0u"}
    assert all(it.merged_into == sm.source_node_id for it in c.items if it.state == "summarized")
    assert "b1" not in {it.source_node_id for it in c.items}  # a boundary has no item
    assert c.total_tokens == sum(it.tokens for it in c.items if it.state != "summarized")
    text = msgspec.json.encode(render_messages(c)).decode()
    assert "request 1" not in text and SUMMARY in text


def test_the_open_turn_stays():
    # The model has not answered the last tool result yet: that turn and its request stay.
    calls = _turns(4, closed=False)
    c = _derive([*calls, _boundary(calls, summary=SUMMARY)]).commit
    assert _shown(c)[-3:] == ["t3u", "t3a", "t3t1"]
    assert [it.state for it in c.items[-3:]] == ["full"] * 3
    # An unanswered request stays with it too.
    ask = Node(id="q", seq=99, created_at=0.0, role="user", output="and now?", predecessor="final")
    calls = [*_turns(3), ask]
    c = _derive([*calls, _boundary(calls, summary=SUMMARY)]).commit
    assert _shown(c)[-1] == "q" and c.items[-1].state == "full"


def test_keep_tail_tokens_keeps_whole_units_that_fit():
    calls = _turns(5)
    plain = _derive(calls).commit
    units = {it.source_node_id: it.tokens for it in plain.items}
    last_turn = units["t4a"] + units["t4t1"] + units["final"]
    c = _derive([*calls, _boundary(calls, summary=SUMMARY, keep_tail_tokens=last_turn)]).commit
    # "final" and the t4 assistant turn (with its result) fit, its request t4u not.
    assert _shown(c)[-3:] == ["t4a", "t4t1", "final"]
    assert "t4u" not in _shown(c)
    end = len(plain.items)  # a closed turn protects nothing by itself
    assert protected_tail(plain.items, end, keep_open_turn=True, keep_tail_tokens=0) == end


def test_locked_and_system_items_stay_and_units_are_never_split():
    calls = _turns(4)
    calls[3] = msgspec.structs.replace(calls[3], metadata={"locked": True})  # t1u
    sys_note = Node(
        id="sys", seq=50, created_at=0.0, role="system", input="policy", predecessor="t1a"
    )
    calls[6] = msgspec.structs.replace(calls[6], predecessor="sys")  # t2u follows the note
    calls = [*calls[:6], sys_note, *calls[6:]]
    c = _derive([*calls, _boundary(calls, summary=SUMMARY)]).commit
    shown = _shown(c)
    assert "t1u" in shown and "sys" in shown
    by_id = {it.source_node_id: it for it in c.items}
    for it in c.items:  # a result is folded exactly when its call is
        if it.role == "tool":
            assert (it.state == "summarized") == (by_id[it.caller].state == "summarized")
    (sm,) = [it for it in c.items if it.state == "summary"]
    assert (
        c.items.index(sm) == max(p for p, it in enumerate(c.items) if it.state == "summarized") + 1
    )  # one summary, after the last folded unit


def test_from_keeps_the_prefix_and_its_bytes_up_to_the_first_folded_item():
    calls = _turns(5)
    parent = _derive(calls).commit
    boundary = _boundary(calls, direction="from", pivot="t2u", summary=SUMMARY, trigger="partial")
    c = _derive([boundary], parent=parent).commit
    assert _shown(c)[:6] == [x.id for x in calls[:6]]  # turns 0 and 1 untouched
    assert c.items[:6] == parent.items[:6]
    assert {it.source_node_id for it in c.items if it.state == "summarized"} == {
        x.id for x in calls[6:]
    }
    prefix = msgspec.json.encode(render_messages(msgspec.structs.replace(c, items=c.items[:6])))
    before = msgspec.json.encode(
        render_messages(msgspec.structs.replace(parent, items=parent.items[:6]))
    )
    assert prefix == before  # the provider's cache of the prefix still matches


def test_up_to_keeps_the_pivot_and_what_follows():
    calls = _turns(5)
    parent = _derive(calls).commit
    # A tool result as pivot stands for its whole turn: the turn stays whole.
    boundary = _boundary(calls, direction="up_to", pivot="t3t1", summary=SUMMARY, trigger="partial")
    c = _derive([boundary], parent=parent).commit
    shown = _shown(c)
    assert shown[0] == "t0u" and shown[1].startswith("sm_")
    assert shown[2:] == ["t3a", "t3t1", "t4u", "t4a", "t4t1", "final"]
    assert "t3u" not in shown  # the request before the pivot's turn is before it


def test_partial_compactions_append_and_a_full_one_merges_the_summaries():
    calls = _turns(6)
    parent = _derive(calls).commit
    first = _boundary(calls, direction="up_to", pivot="t2u", summary="FIRST", trigger="partial")
    one = _derive([first], parent=parent).commit
    second = msgspec.structs.replace(
        _boundary(calls, direction="up_to", pivot="t4u", summary="SECOND", trigger="partial"),
        id="b2",
    )
    two = _derive([second], parent=one).commit
    summaries = [it for it in two.items if it.state == "summary"]
    assert [s.rendered for s in summaries] == ["FIRST", "SECOND"]  # appended, not merged
    third = msgspec.structs.replace(_boundary(calls, summary="ALL"), id="b3")
    three = _derive([third], parent=two).commit
    assert [it.rendered for it in three.items if it.state == "summary"] == ["ALL"]
    merged = {
        it.source_node_id for it in three.items if it.merged_into and it.state == "summarized"
    }
    assert {s.source_node_id for s in summaries} <= merged
    # the summarize rule's promise allows exactly that (a full compaction's merge)
    rule = Summarize()
    assert rule.check_promise(two) == [] and rule.check_promise(three) == []


def test_without_a_recorded_summary_the_boundary_asks_with_its_instructions():
    calls = _turns(3)
    boundary = _boundary(calls, instructions="keep the file names", budget=500)
    gen = _derive([*calls, boundary])
    (request,) = gen.requests
    assert request.rule == "compaction" and request.instructions == "keep the file names"
    assert request.key == request_key(request.summarizer, 500, request.items, "keep the file names")
    assert request.key != request_key(request.summarizer, 500, request.items)
    assert not any(it.state == "summarized" for it in gen.commit.items)
    assert any("waiting for a summary" in n for n in gen.commit.notes)
    answered = _derive([*calls, boundary], summaries={request.key: "ANSWER"})
    assert answered.requests == () and [
        it.rendered for it in answered.commit.items if it.state == "summary"
    ] == ["ANSWER"]


@pytest.mark.parametrize(
    "answer,says",
    [
        (SummaryResult(error="RuntimeError: down"), "failed: RuntimeError: down"),
        (SummaryResult(timed_out=True), "timed out"),
        (SummaryResult(text="  "), "returned nothing"),
    ],
)
def test_a_failed_summary_folds_nothing_and_says_why(answer, says):
    calls = _turns(3)
    boundary = _boundary(calls)
    (request,) = _derive([*calls, boundary]).requests
    c = _derive([*calls, boundary], summaries={request.key: answer}).commit
    assert not any(it.state in ("summarized", "summary") for it in c.items)
    assert any(says in n and "all content kept" in n for n in c.notes)


@pytest.mark.parametrize(
    "record,says",
    [
        ({"trigger": "manual", "direction": "sideways"}, "invalid compaction record"),
        ({"trigger": "manual", "direction": "from"}, "needs a pivot"),
        ({"trigger": "manual", "direction": "from", "pivot": "nowhere"}, "not shown"),
        ({"trigger": "manual", "summary": ""}, "recorded summary is empty"),
    ],
)
def test_a_bad_boundary_folds_nothing_and_the_commit_says_so(record, says):
    calls = _turns(3)
    boundary = Node(
        id="b1",
        seq=99,
        created_at=0.0,
        role="system",
        predecessor="final",
        metadata={COMPACTION_KEY: record},
    )
    c = _derive([*calls, boundary]).commit
    assert not any(it.state in ("summarized", "summary") for it in c.items)
    assert any(says in n for n in c.notes), c.notes


def test_a_user_node_with_a_compaction_key_is_an_ordinary_node():
    calls = _turns(2)
    odd = Node(
        id="u9",
        seq=99,
        created_at=0.0,
        role="user",
        output="hello",
        predecessor="final",
        metadata={COMPACTION_KEY: {"trigger": "manual"}},
    )
    c = _derive([*calls, odd]).commit
    assert c.items[-1].source_node_id == "u9" and c.items[-1].rendered == "hello"


def test_rules_run_first_and_the_chain_keeps_every_invariant_in_every_preset():
    from ctxrules.testing import Script, Step, drive, pipelines_with

    steps = [Step(user=f"step {k}", tools=[("Read", 3000, False)]) for k in range(6)]
    steps += [Step(compact="full"), Step(tools=[("Bash", 3000, False)]), Step(compact="up_to")]
    steps += [Step(tools=[("Read", 3000, False)]), Step(compact="from")]
    for pipeline in pipelines_with():
        runs = drive(Script(steps), pipeline)
        assert check_commits(runs, pipeline) == len(steps)
        last = runs[-1][1].commit
        assert any(it.reason.startswith("compaction:full:") for it in last.items)


def test_deriving_over_a_boundary_is_pure():
    calls = _turns(4)
    boundary = _boundary(calls)
    (request,) = _derive([*calls, boundary]).requests
    answers = {request.key: "S"}
    a, b = (
        derive_with_summaries(
            None,
            [*calls, boundary],
            session_id="s",
            head_node_id="b1",
            pipeline=OFF,
            now=10.0,
            summaries=answers,
            answer=lambda r: pytest.fail("asked again"),
        )
        for _ in range(2)
    )
    assert a.commit.id == b.commit.id and a.delta == b.delta
