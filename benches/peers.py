"""Peer context strategies, implemented from their documentation as transforms of the
request an agent sends (an Anthropic Messages body, decoded), so the quality benchmark
replays them on exactly the requests it replays our presets on.

- ``clear_tool_uses``: Anthropic's server-side context editing
  (``clear_tool_uses_20250919``): once the request's input tokens pass ``trigger``
  (documented default 100,000), the oldest tool results are replaced by a placeholder,
  chronologically, keeping the ``keep`` most recent tool uses (default 3); the tool
  inputs stay (``clear_tool_inputs`` false).
- ``microcompact``: Claude Code's micro-compaction as it is described: every tool result
  but the ``keep`` most recent (5 here) shows a fixed "cleared" placeholder.
- ``trim_messages``: LangChain's ``trim_messages(strategy="last", include_system=True,
  start_on="human")`` at ``max_tokens``: the newest messages that fit, starting on a
  human message (a user message that is not only tool results).
- ``headroom``: ``headroom.compress(messages, model=...)`` of headroom-ai, run in its own
  interpreter (``HEADROOM_PYTHON``; the package is not a dependency of ctxrules), when
  it is installed there.

Each transform takes the body and returns a new one; the system prompt, tools and
parameters are left as they are.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxrules.tokenizers import get_tokenizer

__all__ = ["PEERS", "HeadroomRunner", "clear_tool_uses", "microcompact", "trim_messages"]

Body = dict[str, Any]

#: The placeholder Anthropic's tool-result clearing leaves (its documented wording).
CLEARED = "[Tool result cleared]"
#: The placeholder Claude Code's micro-compaction leaves.
MICRO_CLEARED = "[Old tool result content cleared]"


def _count(texts: list[str]) -> list[int]:
    return list(get_tokenizer("o200k_base").count_batch(texts))


def _tool_results(body: Body) -> list[tuple[int, int]]:
    """(message, block) positions of every tool_result block, oldest first."""
    out = []
    for m, message in enumerate(body.get("messages", ())):
        content = message.get("content")
        if isinstance(content, list):
            for b, block in enumerate(content):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out.append((m, b))
    return out


def _clear(body: Body, keep: int, placeholder: str) -> Body:
    out = copy.deepcopy(body)
    results = _tool_results(out)
    for m, b in results[: max(0, len(results) - keep)]:
        block = out["messages"][m]["content"][b]
        out["messages"][m]["content"][b] = {
            k: v for k, v in block.items() if k not in ("content", "cache_control")
        } | {"content": placeholder}
        if "cache_control" in block:
            out["messages"][m]["content"][b]["cache_control"] = block["cache_control"]
    return out


def body_tokens(body: Body) -> int:
    """Tokens of a body's system and messages (o200k, the JSON text): the size the
    peers' triggers and budgets compare with."""
    parts = [json.dumps(body.get("system", ""), ensure_ascii=False)]
    parts += [json.dumps(m, ensure_ascii=False) for m in body.get("messages", ())]
    return sum(_count(parts))


def clear_tool_uses(trigger: int = 100_000, keep: int = 3) -> Callable[[Body], Body]:
    """Anthropic's ``clear_tool_uses_20250919`` with ``trigger`` input tokens and ``keep``
    tool uses kept."""

    def apply(body: Body) -> Body:
        if body_tokens(body) < trigger:
            return body
        return _clear(body, keep, CLEARED)

    return apply


def microcompact(keep: int = 5) -> Callable[[Body], Body]:
    """Claude Code-like micro-compaction: all but the ``keep`` newest tool results
    cleared."""

    def apply(body: Body) -> Body:
        return _clear(body, keep, MICRO_CLEARED)

    return apply


def _human(message: dict[str, Any]) -> bool:
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return True
    return any(isinstance(b, dict) and b.get("type") != "tool_result" for b in content or ())


def trim_messages(max_tokens: int) -> Callable[[Body], Body]:
    """LangChain ``trim_messages(strategy="last", start_on="human", include_system=True,
    allow_partial=False)`` at ``max_tokens`` (the system prompt counts against it)."""

    def apply(body: Body) -> Body:
        messages = body.get("messages", [])
        budget = max_tokens - _count([json.dumps(body.get("system", ""), ensure_ascii=False)])[0]
        sizes = _count([json.dumps(m, ensure_ascii=False) for m in messages])
        start = len(messages)
        used = 0
        while start > 0 and used + sizes[start - 1] <= budget:
            start -= 1
            used += sizes[start]
        while start < len(messages) and not _human(messages[start]):
            start += 1
        if start >= len(messages):  # nothing fits: the last human message alone
            start = max((i for i, m in enumerate(messages) if _human(m)), default=len(messages) - 1)
        out = dict(body)
        out["messages"] = messages[start:]
        return out

    return apply


class HeadroomRunner:
    """``headroom.compress`` in headroom-ai's own interpreter, one process for a run
    (``benches/_headroom_worker.py`` reads a body a line and writes the compressed
    messages)."""

    def __init__(self, python: str) -> None:
        worker = Path(__file__).with_name("_headroom_worker.py")
        self.proc = subprocess.Popen(
            [python, str(worker)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "HEADROOM_TELEMETRY": "off"},
        )
        self.version = self._ask({"version": True})["version"]

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the headroom worker stopped")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"headroom: {answer['error']}")
        return answer

    def __call__(self, body: Body) -> Body:
        answer = self._ask({"messages": body.get("messages", []), "model": body.get("model", "")})
        out = dict(body)
        out["messages"] = answer["messages"]
        return out

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def headroom_python() -> str | None:
    """The interpreter headroom-ai is installed in (``HEADROOM_PYTHON``), if any."""
    python = os.environ.get("HEADROOM_PYTHON")
    return python if python and Path(python).exists() else None


#: The peers of the table with their documented or stated settings (trim_messages'
#: budget is set per session: a quarter of its largest request with no rules).
PEERS = {
    "Anthropic clear_tool_uses (keep 3, trigger 100K)": lambda final: clear_tool_uses(),
    "Claude Code microcompact-like (keep 5)": lambda final: microcompact(),
    "LangChain trim_messages last, at 25 %": lambda final: trim_messages(max(1, final // 4)),
}
