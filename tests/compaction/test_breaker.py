"""The circuit breaker (three consecutive failed compactions switch it off, success
resets it) and the reactive path (prompt-too-long: compact once, send once more)."""

from __future__ import annotations

import pytest

from ctxrules import dag
from ctxrules.compaction import (
    CircuitBreaker,
    CompactOptions,
    compact,
    is_prompt_too_long,
    retry_after_compaction,
)
from ctxrules.errors import CompactionError, PromptTooLongError
from ctxrules.plugins import registry
from ctxrules.providers import get_provider

NOW = 2_000_000_000.0
# The refusal as Anthropic's API words it (status 400, error type invalid_request_error).
ANTHROPIC_REFUSAL = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 208363 tokens > 200000 maximum",
    },
}


class Flaky:
    """Fails until told otherwise."""

    name = "test-flaky"

    def __init__(self):
        self.failing = True
        self.calls = 0

    def summarize(self, items, *, budget, **kwargs):
        self.calls += 1
        if self.failing:
            raise RuntimeError("overloaded")
        return "the work so far, briefly"


@pytest.fixture
def flaky():
    s = Flaky()
    registry("summarizers").items[s.name] = s
    yield s
    registry("summarizers").items.pop(s.name)


def _session(store):
    info = dag.create_session(store)
    for k in range(4):
        dag.append(store, info.id, "user", f"step {k}: " + "detail " * 200)
        dag.append(store, info.id, "assistant", f"did {k}: " + "result " * 200)
    return info.id


def test_three_failures_switch_compaction_off_until_one_succeeds(any_store, flaky):
    sid = _session(any_store)
    breaker = CircuitBreaker()
    opts = CompactOptions(summarizer=flaky.name)

    def run():
        return compact(any_store, sid, now=NOW, trigger="auto", options=opts)

    for k in range(3):
        assert not breaker.open
        with pytest.raises(CompactionError, match="overloaded"):
            breaker.call(run)
        assert breaker.failures == k + 1
    calls = flaky.calls
    with pytest.raises(CompactionError, match="switched off after 3 consecutive failures"):
        breaker.call(run)
    assert flaky.calls == calls  # refused without asking the summarizer
    breaker.reset()
    flaky.failing = False
    result = breaker.call(run)
    assert result.record.trigger == "auto" and breaker.failures == 0 and not breaker.open


def test_a_success_in_between_resets_the_count(any_store, flaky):
    sid = _session(any_store)
    breaker = CircuitBreaker(limit=2)
    opts = CompactOptions(summarizer=flaky.name)

    def run():
        return compact(any_store, sid, now=NOW, trigger="auto", options=opts)

    with pytest.raises(CompactionError):
        breaker.call(run)
    flaky.failing = False
    breaker.call(run)
    flaky.failing = True
    with pytest.raises(CompactionError):
        breaker.call(run)
    assert breaker.failures == 1 and not breaker.open
    with pytest.raises(ValueError):
        CircuitBreaker(limit=0)


def test_prompt_too_long_compacts_once_and_sends_again(any_store):
    sid = _session(any_store)
    refusal = get_provider("anthropic").prompt_too_long(400, ANTHROPIC_REFUSAL)
    assert refusal is not None
    sent: list[str] = []

    def send():
        head = any_store.get_session(sid).head
        sent.append(head)
        if len(sent) == 1:
            raise refusal
        return "answer"

    def compact_now():
        return compact(any_store, sid, now=NOW, trigger="reactive")

    answer, result = retry_after_compaction(send, compact_now, breaker=CircuitBreaker())
    assert answer == "answer" and result.record.trigger == "reactive"
    assert sent[1] == result.boundary != sent[0]  # the second send saw the compaction


def test_a_second_refusal_is_raised_and_other_errors_are_not_compaction_cases(any_store):
    sid = _session(any_store)
    compactions = []

    def compact_now():
        compactions.append(1)
        return compact(any_store, sid, now=NOW + len(compactions), trigger="reactive")

    def always_too_long():
        raise PromptTooLongError("prompt is too long")

    with pytest.raises(PromptTooLongError):
        retry_after_compaction(always_too_long, compact_now)
    assert compactions == [1]  # compacted once, then the refusal stands

    def broken():
        raise RuntimeError("connection reset")

    with pytest.raises(RuntimeError, match="connection reset"):
        retry_after_compaction(broken, compact_now)
    assert compactions == [1]


def test_a_failed_reactive_compaction_says_both_things(any_store, flaky):
    sid = _session(any_store)
    breaker = CircuitBreaker()

    def send():
        raise PromptTooLongError("prompt is too long: 250000 tokens > 200000 maximum")

    def compact_now():
        opts = CompactOptions(summarizer=flaky.name)
        return compact(any_store, sid, now=NOW, trigger="reactive", options=opts)

    with pytest.raises(CompactionError, match=r"250000 tokens.*overloaded") as exc:
        retry_after_compaction(send, compact_now, breaker=breaker)
    assert isinstance(exc.value.__cause__, CompactionError)
    assert breaker.failures == 1


def test_sdk_style_errors_are_recognised_by_the_provider():
    class StatusError(Exception):  # what an SDK raises: status and the decoded body
        def __init__(self, status_code, body):
            super().__init__(str(body))
            self.status_code, self.body = status_code, body

    assert is_prompt_too_long(StatusError(400, ANTHROPIC_REFUSAL), "anthropic")
    # No provider named: every registered provider's recogniser is asked.
    assert is_prompt_too_long(StatusError(400, ANTHROPIC_REFUSAL))
    other = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    assert not is_prompt_too_long(StatusError(400, other), "anthropic")
    assert not is_prompt_too_long(StatusError(500, ANTHROPIC_REFUSAL), "anthropic")
    assert is_prompt_too_long(PromptTooLongError("x"))
