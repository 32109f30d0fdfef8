"""run_summarizer calls a ``bounded`` summarizer in-line (no thread per answer) and keeps
the time limit: a call that took longer than it is answered as timed out; any other
summarizer still gets a thread of its own."""

from __future__ import annotations

import threading
import time

import pytest

from ctxrules.model import ContextItem
from ctxrules.summarizers import (
    ExtractiveSummarizer,
    SummaryRequest,
    request_key,
    run_summarizer,
)
from ctxrules.summarizers import request as request_module


def items() -> tuple[ContextItem, ...]:
    return (
        ContextItem(
            source_node_id="u1", role="user", rendered="Fix src/app.py; never push.", tokens=9
        ),
        ContextItem(source_node_id="a1", role="assistant", rendered="Reading it.", tokens=4),
        ContextItem(
            source_node_id="t1",
            role="tool",
            name="Read",
            caller="a1",
            tool_use_id="c1",
            tool_input='{"file_path": "src/app.py"}',
            rendered="def main():\n    raise ValueError('E1234 bad flag --fast')\n",
            tokens=20,
        ),
    )


def request(name: str, timeout: float) -> SummaryRequest:
    its = items()
    return SummaryRequest(
        key=request_key(name, 300, its),
        rule="summarize",
        summarizer=name,
        items=its,
        budget=300,
        timeout_seconds=timeout,
    )


@pytest.fixture
def threads(monkeypatch):
    """The threads ``run_summarizer`` starts, counted."""
    started: list[str] = []

    class Counted(threading.Thread):
        def start(self) -> None:
            started.append(self.name)
            super().start()

    monkeypatch.setattr(request_module.threading, "Thread", Counted)
    return started


class Slow:
    """Sleeps ``seconds`` then answers; ``bounded`` as given."""

    name = "slow"

    def __init__(self, seconds: float, bounded: bool) -> None:
        self.seconds = seconds
        self.bounded = bounded
        self.calls = 0

    def summarize(self, items, *, budget, instructions=""):
        self.calls += 1
        time.sleep(self.seconds)
        return "done"


def test_the_extractive_summarizer_answers_without_a_thread(threads):
    summarizer = ExtractiveSummarizer()
    assert summarizer.bounded is True
    limited = run_summarizer(request("extractive", 60.0))
    assert threads == []
    # The same answer as a call without a time limit (in-line on every version).
    assert limited == run_summarizer(request("extractive", 60.0), timeout=None)
    assert limited.text == summarizer.summarize(items(), budget=300)
    assert "src/app.py" in limited.text and not limited.timed_out


def test_a_bounded_call_over_the_limit_is_answered_as_timed_out(threads):
    slow = Slow(0.05, bounded=True)
    result = run_summarizer(request("slow", 0.01), summarizer=slow)
    assert result.timed_out and result.text == "" and result.problem() == "timed out"
    assert threads == [] and slow.calls == 1  # not retried, as a thread's timeout is not
    within = run_summarizer(request("slow", 5.0), summarizer=Slow(0.0, bounded=True))
    assert within.text == "done" and not within.timed_out


@pytest.mark.parametrize("bounded", [False, "yes", 1])
def test_any_other_summarizer_still_gets_a_thread(threads, bounded):
    slow = Slow(0.0, bounded=bounded)  # only ``True`` itself declares a bounded summarizer
    assert run_summarizer(request("slow", 5.0), summarizer=slow).text == "done"
    assert threads == ["ctxrules-summarizer"]
    threads.clear()
    hung = Slow(0.3, bounded=bounded)
    began = time.monotonic()
    assert run_summarizer(request("slow", 0.02), summarizer=hung).timed_out
    assert time.monotonic() - began < 0.25  # abandoned at the limit, not waited for
