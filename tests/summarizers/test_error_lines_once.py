"""The extractive summarizer scans a tool result for error lines once (not once more as
identifiers it then drops); ``exact_identifiers(errors=False)`` is the same list
without the error lines."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxrules.model import ContextItem
from ctxrules.summarizers import ExtractiveSummarizer, extractive, facts
from ctxrules.summarizers.facts import exact_identifiers

RESULT = (
    "Traceback (most recent call last):\n"
    '  File "src/app/main.py", line 42, in run_job\n'
    "ValueError: bad flag --fast for job_7f3a9c\n"
    "error: build failed at src/app/main.py\n"
    "see https://example.com/docs/E1234 and config.yaml\n"
)


def test_a_tool_result_is_scanned_for_error_lines_once(monkeypatch):
    scanned: list[str] = []
    scan = facts.error_lines

    def counted(text: str, *, failed: bool = False) -> list[str]:
        scanned.append(text)
        return scan(text, failed=failed)

    monkeypatch.setattr(facts, "error_lines", counted)
    monkeypatch.setattr(extractive, "error_lines", counted)
    items = (
        ContextItem(source_node_id="a1", role="assistant", rendered="Running it.", tokens=3),
        ContextItem(
            source_node_id="t1",
            role="tool",
            name="Bash",
            caller="a1",
            tool_use_id="c1",
            tool_input='{"command": "make"}',
            rendered=RESULT,
            tokens=60,
        ),
    )
    text = ExtractiveSummarizer().summarize(items, budget=400)
    assert scanned.count(RESULT) == 1
    assert "ValueError: bad flag --fast for job_7f3a9c" in text  # still in Errors
    assert "src/app/main.py" in text


_LINES = st.sampled_from(
    [
        "ValueError: bad value",
        "error: src/x.py failed",
        "FAILED tests/test_a.py::test_b",
        "fatal: not a git repository",
        "Traceback (most recent call last):",
        "plain line with job_42 and /tmp/out.log",
        "Warning: deprecated --old flag",
        "count 12345 at 2026-12-06",
        "",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_LINES, st.text(max_size=40)), max_size=12))
def test_without_errors_is_the_list_without_the_error_lines(lines):
    text = "\n".join(lines)
    whole = exact_identifiers(text)
    assert exact_identifiers(text, errors=False) == [(k, t) for k, t in whole if k != "error"]
