"""run_summarizer: instructions reach the summarizer (old summarizers still work), a
prompt-too-long refusal drops the oldest whole unit and asks again (3 times), inputs
over ``max_input_tokens`` are summarised in chunks, transient failures are retried and
permanent ones are not."""

from __future__ import annotations

import warnings

import pytest

from ctxrules.errors import ConfigError, PluginWarning, PromptTooLongError
from ctxrules.model import ContextItem
from ctxrules.providers import PromptTooLong
from ctxrules.summarizers import (
    ExtractiveSummarizer,
    SummaryRequest,
    SummaryResult,
    request_key,
    run_summarizer,
)


def turn(n: int, tokens: int = 100) -> list[ContextItem]:
    """Round ``n``: a user message, an assistant turn and its two tool results."""
    a = f"a{n}"
    return [
        ContextItem(source_node_id=f"u{n}", role="user", rendered=f"step {n}", tokens=tokens),
        ContextItem(source_node_id=a, role="assistant", rendered=f"doing {n}", tokens=tokens),
        *(
            ContextItem(
                source_node_id=f"t{n}{k}",
                role="tool",
                name="Read",
                caller=a,
                tool_use_id=f"call_{n}{k}",
                tool_input=f'{{"file_path": "src/m{n}{k}.py"}}',
                rendered=f"contents {n}{k}",
                tokens=tokens,
            )
            for k in (1, 2)
        ),
    ]


def request(items, *, instructions: str = "", budget: int = 500) -> SummaryRequest:
    items = tuple(items)
    return SummaryRequest(
        key=request_key("spy", budget, items, instructions),
        rule="summarize",
        summarizer="spy",
        items=items,
        budget=budget,
        instructions=instructions,
    )


class Spy:
    """Records what every call got; refuses as too long while it holds more than
    ``fits`` items (``None``: never); answers with the ids it saw."""

    name = "spy"

    def __init__(self, fits: int | None = None, max_input_tokens: int | None = None):
        self.fits = fits
        self.max_input_tokens = max_input_tokens
        self.calls: list[tuple[tuple[ContextItem, ...], str]] = []

    def summarize(self, items, *, budget, instructions=""):
        self.calls.append((tuple(items), instructions))
        if self.fits is not None and len(items) > self.fits:
            raise PromptTooLong("anthropic: prompt is too long: 9000 tokens > 8000 maximum")
        return "saw " + " ".join(it.source_node_id for it in items)


def ids(items) -> list[str]:
    return [it.source_node_id for it in items]


def paired(items) -> bool:
    """Every tool result's assistant turn is there, and every assistant's results."""
    present = {it.source_node_id for it in items}
    return all(it.caller in present for it in items if it.role == "tool")


# -- instructions ------------------------------------------------------------------------


def test_instructions_reach_a_summarizer_that_takes_them():
    spy = Spy()
    run_summarizer(request(turn(1), instructions="keep the SQL"), summarizer=spy)
    assert spy.calls[0][1] == "keep the SQL"


class OldStyle:
    """A summarizer written before instructions existed."""

    name = "old"

    def __init__(self):
        self.calls = 0

    def summarize(self, items, *, budget):
        self.calls += 1
        return f"{len(items)} items"


def test_an_old_summarizer_still_works_and_is_told_of_dropped_instructions():
    old = OldStyle()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning without instructions
        assert run_summarizer(request(turn(1)), summarizer=old).text == "4 items"
    with pytest.warns(PluginWarning, match="'old' takes no instructions"):
        result = run_summarizer(request(turn(1), instructions="keep the SQL"), summarizer=old)
    assert result == SummaryResult(text="4 items") and old.calls == 2


def test_instructions_are_part_of_the_request_key():
    items = turn(1)
    plain = request_key("extractive", 100, items)
    assert request_key("extractive", 100, items, "") == plain
    assert request_key("extractive", 100, items, "focus on the API") != plain
    assert request_key("extractive", 100, items, "focus on the API") != request_key(
        "extractive", 100, items, "focus on the tests"
    )
    # Without instructions the key is the one requests had before instructions existed
    # (computed by the previous implementation), so stored answers still match.
    one = (ContextItem(source_node_id="n1", role="user", rendered="hello", tokens=1),)
    assert request_key("extractive", 100, one) == "sr_91ccaa21f26a2d04b81f870d"


# -- prompt too long ----------------------------------------------------------------------


def test_prompt_too_long_drops_the_oldest_round_whole_and_asks_again():
    items = turn(1) + turn(2) + turn(3)
    spy = Spy(fits=8)  # two rounds fit
    result = run_summarizer(request(items), summarizer=spy)
    assert [len(c) for c, _ in spy.calls] == [12, 11, 8]  # u1, then a1 with its two results
    assert ids(spy.calls[1][0])[0] == "a1" and ids(spy.calls[2][0])[0] == "u2"
    assert all(paired(c) for c, _ in spy.calls)
    assert result.text == "saw " + " ".join(ids(items[4:])) and result.dropped == 4


