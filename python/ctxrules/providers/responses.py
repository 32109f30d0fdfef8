"""Reading a vendor's response: the assistant's content blocks, its usage, why it stopped.

``parse_response(wire, body)`` turns one response body of a built-in wire format into a
``ModelResponse``: the content as the model's own blocks (text, tool calls, thinking with
its signature), the usage in neutral terms and in the vendor's own shape (what an
answer node keeps, as the importers do), the model that answered and the stop reason.
The turn engine records it as the assistant node of the request it answered.

What the model blocks cannot hold is never turned into text the model would then read
back as its own words: a block of a kind the model does not know (a server tool's
result, an OpenAI reasoning item) is left out of ``content`` and kept, as received, in
``unknown``, so nothing is lost and the node's metadata can keep it.

A provider's own compaction is a block of the content, in the order the vendor sent it:
Anthropic's ``compaction`` block (its ``content`` may be null when the summary failed:
kept as it came, a no-op) and an OpenAI Responses ``compaction`` output item, whose
opaque ``encrypted_content`` is kept unchanged (``CompactionBlock(vendor="openai")``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..errors import ProviderError
from ..model import CompactionBlock, ContentBlock, TextBlock, ThinkingBlock, ToolUseBlock
from .usage import Usage

__all__ = [
    "ModelResponse",
    "gemini_part_blocks",
    "parse_response",
    "response_dict",
    "tool_arguments",
]


class ModelResponse(msgspec.Struct, frozen=True, kw_only=True):
    """One response, read: what the assistant said and what the request cost.

    ``content`` holds the blocks in the order the vendor sent them; ``raw_usage`` the
    usage exactly as the vendor reported it (``None``: it reported none) and ``usage``
    the same in neutral terms (filled by ``Provider.read_response``); ``unknown`` the
    parts no model block can hold, unchanged.
    """

    content: tuple[ContentBlock, ...]
    raw_usage: dict[str, Any] | None = None
    usage: Usage | None = None
    model: str = ""
    stop_reason: str = ""
    id: str = ""
    unknown: tuple[Any, ...] = ()


def tool_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as a dict, and the raw text when it was not a JSON object.

    Chat Completions and Responses send arguments as a JSON *string*, and models do emit
    broken JSON: the raw string is then kept under ``"arguments"`` so nothing is lost.
    """
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except (json.JSONDecodeError, RecursionError, ValueError):
            return {"arguments": raw}, raw
        if isinstance(parsed, dict):
            return parsed, None
        return {"arguments": parsed}, raw
    return {}, None


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ProviderError(
            f"a response {what} must be an object, got {type(value).__name__}",
            where="response",
            hint="pass the response body as the vendor sent it (a dict, or the SDK object)",
        )
    return value


_ANTHROPIC_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking", "compaction"}


def _anthropic(body: Mapping[str, Any]) -> ModelResponse:
    content = body.get("content")
    blocks: list[ContentBlock] = []
    unknown: list[Any] = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind not in _ANTHROPIC_BLOCKS:
            unknown.append(block)
            continue
        fields = {k: v for k, v in block.items() if k not in ("citations", "cache_control")}
        try:
            blocks.append(msgspec.convert(fields, ContentBlock))
        except msgspec.ValidationError as exc:
            raise ProviderError(
                f"anthropic response: a {kind} block cannot be read: {exc}", where="response"
            ) from None
    return ModelResponse(
        content=tuple(blocks),
        raw_usage=_dict(body.get("usage")),
        model=str(body.get("model") or ""),
        stop_reason=str(body.get("stop_reason") or ""),
        id=str(body.get("id") or ""),
        unknown=tuple(unknown),
    )


def _openai_chat(body: Mapping[str, Any]) -> ModelResponse:
    choices = body.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    message = _mapping(first, "choice").get("message") or {}
    message = _mapping(message, "message")
    blocks: list[ContentBlock] = []
    text = message.get("content")
    if isinstance(text, str) and text:
        blocks.append(TextBlock(text=text))
    elif isinstance(text, list):  # content parts
        blocks.extend(TextBlock(text=str(p.get("text", ""))) for p in text if isinstance(p, dict))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            continue
        args, _ = tool_arguments(fn.get("arguments"))
        blocks.append(
            ToolUseBlock(id=str(call.get("id", "")), name=str(fn.get("name", "")), input=args)
        )
    return ModelResponse(
        content=tuple(blocks),
        raw_usage=_dict(body.get("usage")),
        model=str(body.get("model") or ""),
        stop_reason=str(_mapping(first, "choice").get("finish_reason") or ""),
        id=str(body.get("id") or ""),
    )


