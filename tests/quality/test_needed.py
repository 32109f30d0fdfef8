"""Needed-fact recall: the identifiers an answer used that an earlier user or tool
message holds, looked up in the request that produced the answer."""

from __future__ import annotations

import json

from ctxrules.model import Node, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ctxrules.quality.needed import FactIndex, answer_facts, score, session_recall
from ctxrules.quality.text import request_text
from ctxrules.summarizers.facts import exact_identifiers, occurs

_seq = iter(range(1, 10_000))


def node(role: str, output, **kw) -> Node:
    n = next(_seq)
    return Node(
        id=kw.pop("id", f"n{n}"), seq=n, created_at=float(n), role=role, output=output, **kw
    )


def test_exact_identifiers_by_kind():
    text = (
        "Check `pane_exists` in src/tmux/session.py:123, then self.pane_exists(name) and "
        "os.path.join(a); run `pytest -x --tb=short tests/test_a.py`.  QualityReport, "
        "getElementById, HTTPError and print(x); commit 9f3c2ab1, 1,234 rows, 3.14159, "
        "port 8080 or 12 or v2; e.g. MAX_FACT_CHARS, URLs, __init__.py, "
        "https://example.org/x?y=1.\nValueError: bad input"
    )
    assert exact_identifiers(text) == [
        ("symbol", "pane_exists"),
        ("path", "src/tmux/session.py"),
        ("number", "123"),
        ("symbol", "self.pane_exists"),
        ("symbol", "os.path.join"),
        ("flag", "--tb"),
        ("path", "tests/test_a.py"),
        ("symbol", "QualityReport"),
        ("symbol", "getElementById"),
        ("symbol", "HTTPError"),
        ("call", "print("),
        ("hash", "9f3c2ab1"),
        ("number", "1,234"),
        ("number", "3.14159"),
        ("number", "8080"),
        ("symbol", "MAX_FACT_CHARS"),
        ("file", "__init__.py"),
        ("url", "https://example.org/x?y=1"),
        ("symbol", "ValueError"),
        ("error", "ValueError: bad input"),
    ]


def test_occurs_only_as_a_whole_token():
    assert occurs("123", "x1234 and 123") == 10
    assert occurs("pane", "pane_exists") == -1
    assert occurs("print(", "reprint( print(x)") == 9
    assert occurs("src/a.py", "see src/a.py:3") == 4
    assert occurs("--tb", "--tbx") == -1


def test_an_answer_uses_its_text_and_tool_arguments_not_its_thinking():
    answer = node(
        "assistant",
        [
            ThinkingBlock(thinking="maybe hidden_helper"),
            TextBlock(text="The bug is in parse_header."),
            ToolUseBlock(id="t1", name="Bash", input={"command": "grep -n MAX_RETRIES lib/net.py"}),
        ],
    )
    assert answer_facts(answer) == [
        ("symbol", "parse_header"),
        ("symbol", "MAX_RETRIES"),
        ("path", "lib/net.py"),
    ]


def _session() -> list[Node]:
    user = node("user", "Why does lib/net.py time out? Keep MAX_RETRIES as it is.", id="u")
    a1 = node(
        "assistant", [ToolUseBlock(id="t1", name="Read", input={"path": "lib/net.py"})], id="a1"
    )
    r1 = node(
        "tool",
        [
            ToolResultBlock(
                tool_use_id="t1", content="def parse_header(raw):\n    return connect_timeout"
            )
        ],
        name="Read",
        caller="a1",
        id="r1",
    )
    a2 = node(
        "assistant",
        [ToolUseBlock(id="t2", name="Bash", input={"command": "grep -rn connect_timeout conf/"})],
        id="a2",
        predecessor="a1",
    )
    r2 = node(
        "tool",
        [ToolResultBlock(tool_use_id="t2", content="conf/app.toml:7: connect_timeout = 2")],
        name="Bash",
        caller="a2",
        id="r2",
    )
    a3 = node(
        "assistant",
        [
            TextBlock(
                text="parse_header reads connect_timeout (2 s, conf/app.toml); "
                "MAX_RETRIES stays; see new_helper."
            )
        ],
        id="a3",
        predecessor="a2",
    )
    return [user, a1, r1, a2, r2, a3]


def test_needed_facts_come_from_earlier_user_and_tool_messages():
    nodes = _session()
    index = FactIndex()
    needed = {}
    for n in nodes:
        if n.role == "assistant":
            needed[n.id] = index.needed(n)
        index.add(n)
    # a1 names the path the user gave; new_helper (a3) was never stated before: not needed
    assert [(f.text, f.source, f.older) for f in needed["a1"]] == [("lib/net.py", "u", False)]
    facts = {f.text: (f.source, f.older) for f in needed["a3"]}
    assert facts == {
        "parse_header": ("r1", True),  # from the first result: not in the newest input
        "connect_timeout": ("r1", False),  # in the newest result as well
        "conf/app.toml": ("r2", False),
        "MAX_RETRIES": ("u", True),
    }
    assert all(f.needed_by == "a3" for f in needed["a3"])


def _body(*texts: str) -> bytes:
    return json.dumps({"messages": [{"role": "user", "content": t} for t in texts]}).encode()


def test_recall_of_a_request_that_lost_an_old_result():
    nodes = _session()
    question = "Why does lib/net.py time out? Keep MAX_RETRIES as it is."
    full = _body(
        question,
        "def parse_header(raw): return connect_timeout",
        "conf/app.toml:7: connect_timeout = 2",
    )
    aged = _body(
        question,
        "[tool Read] lib/net.py output: def pa… timeout",
        "conf/app.toml:7: connect_timeout = 2",
    )
    report = session_recall("s", nodes, {"a3": aged})
    (r,) = report.requests
    assert (r.needed, r.kept, r.older_needed, r.older_kept) == (4, 3, 2, 1)
    assert [(f.text, f.source, f.needed_by) for f in r.lost] == [("parse_header", "r1", "a3")]
    assert report.recall == 0.75 and report.older_recall == 0.5
    assert session_recall("s", nodes, {"a3": full}).recall == 1.0


def test_score_counts_only_exact_text():
    nodes = _session()
    index = FactIndex()
    for n in nodes[:5]:
        index.add(n)
    facts = index.needed(nodes[5])
    text = request_text(_body("parse_headers connect_timeout conf/app.toml MAX_RETRIES"))
    r = score(facts, text)
    assert [f.text for f in r.lost] == ["parse_header"]  # parse_headers is another name
