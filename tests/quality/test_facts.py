"""Fact extraction for the quality checker: identifiers, constraints, error lines, files,
todos and the task statement, from nodes written out in the test."""

from __future__ import annotations

import json

from ctxrules.commit.anchor import AnchorSkip
from ctxrules.model import Node, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ctxrules.quality.facts import (
    MAX_FACT_CHARS,
    constraints_in,
    error_lines,
    extract_facts,
    identifiers_in,
    normalize,
)
from ctxrules.quality.text import request_text

_seq = iter(range(1, 10_000))


def node(role: str, output="", **kw) -> Node:
    n = next(_seq)
    return Node(
        id=kw.pop("id", f"n{n}"), seq=n, created_at=float(n), role=role, output=output, **kw
    )


def test_identifiers_by_kind():
    text = (
        "See src/auth/session.py and README.md, https://example.org/a/b?x=1, commit "
        "9f3c2ab1 and 1b4951f2-dc07-4bb4-9740-777baa85b06e. User mia_li_3668 flew HAT038 "
        "on 2024-05-17; it took 250 ms, cost $1,250.50 and 42 apples; port 8080. "
        "Choose and/or skip, I/O bound, ~/notes and ./build/out, 7 days, 12 or 99."
    )
    assert identifiers_in(text) == [
        ("path", "src/auth/session.py"),
        ("file", "README.md"),
        ("url", "https://example.org/a/b?x=1"),
        ("hash", "9f3c2ab1"),
        ("uuid", "1b4951f2-dc07-4bb4-9740-777baa85b06e"),
        ("id", "mia_li_3668"),
        ("id", "HAT038"),
        ("date", "2024-05-17"),
        ("number", "250 ms"),
        ("number", "$1,250.50"),
        ("number", "8080"),
        ("path", "~/notes"),
        ("path", "./build/out"),
        ("number", "7 days"),
    ]


def test_constraint_sentences_outside_code():
    text = (
        "Please fix the parser. You must not change the public API! Tests pass.\n"
        "- Never push to main.\n"
        "1. Only touch files under src/auth.\n"
        "```\n# do not copy this: it is code\n```\n"
        "Don't.\n"  # two words: too short to be a constraint
        "I always   want   small commits."
    )
    assert constraints_in(text) == [
        "You must not change the public API!",
        "Never push to main.",
        "Only touch files under src/auth.",
        "I always want small commits.",
    ]
    long = "You must " + "really " * 80 + "do it."
    (cut,) = constraints_in(long)
    assert len(cut) == MAX_FACT_CHARS and normalize(long).startswith(cut)


def test_error_lines_and_the_first_line_of_a_failure():
    log = (
        "collected 3 items\n"
        "    raise ValueError('in code, not an error line')\n"
        "FAILED tests/test_login.py::test_token - AssertionError: expected 200\n"
        "E   AssertionError: expected 200, got 401\n"
        "ValueError: bad token\n"
        "error[E0308]: mismatched types\n"
        "fatal: not a git repository\n"
        "Traceback (most recent call last):\n"
        "KeyError: 'x'\n"
    )
    assert error_lines(log) == [
        "FAILED tests/test_login.py::test_token - AssertionError: expected 200",
        "E AssertionError: expected 200, got 401",
        "ValueError: bad token",
        "error[E0308]: mismatched types",
        "fatal: not a git repository",
    ]  # five at most
    assert error_lines("Exit code 1\nall good", failed=True) == ["Exit code 1"]


