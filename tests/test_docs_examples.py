"""The docs' runnable examples run, as written, against fake vendors on a loopback server.

A fenced ``python`` block of ``docs/*.md`` whose first line is ``# example: NAME`` is an
example an agent author copies: it runs here with the official SDKs and frameworks
pointed at ``fake_vendors.responder`` through their documented base-URL variables — a
model that calls a tool once and then answers.  Each example must finish its loop: the
server saw the tool call answered (a second request carrying the tool's result) and no
request it could not answer.  ``MY_TOOLS`` and ``run_tool`` are the agent's own (given
here, as the docs say).  An example whose framework is not installed is skipped, saying
which.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fake_vendors import responder, vendor_env
from loopback import Loopback

DOCS = Path(__file__).resolve().parents[1] / "docs"
_BLOCK = re.compile(r"```python\n# example: ([\w.-]+)\n(.*?)```", re.DOTALL)

PRELUDE = """
from ctxrules.model import ToolSpec

MY_TOOLS = (
    ToolSpec(
        name="ls",
        description="List the files of a directory.",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
    ),
)


def run_tool(call):
    return "a.py\\nb.py"
"""


def _examples() -> list:
    out = []
    for page in sorted(DOCS.glob("*.md")):
        for m in _BLOCK.finditer(page.read_text(encoding="utf-8")):
            out.append(pytest.param(m.group(2), id=f"{page.stem}:{m.group(1)}"))
    return out


EXAMPLES = _examples()


def test_the_docs_have_examples():
    names = {p.id for p in EXAMPLES}
    assert {"engine:sync-anthropic", "engine:async-anthropic", "engine:async-gemini"} <= names
    assert {
        "integrations:openai-agents",
        "integrations:pydantic-ai",
        "integrations:langchain",
        "integrations:litellm",
        "integrations:openai-agents-streamed",
        "integrations:pydantic-ai-streamed",
        "integrations:langchain-streamed",
    } <= names


@pytest.mark.parametrize("code", EXAMPLES)
def test_an_example_runs_as_written(code, monkeypatch, tmp_path):
    imports = re.findall(r"^(?:from|import) ([\w.]+)", code, re.MULTILINE)
    for name in imports:
        if name.split(".")[0] not in ("ctxrules", "asyncio", "time", "json", "os"):
            pytest.importorskip(name, reason=f"{name} is not installed")
    if "openai:gpt-4o" in code and "create_agent" in code:
        pytest.importorskip("langchain_openai", reason="langchain-openai is not installed")
    monkeypatch.chdir(tmp_path)
    with Loopback() as server:
        server.responder = responder
        for key, value in vendor_env(server.url).items():
            monkeypatch.setenv(key, value)
        exec(compile(PRELUDE + code, "<docs example>", "exec"), {"__name__": "__example__"})
    statuses = [s.path for s in server.seen]
    assert len(server.seen) >= 2, statuses
    # the tool's result went back to the model in a later request
    assert any("a.py" in str(s.body) for s in server.seen[1:]), statuses
