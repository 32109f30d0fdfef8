"""Summary requests answered in-line: ``derive_with_summaries`` hands its answer function
to the derive, so a rule gets its summary in the derive that asks for it (one derive,
not derive → answer → derive again).  The commit is the one a derive given the same
answers makes; an answer function's exception comes out as it is; a rule that goes on
after a ``None`` and a rule that never stops asking behave as before."""

from __future__ import annotations

from typing import ClassVar

import pytest
from tests.counting import count_calls
from tests.rules.test_summarize import _kw

import ctxrules.commit.derive as derive_module
from ctxrules.commit import Pipeline, derive_commit, derive_with_summaries
from ctxrules.commit.derive import MAX_SUMMARY_ROUNDS
from ctxrules.errors import RuleError
from ctxrules.ruleapi import Rule, RuleContext
from ctxrules.rules import Summarize
from ctxrules.summarizers.request import SummaryRequest, SummaryResult, run_summarizer


def test_a_summary_asked_for_is_answered_in_the_same_derive(monkeypatch):
    calls, kw = _kw(Summarize(threshold_tokens=3000, keep_tail_turns=2))
    given: dict[str, SummaryResult] = {}

    def answer(request: SummaryRequest) -> SummaryResult:
        given[request.key] = run_summarizer(request)
        return given[request.key]

    derives = count_calls(monkeypatch, derive_module, "derive_commit")
    final = derive_with_summaries(None, calls, **kw, answer=answer)
    assert derives.n == 1 and len(given) >= 1
    assert any(it.state == "summary" for it in final.commit.items)
    assert final.requests == ()
    again = derive_commit(None, calls, **kw, summaries=given)
    assert again.requests == ()
    assert again.commit.id == final.commit.id and again.delta == final.delta


class _Chain(Rule):
    """Asks for summary ``k + 1`` once it has summary ``k`` (up to ``depth``); notes
    whether it waited, and goes on after a ``None``."""

    name = "test-chain"
    params: ClassVar[dict[str, int]] = {"depth": 1}

    def apply(self, ctx: RuleContext) -> None:
        got = []
        for k in range(self.depth):
            found = ctx.summary(
                ctx.items[: k + 1], summarizer="extractive", budget=10 + k, instructions=str(k)
            )
            if found is None:
                ctx.note(f"waiting at {k}")
                return
            got.append(found.text)
        ctx.note("all: " + " | ".join(got))


def _chain_kw(depth: int) -> tuple[list, dict]:
    calls, kw = _kw(Summarize(threshold_tokens=10**9))
    kw["pipeline"] = Pipeline.of([_Chain(depth=depth)])
    return calls, kw


def test_a_rule_that_goes_on_after_none_gets_every_answer_in_one_derive(monkeypatch):
    calls, kw = _chain_kw(3)
    asked: list[str] = []

    def answer(request: SummaryRequest) -> SummaryResult:
        asked.append(request.key)
        return SummaryResult(text=f"answer {len(asked)}")

    derives = count_calls(monkeypatch, derive_module, "derive_commit")
    final = derive_with_summaries(None, calls, **kw, answer=answer)
    assert derives.n == 1 and len(asked) == 3
    assert any(n.endswith("all: answer 1 | answer 2 | answer 3") for n in final.commit.notes)
    # Round by round, the derive waits at each step in turn and ends the same.
    answers = {}
    for k in range(3):
        gen = derive_commit(None, calls, **kw, summaries=answers)
        assert any(n.endswith(f"waiting at {k}") for n in gen.commit.notes)
        (request,) = gen.requests
        answers[request.key] = SummaryResult(text=f"answer {k + 1}")
    assert derive_commit(None, calls, **kw, summaries=answers).commit.id == final.commit.id


def test_an_answer_functions_exception_comes_out_as_it_is_and_stops_the_answers():
    calls, kw = _chain_kw(3)
    asked: list[str] = []

    def answer(request: SummaryRequest) -> SummaryResult:
        asked.append(request.key)
        raise ConnectionError("the summarizer's host is down")

    with pytest.raises(ConnectionError, match="host is down"):
        derive_with_summaries(None, calls, **kw, answer=answer)
    assert len(asked) == 1


def test_a_rule_asking_for_ever_new_summaries_is_still_stopped():
    calls, kw = _chain_kw(10**6)
    asked: list[str] = []

    def answer(request: SummaryRequest) -> SummaryResult:
        asked.append(request.key)
        return SummaryResult(text="more")

    with pytest.raises(RuleError, match="still asking for summaries"):
        derive_with_summaries(None, calls, **kw, answer=answer)
    # In-line answers are bounded as rounds are, then the rounds' own limit applies.
    assert MAX_SUMMARY_ROUNDS < len(asked) <= 2 * MAX_SUMMARY_ROUNDS


def test_a_none_answer_is_asked_again_as_before():
    calls, kw = _chain_kw(1)
    asked: list[str] = []

    def answer(request: SummaryRequest) -> SummaryResult | None:
        asked.append(request.key)
        return None if len(asked) < 3 else SummaryResult(text="at last")

    final = derive_with_summaries(None, calls, **kw, answer=answer)  # type: ignore[arg-type]
    assert len(asked) == 3 and len(set(asked)) == 1
    assert any(n.endswith("all: at last") for n in final.commit.notes)