def test_prompt_too_long_gives_up_after_three_trims():
    items = turn(1) + turn(2) + turn(3)
    spy = Spy(fits=2)
    result = run_summarizer(request(items), summarizer=spy)
    assert len(spy.calls) == 4  # the first call and three trims
    assert result.error.startswith("PromptTooLong:") and "prompt is too long" in result.error
    assert not result.text and result.dropped == 5  # u1; a1 and its results; u2


def test_prompt_too_long_never_drops_the_previous_summary_or_the_last_round():
    previous = ContextItem(
        source_node_id="sm_1", role="assistant", state="summary", rendered="earlier", tokens=50
    )
    spy = Spy(fits=1)
    result = run_summarizer(request([previous, *turn(1), *turn(2)]), summarizer=spy, trims=9)
    assert all(ids(c)[0] == "sm_1" for c, _ in spy.calls)
    assert ids(spy.calls[-1][0]) == ["sm_1", "a2", "t21", "t22"]  # nothing more to drop
    assert result.error and result.dropped == 5


class Flaky:
    """Raises ``errors`` in turn, then answers."""

    name = "flaky"

    def __init__(self, *errors: Exception):
        self.errors = list(errors)
        self.calls = 0

    def summarize(self, items, *, budget, instructions=""):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return f"summary of {len(items)}"


def test_transient_failures_and_refusals_have_separate_allowances():
    refusal = PromptTooLongError("too long")
    flaky = Flaky(ConnectionError("reset"), refusal, ConnectionError("reset"), refusal)
    result = run_summarizer(request(turn(1) + turn(2) + turn(3)), summarizer=flaky)
    assert flaky.calls == 5 and result == SummaryResult(text="summary of 8", dropped=4)


def test_a_missing_key_is_not_retried():
    flaky = Flaky(ConfigError("no API key in $ANTHROPIC_API_KEY"))
    result = run_summarizer(request(turn(1)), summarizer=flaky)
    assert flaky.calls == 1 and "ConfigError: no API key" in result.error


# -- chunks --------------------------------------------------------------------------------


def test_input_over_max_input_tokens_is_summarised_in_chunks():
    items = turn(1) + turn(2) + turn(3) + turn(4)  # 16 items of 100 tokens, 4 rounds each
    spy = Spy(max_input_tokens=650)
    result = run_summarizer(request(items), summarizer=spy)
    first, *later = [c for c, _ in spy.calls]
    assert ids(first) == ids(items[:5])  # u1, a1 + results; then u2 fits no more (…+300)
    for chunk in later:
        assert chunk[0].state == "summary" and chunk[0].source_node_id == "sm_chunk"
        assert sum(it.tokens for it in chunk) <= 650 or len(chunk) == 2
        assert paired(chunk)
    # each chunk begins with the previous call's answer
    answers = ["saw " + " ".join(ids(c)) for c, _ in spy.calls]
    assert [c[0].rendered for c in later] == answers[:-1]
    # every item is handed over exactly once, in order
    assert [i for c in [first, *(c[1:] for c in later)] for i in ids(c)] == ids(items)
    assert result.text == answers[-1] and result.dropped == 0


def test_a_round_larger_than_the_limit_goes_alone():
    items = turn(1, tokens=400) + turn(2, tokens=10)
    spy = Spy(max_input_tokens=500)
    run_summarizer(request(items), summarizer=spy)
    assert [ids(c) for c, _ in spy.calls][:2] == [["u1"], ["sm_chunk", "a1", "t11", "t12"]]


def test_a_failed_chunk_fails_the_request():
    flaky = Flaky(*[ConnectionError("reset")] * 3)
    flaky.max_input_tokens = 500
    result = run_summarizer(request(turn(1) + turn(2) + turn(3)), summarizer=flaky)
    assert flaky.calls == 3 and result.error == "ConnectionError: reset"


def test_chunked_extractive_summary_keeps_the_facts_of_every_chunk():
    items = turn(1) + turn(2) + turn(3) + turn(4)
    chunked = ExtractiveSummarizer()
    chunked.max_input_tokens = 500
    text = run_summarizer(request(items), summarizer=chunked).text
    whole = ExtractiveSummarizer().summarize(items, budget=500)
    for n in (1, 2, 3, 4):
        for k in (1, 2):
            assert f"src/m{n}{k}.py" in text and f"src/m{n}{k}.py" in whole
    assert "Read ×8" in text and "Read ×8" in whole


@pytest.mark.parametrize(
    ("result", "timeout", "problem"),
    [
        (SummaryResult(text="a summary"), None, ""),
        (SummaryResult(text="a summary", dropped=2), 5.0, ""),
        (SummaryResult(timed_out=True), None, "timed out"),
        (SummaryResult(timed_out=True, error="late"), 0.5, "timed out after 0.5s"),
        (
            SummaryResult(error="RuntimeError: down", text="partial"),
            None,
            "failed: RuntimeError: down",
        ),
        (SummaryResult(text=" \n "), 5.0, "returned nothing"),
    ],
)
def test_what_keeps_a_result_from_being_a_summary(result, timeout, problem):
    assert result.problem(timeout) == problem
