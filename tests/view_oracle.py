"""Counts read from a Claude Code transcript with plain JSON: the oracle the viewer's
tests compare the page and its answers with (nothing here goes through ctxrules)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["SUBAGENTS", "main_chain", "tool_uses", "transcript"]

#: A Claude Code session with two Task sub-agents (sidechains) and failed tool calls.
SUBAGENTS = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def transcript(path: Path) -> list[dict]:
    """The transcript's lines."""
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _tool_uses_of(entry: dict) -> int:
    content = (entry.get("message") or {}).get("content")
    if entry.get("type") != "assistant" or not isinstance(content, list):
        return 0
    return sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_use")


def tool_uses(lines: list[dict]) -> int:
    """How many tool calls the assistant messages made, sub-agents' included."""
    return sum(_tool_uses_of(e) for e in lines)


def main_chain(lines: list[dict]) -> tuple[int, int]:
    """``(turns, tool calls)`` of the main conversation, sub-agents left out: a turn is
    an assistant message (its lines share a message id) or a user line that is not only
    tool results."""
    answers: set[str] = set()
    users = calls = 0
    for e in lines:
        if e.get("isSidechain"):
            continue
        if e.get("type") == "assistant":
            answers.add(e["message"]["id"])
            calls += _tool_uses_of(e)
        elif e.get("type") == "user":
            content = e["message"].get("content")
            if isinstance(content, str) or any(b.get("type") != "tool_result" for b in content):
                users += 1
    return len(answers) + users, calls