def _openai_responses(body: Mapping[str, Any]) -> ModelResponse:
    blocks: list[ContentBlock] = []
    unknown: list[Any] = []
    for item in body.get("output") or []:
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == "message":
            for part in item.get("content") or []:
                if isinstance(part, Mapping) and part.get("type") == "output_text":
                    blocks.append(TextBlock(text=str(part.get("text", ""))))
                else:
                    unknown.append(part)
        elif kind == "function_call":
            args, _ = tool_arguments(item.get("arguments"))
            blocks.append(
                ToolUseBlock(
                    id=str(item.get("call_id") or item.get("id") or ""),
                    name=str(item.get("name", "")),
                    input=args,
                )
            )
        elif kind == "compaction" and isinstance(item.get("encrypted_content"), str):
            blocks.append(
                CompactionBlock(
                    encrypted_content=item["encrypted_content"],
                    id=str(item.get("id") or ""),
                    vendor="openai",
                )
            )
        else:  # reasoning items and the like: kept, not shown as the model's words
            unknown.append(item)
    status = body.get("status")
    incomplete = body.get("incomplete_details")
    reason = incomplete.get("reason") if isinstance(incomplete, Mapping) else None
    return ModelResponse(
        content=tuple(blocks),
        raw_usage=_dict(body.get("usage")),
        model=str(body.get("model") or ""),
        stop_reason=str(reason or status or ""),
        id=str(body.get("id") or ""),
        unknown=tuple(unknown),
    )


def gemini_part_blocks(parts: Sequence[Any], call_id: Any) -> list[ContentBlock]:
    """The model blocks of a Gemini model turn's ``parts``.

    A part's ``thoughtSignature`` becomes ``ThinkingBlock(thinking="", signature=…,
    vendor="gemini")`` right before the part's own block (so it is sent back on the same
    part); a ``thought`` part is thinking, not text; a ``functionCall`` without an id gets
    ``call_id(j, name)`` (``j``: the part's index).
    """
    blocks: list[ContentBlock] = []
    for j, part in enumerate(parts):
        if not isinstance(part, Mapping):
            continue
        sig = part.get("thoughtSignature")
        if isinstance(sig, str) and sig:
            blocks.append(ThinkingBlock(thinking="", signature=sig, vendor="gemini"))
        if "functionCall" in part:
            fc = part.get("functionCall") or {}
            name = str(fc.get("name", ""))
            raw_args = fc.get("args")
            args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
            blocks.append(
                ToolUseBlock(id=str(fc.get("id") or call_id(j, name)), name=name, input=args)
            )
        elif part.get("thought") is True:
            blocks.append(ThinkingBlock(thinking=str(part.get("text", "")), vendor="gemini"))
        elif "text" in part:
            blocks.append(TextBlock(text=str(part.get("text", ""))))
    return blocks


def _gemini(body: Mapping[str, Any]) -> ModelResponse:
    candidates = body.get("candidates")
    first = (
        _mapping(candidates[0], "candidate") if isinstance(candidates, list) and candidates else {}
    )
    content = first.get("content") if isinstance(first, Mapping) else None
    parts = content.get("parts") if isinstance(content, Mapping) else None
    rid = str(body.get("responseId") or "")
    blocks = gemini_part_blocks(
        parts if isinstance(parts, list) else [], lambda j, name: f"{name}_{rid or 'call'}_{j}"
    )
    return ModelResponse(
        content=tuple(blocks),
        raw_usage=_dict(body.get("usageMetadata")),
        model=str(body.get("modelVersion") or ""),
        stop_reason=str(first.get("finishReason") or ""),
        id=rid,
    )


def _dict(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


_PARSERS = {
    "anthropic": _anthropic,
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
    "gemini": _gemini,
}


def response_dict(body: Any) -> Mapping[str, Any]:
    """A response body as a mapping: a dict as it is, JSON text or bytes decoded, an SDK
    object through its ``model_dump()`` / ``to_dict()``."""
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise ProviderError(f"the response is not JSON: {exc}", where="response") from None
    elif not isinstance(body, Mapping):
        for method in ("model_dump", "to_dict", "to_json_dict"):
            dump = getattr(body, method, None)
            if callable(dump):
                body = dump()
                break
    return _mapping(body, "body")


def parse_response(wire: str, body: Mapping[str, Any]) -> ModelResponse:
    """Read one response ``body`` (see ``response_dict``) of the built-in wire format
    ``wire``; ``usage`` is left for the provider to fill."""
    if wire not in _PARSERS:
        raise ProviderError(
            f"no response reader for wire format {wire!r}",
            hint="a plugin provider overrides Provider.read_response",
        )
    return _PARSERS[wire](body)