def test_extract_facts_from_folded_nodes():
    # A slash-command line, then its expansion: the expansion is the task statement.
    u1 = node("user", "<command-name>/fix</command-name>\n<command-args>login</command-args>")
    u1b = node("user", [TextBlock("Fix the flaky login test. The expanded command prompt.")])
    a1 = node(
        "assistant",
        [
            ThinkingBlock("secret plan about tokenizer_v2 and 4096 things", signature="sig"),
            TextBlock("Looking at src/auth/session.py first."),
            ToolUseBlock(id="tu1", name="Read", input={"file_path": "/repo/src/auth/session.py"}),
        ],
    )
    t1 = node(
        "tool",
        "1→def login():",
        name="Read",
        caller=a1.id,
        input={"file_path": "/repo/src/auth/session.py"},
    )
    todos = {
        "todos": [
            {"content": "Reproduce the flake", "status": "completed"},
            {"content": "Add a retry guard", "status": "in_progress"},
            {"content": "Write the changelog", "status": "pending"},
        ]
    }
    t2 = node("tool", "ok", name="TodoWrite", caller=a1.id, input=todos)
    t3 = node(
        "tool",
        [ToolResultBlock(tool_use_id="tu3", content="Exit code 2\nboom", is_error=True)],
        name="Bash",
        caller=a1.id,
        input={"command": "pytest tests/test_login.py -k token", "body": "x" * 400 + " ID_12345"},
    )
    u2 = node("user", "The fix must keep the 30 s timeout. Ticket AUTH-4821 explains why.")
    a2 = node("assistant", "Done.")
    later = {"todos": [dict(t, status="completed") for t in todos["todos"][:2]]}
    later["todos"].append(todos["todos"][2])  # TodoWrite sends the whole list each time
    t4 = node("tool", "ok", name="TodoWrite", caller=a2.id, input=json.dumps(later))
    branch = [u1, u1b, a1, t1, t2, t3, u2, a2, t4]
    facts = extract_facts([a1, t1, t2, t3, u2], branch)
    got = [(f.category, f.kind, f.text, f.node_id) for f in facts]
    assert got == [
        ("task", "task", "Fix the flaky login test. The expanded command prompt.", u1b.id),
        # a1's text only: its thinking and its tool call are not what it said
        ("identifiers", "path", "src/auth/session.py", a1.id),
        ("files", "file", "/repo/src/auth/session.py", t1.id),
        ("identifiers", "path", "tests/test_login.py", t3.id),  # the 400-char body is skipped
        ("identifiers", "error", "Exit code 2", t3.id),
        ("constraints", "constraint", "The fix must keep the 30 s timeout.", u2.id),
        ("identifiers", "number", "30 s", u2.id),
        ("identifiers", "id", "AUTH-4821", u2.id),
        # the latest todo state on the branch: the retry guard was completed later
        ("todos", "todo", "Write the changelog", t4.id),
    ]
    assert not any(f.found for f in facts)
    # With no skip kinds the first user line, the command line, is the task statement.
    plain = [f.node_id for f in extract_facts([], branch, AnchorSkip(())) if f.category == "task"]
    assert plain == [u1.id]
    # No todo call folded: no todo facts, whatever the branch holds.
    assert not [f for f in extract_facts([u2], branch) if f.category == "todos"]


def test_request_text_reads_every_provider_shape_but_not_tools():
    body = {
        "model": "m-1",
        "system": [{"type": "text", "text": "System   rules"}],
        "tools": [{"name": "Read", "description": "SECRET-TOOL-DOC"}],
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_9",
                        "function": {
                            "name": "Read",
                            "arguments": json.dumps({"file_path": "/a\\b c.py"}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_9", "content": '{"price": 1250}'},
        ],
        "contents": [{"parts": [{"text": "gemini part"}]}],
    }
    text = request_text(json.dumps(body).encode())
    assert "System rules" in text and "gemini part" in text
    assert "/a\\b c.py" in text  # the JSON argument read as data, unescaped
    assert '{"price": 1250}' in text  # and a JSON string kept as sent
    assert "SECRET-TOOL-DOC" not in text and "m-1" not in text and "call_9" not in text


def test_incremental_todo_tools_keep_the_latest_state_per_todo():
    a = node("assistant", "Planning.")
    create1 = node(
        "tool",
        "ok",
        name="todo_create",
        caller=a.id,
        input={"id": "1", "content": "Write the parser"},
    )
    create2 = node(
        "tool",
        "ok",
        name="todo_create",
        caller=a.id,
        input={"id": "2", "content": "Fuzz the parser"},
    )
    done = node(
        "tool", "ok", name="todo_update", caller=a.id, input={"id": "1", "status": "completed"}
    )
    renamed = node(
        "tool",
        "ok",
        name="todo_update",
        caller=a.id,
        input={"id": "2", "content": "Fuzz the parser for an hour", "status": "in_progress"},
    )
    branch = [node("user", "Build it."), a, create1, create2, done, renamed]
    todos = [f for f in extract_facts([create1], branch) if f.category == "todos"]
    assert [(f.text, f.node_id) for f in todos] == [("Fuzz the parser for an hour", renamed.id)]
