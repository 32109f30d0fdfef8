"""The offline extractive summarizer keeps task, constraints, files, errors and open todos;
it is deterministic, respects its budget and merges a previous summary."""

from __future__ import annotations

import json

from ctxrules.model import ContextItem
from ctxrules.summarizers import ExtractiveSummarizer, get_summarizer

TASK = "Port the parser in src/parse.py to the new tokenizer API."


def tool(sid, caller, name, tool_input, rendered, **kw):
    return ContextItem(
        source_node_id=sid,
        role="tool",
        name=name,
        caller=caller,
        tool_input=tool_input,
        rendered=rendered,
        **kw,
    )


def items():
    todos = {
        "todos": [
            {"content": "port parser", "status": "in_progress"},
            {"content": "write tests", "status": "pending"},
            {"content": "read docs", "status": "completed"},
        ]
    }
    return [
        ContextItem(source_node_id="u1", role="user", rendered=TASK),
        ContextItem(source_node_id="a1", role="assistant", rendered="I will read the parser."),
        tool("t1", "a1", "Read", '{"file_path": "src/parse.py"}', "def parse(): ..."),
        ContextItem(
            source_node_id="u2",
            role="user",
            rendered="Looks good. You must not change the public API. Thanks!",
        ),
        ContextItem(source_node_id="a2", role="assistant", rendered="Running the tests."),
        tool(
            "t2",
            "a2",
            "Bash",
            '{"command": "pytest tests/test_parse.py"}',
            "FAILED tests/test_parse.py::test_empty - IndexError\n2 failed",
            is_error=True,
        ),
        tool("t3", "a2", "TodoWrite", json.dumps(todos), "ok"),
    ]


def test_keeps_what_compaction_usually_loses():
    text = ExtractiveSummarizer().summarize(items(), budget=2000)
    assert TASK in text
    assert "You must not change the public API." in text
    assert "src/parse.py" in text and "tests/test_parse.py" in text
    assert "Bash: FAILED tests/test_parse.py::test_empty - IndexError" in text
    assert "[in_progress] port parser" in text and "[pending] write tests" in text
    assert "read docs" not in text  # completed todos are not open
    assert "Bash ×1" in text and "Read ×1" in text


def test_deterministic_and_registered():
    s = get_summarizer("extractive")
    assert s.summarize(items(), budget=500) == ExtractiveSummarizer().summarize(items(), budget=500)


def test_budget_cuts_least_important_sections_first():
    many = items() + [
        ContextItem(source_node_id=f"x{i}", role="assistant", rendered=f"step {i} " * 30)
        for i in range(200)
    ]
    text = ExtractiveSummarizer().summarize(many, budget=100)
    assert len(text) <= 400
    assert TASK in text


def test_a_previous_summary_is_merged_not_lost():
    first = ExtractiveSummarizer().summarize(items(), budget=2000)
    later = [
        ContextItem(source_node_id="sm_1", role="assistant", state="summary", rendered=first),
        ContextItem(source_node_id="u3", role="user", rendered="Now also update README.md"),
        ContextItem(source_node_id="a3", role="assistant", rendered="Updating."),
        tool("t4", "a3", "Read", '{"file_path": "README.md"}', "# Title"),
    ]
    text = ExtractiveSummarizer().summarize(later, budget=2000)
    assert TASK in text and "You must not change the public API." in text
    assert "README.md" in text and "src/parse.py" in text
    assert "Read ×2" in text and "[pending] write tests" in text
