"""A scripted Anthropic agent for the engine's counter tests: the engine's configuration
(one tool, no context sources) and the answers the model gives."""

from __future__ import annotations

from typing import Any

from ctxrules.context_sources import SourcesConfig
from ctxrules.engine import EngineConfig
from ctxrules.model import ToolSpec

CONFIG = EngineConfig(
    provider="anthropic",
    model="claude-sonnet-4-5",
    system="You are a coding agent.",
    tools=(ToolSpec(name="Read", description="read a file"),),
    sources=SourcesConfig(git_status=False, instruction_files=False, date=False),
)


def answer(i: int, prompt: int, *, call: bool = True) -> dict[str, Any]:
    """The model's answer ``m<i>`` billed ``prompt`` input tokens: a text, and with
    ``call`` a ``Read`` call ``r<i>``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": f"Step {i}."}]
    if call:
        content.append({"type": "tool_use", "id": f"r{i}", "name": "Read", "input": {"p": i}})
    return {
        "id": f"m{i}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "usage": {"input_tokens": prompt, "output_tokens": 9},
    }
