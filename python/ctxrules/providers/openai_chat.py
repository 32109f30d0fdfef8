"""OpenAI Chat Completions: ``POST /v1/chat/completions``.

The body is written in Rust (``wire = "openai-chat"``); this class adds usage parsing,
the prompt-too-long error and the structural validator.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .base import PromptTooLong, Provider, Usage
from .cache import (
    OPENAI_CACHE_MIN_TOKENS,
    OPENAI_CACHE_STEP_TOKENS,
    CachePrediction,
    predict_prefix,
)
from .estimate import PromptEstimate, estimate_openai_chat
from .models import ModelProfile

__all__ = [
    "OpenAIChatProvider",
    "openai_cache",
    "openai_prompt_too_long",
    "openai_usage",
    "validate_openai_chat",
]

_ROLES = {"system", "developer", "user", "assistant", "tool"}


def validate_openai_chat(body: Mapping[str, Any]) -> list[str]:
    """Problems of a Chat Completions body: each call answered right after it, no orphans."""
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("model missing")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages missing or empty"]
    pending: set[str] = set()
    seen: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        where = f"messages[{i}]"
        if role not in _ROLES:
            problems.append(f"{where}: role {role!r}")
            continue
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid not in pending:
                problems.append(f"{where}: orphan tool message {cid!r}")
            pending.discard(cid)
            if not isinstance(m.get("content"), (str, list)):
                problems.append(f"{where}: tool content missing")
            continue
        if pending:
            problems.append(f"{where}: tool calls {sorted(pending)} unanswered before it")
            pending = set()
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if not calls and not m.get("content"):
                problems.append(f"{where}: assistant with neither content nor tool_calls")
            for j, c in enumerate(calls):
                fn = c.get("function") or {}
                cid = c.get("id")
                if not cid or cid in seen:
                    problems.append(f"{where}.tool_calls[{j}]: id missing or repeated")
                seen.add(cid)
                pending.add(cid)
                if c.get("type") != "function" or not fn.get("name"):
                    problems.append(f"{where}.tool_calls[{j}]: not a named function call")
                args = fn.get("arguments")
                if not isinstance(args, str):
                    problems.append(f"{where}.tool_calls[{j}]: arguments is not a string")
                else:
                    try:
                        json.loads(args)
                    except ValueError:
                        problems.append(f"{where}.tool_calls[{j}]: arguments is not JSON")
        elif m.get("content") in (None, "", []):
            problems.append(f"{where}: {role} message without content")
    if pending:
        problems.append(f"tool calls {sorted(pending)} unanswered at the end")
    for j, t in enumerate(body.get("tools") or []):
        if t.get("type") != "function" or not (t.get("function") or {}).get("name"):
            problems.append(f"tools[{j}]: not a named function")
    return problems


def openai_usage(response: Mapping[str, Any], prompt: str, output: str) -> Usage | None:
    """OpenAI's usage (both APIs, which name the counts ``prompt`` and ``output``): the
    prompt count includes the cached tokens, reported in ``{prompt}_details``."""
    u = response.get("usage")
    if not isinstance(u, Mapping):
        return None
    details = u.get(f"{prompt}_details") or {}
    cached = Provider._int(details.get("cached_tokens"))
    return Usage(
        input_tokens=Provider._int(u.get(prompt)) - cached,
        cache_read_tokens=cached,
        output_tokens=Provider._int(u.get(output)),
    )


def openai_cache(
    previous: PromptEstimate | None,
    current: PromptEstimate,
    *,
    elapsed: float | None,
    profile: ModelProfile,
) -> CachePrediction:
    """OpenAI's automatic prefix caching (both APIs): from the model's minimum (1,024
    tokens where the model table states none) in 128-token steps."""
    return predict_prefix(
        previous,
        current,
        elapsed=elapsed,
        min_tokens=profile.cache_min_tokens or OPENAI_CACHE_MIN_TOKENS,
        step=OPENAI_CACHE_STEP_TOKENS,
        rule="openai-automatic-prefix",
    )


def openai_prompt_too_long(status: int, body: Any) -> PromptTooLong | None:
    """OpenAI's refusal (both APIs): code ``context_length_exceeded`` or its message."""
    err = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(err, Mapping):
        return None
    msg = str(err.get("message", ""))
    if status != 400:
        return None
    lowered = msg.lower()
    if err.get("code") != "context_length_exceeded" and not (
        "context length" in lowered or "context window" in lowered
    ):
        return None
    limit, tokens = Provider._numbers(
        r"maximum context length is (\d[\d,]*) tokens.*?(\d[\d,]*) tokens", msg
    )
    return PromptTooLong(f"openai: {msg}", tokens=tokens, limit=limit)


class OpenAIChatProvider(Provider):
    """OpenAI Chat Completions API."""

    name = "openai-chat"
    wire = "openai-chat"
    family = "openai"
    default_model = "gpt-4o"
    reserved = frozenset({"model", "messages", "tools", "max_completion_tokens"})

    def endpoint(self, model: str) -> str:
        return "/v1/chat/completions"

    def parse_usage(self, response: Mapping[str, Any]) -> Usage | None:
        return openai_usage(response, "prompt_tokens", "completion_tokens")

    def prompt_too_long(self, status: int, body: Any) -> PromptTooLong | None:
        return openai_prompt_too_long(status, body)

    def validate(self, body: Mapping[str, Any]) -> list[str]:
        return validate_openai_chat(body)

    def estimate_prompt(
        self, body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
    ) -> PromptEstimate:
        return estimate_openai_chat(body, profile, prefix_tokens=prefix_tokens)

    def predict_cache(
        self,
        previous: PromptEstimate | None,
        current: PromptEstimate,
        *,
        elapsed: float | None,
        profile: ModelProfile,
    ) -> CachePrediction:
        return openai_cache(previous, current, elapsed=elapsed, profile=profile)
