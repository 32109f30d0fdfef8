"""The example rule's own tests, written as a third party writes them: only ctxrules'
public test kit (``ctxrules.testing`` and its pytest fixture ``ctxrules_kit``)."""

import pytest
from ctxrules_example.answer_aging import AnswerAging

from ctxrules.commit import Pipeline
from ctxrules.testing import InvariantViolation, check_commits, check_rule, commit_of, tool_turn

LONG = "Here is the whole module, line by line. " * 40  # 1,600 characters


def turns(n, answer=LONG):
    calls, prev = [], None
    for i in range(n):
        turn = tool_turn(
            {"output": "ok"}, assistant=answer, prefix=f"t{i}", predecessor=prev, seq=1 + 3 * i
        )
        calls += turn
        prev = turn[1].id
    return calls


def test_keeps_the_invariants_and_every_promise_in_the_shipped_pipelines():
    # short answers in the kit's sessions: a small max_chars makes the rule fire
    check_rule(AnswerAging(keep_turns=2, max_chars=20), examples=10, max_steps=8)


def test_old_long_answers_are_shortened_the_kept_turns_are_not():
    commit = commit_of([AnswerAging(keep_turns=2, max_chars=100)], turns(5))
    answers = [it for it in commit.items if it.role == "assistant"]
    assert [it.state for it in answers] == ["aged", "aged", "aged", "full", "full"]
    assert answers[0].rendered.startswith(LONG[:100] + " [… 1,500 more characters")
    assert answers[-1].rendered == LONG


def test_a_short_answer_is_left_alone():
    commit = commit_of([AnswerAging(keep_turns=0)], turns(3, answer="Done."))
    assert all(it.state == "full" for it in commit.items)


class Eager(AnswerAging):
    """Broken on purpose: it shortens the kept turns too."""

    def apply(self, ctx):
        for p in ctx.new_positions():
            it = ctx.items[p]
            if it.role == "assistant" and self.too_long(it):
                ctx.replace(p, state="aged", rendered=it.rendered[:50], reason="answer_aging")


def test_the_kit_catches_a_broken_promise(ctxrules_kit):
    pipeline = Pipeline.of([Eager(keep_turns=2, max_chars=100)])
    runs = ctxrules_kit.drive_branch(turns(3), pipeline)
    with pytest.raises(InvariantViolation, match="promise of rule 'answer_aging'"):
        check_commits(runs, pipeline)
