"""Reading a vendor's response: the assistant's content blocks, its usage, why it stopped.

``parse_response(wire, body)`` turns one response body of a built-in wire format into a
``ModelResponse``: the content as the model's own blocks (text, tool calls, thinking with
its signature), the usage in neutral terms and in the vendor's own shape (what an
answer node keeps, as the importers do), the model that answered and the stop reason.
The turn engine records it as the assistant node of the request it answered.

Only an answer of that wire is read: another vendor's body, one event of a stream, a
body whose role is not the assistant's, content of the wrong type or usage that is not
a finite, non-negative count below ``MAX_USAGE_TOKENS`` is a ``ResponseError`` naming
the field (``StreamError`` for a stream event), so nothing that is not an answer is
ever recorded as one.  A vendor's error body is recognised first (``error_envelope``)
and becomes the vendor's error (``Provider.read_response``).

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
import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..errors import ProviderError, ResponseError, StreamError, ValidationError
from ..limits import MAX_USAGE_TOKENS
from ..model import CompactionBlock, ContentBlock, TextBlock, ThinkingBlock, ToolUseBlock
from .usage import Usage

__all__ = [
    "WIRE_TITLES",
    "ModelResponse",
    "error_envelope",
    "gemini_part_blocks",
    "parse_response",
    "response_dict",
    "tool_arguments",
    "wire_of",
]

#: How each built-in wire's answer is called in errors.
WIRE_TITLES = {
    "anthropic": "an Anthropic Messages response",
    "openai-chat": "an OpenAI Chat Completions response",
    "openai-responses": "an OpenAI Responses response",
    "gemini": "a Gemini generateContent response",
}

#: The event types of an Anthropic Messages stream (and the SDK's helper events).
ANTHROPIC_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "ping",
        "text",
        "input_json",
        "thinking",
        "signature",
        "citation",
    }
)


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


class _Check:
    """The checks of one response of one wire: each failure a ``ResponseError`` that
    names the wire and the field."""

    def __init__(self, wire: str):
        self.wire = wire

    def fail(self, message: str, field: str = "", *, stream: bool = False) -> ResponseError:
        kind = StreamError if stream else ResponseError
        return kind(
            message,
            field=field,
            where=f"{WIRE_TITLES[self.wire]}{f' ({field})' if field else ''}",
            hint="pass the response as the vendor returned it to this provider's request "
            "(a dict, its JSON, the SDK's object, or the list of a stream's events)",
        )

    def mapping(self, value: Any, field: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(f"must be an object, got {_kind(value)}", field)
        return value

    def items(self, value: Any, field: str, *, empty: bool = True) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(f"must be a list, got {_kind(value)}", field)
        if not empty and not value:
            raise self.fail("is empty", field)
        return value

    def text(self, body: Mapping[str, Any], key: str, field: str = "") -> str:
        """An optional string field (absent or null: ``""``)."""
        value = body.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.fail(f"must be a string, got {_kind(value)}", field or key)
        return value

    def role(self, body: Mapping[str, Any], want: str, field: str, *, required: bool) -> None:
        role = body.get("role")
        if role is None and not required:
            return
        if role != want:
            raise self.fail(
                f"the role is {role!r}, not {want!r}: only the model's answer is recorded",
                field,
            )

    def usage(self, value: Any, field: str, counts: tuple[str, ...]) -> dict[str, Any] | None:
        """The usage mapping as reported, checked: every number in it (nested ones
        too) finite, non-negative and at most ``MAX_USAGE_TOKENS``; the named token
        ``counts`` (dotted paths) whole numbers."""
        if value is None:
            return None
        usage = self.mapping(value, field)
        stack: list[tuple[str, Any]] = [(field, usage)]
        while stack:
            path, v = stack.pop()
            if isinstance(v, Mapping):
                stack.extend((f"{path}.{k}", x) for k, x in v.items())
            elif isinstance(v, list):
                stack.extend((f"{path}[{i}]", x) for i, x in enumerate(v))
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                if not math.isfinite(v):
                    raise self.fail(f"is {v!r}: a token count must be a finite number", path)
                if v < 0:
                    raise self.fail(f"is {v!r}: a token count cannot be negative", path)
                if v > MAX_USAGE_TOKENS:
                    raise self.fail(
                        f"is {v:.4g}: more than {MAX_USAGE_TOKENS:,} tokens in one request "
                        "is not a real count",
                        path,
                    )
        for count in counts:
            n: Any = usage
            for key in count.split("."):
                n = n.get(key) if isinstance(n, Mapping) else None
            if n is None:
                continue
            if isinstance(n, bool) or not isinstance(n, (int, float)) or n != int(n):
                raise self.fail(f"must be a whole number of tokens, got {n!r}", f"{field}.{count}")
        return dict(usage)

    def no_more_than(self, usage: Mapping[str, Any] | None, part: str, whole: str) -> None:
        """``usage[part]`` (a dotted path) is at most ``usage[whole]``: cached tokens are
        part of the prompt."""
        if usage is None:
            return
        a: Any = usage
        for key in part.split("."):
            a = a.get(key) if isinstance(a, Mapping) else None
        b = usage.get(whole)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > b:
            raise self.fail(f"is {a}, more than the {whole} ({b}) it is part of", f"usage.{part}")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


_ANTHROPIC_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking", "compaction"}
_ANTHROPIC_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _anthropic(body: Mapping[str, Any]) -> ModelResponse:
    c = _Check("anthropic")
    kind = body.get("type")
    if kind in ANTHROPIC_EVENTS:
        raise c.fail(
            f"this is one {kind!r} event of a stream, not the answer: pass the list of "
            "the stream's events, or stream.get_final_message()",
            "type",
            stream=True,
        )
    if kind is not None and kind != "message":
        raise c.fail(f"the type is {kind!r}, not 'message'", "type")
    c.role(body, "assistant", "role", required=True)
    content = c.items(body.get("content"), "content")
    stop_reason = c.text(body, "stop_reason")
    if not content and not stop_reason:
        raise c.fail("is empty and no stop_reason says the model finished", "content")
    blocks: list[ContentBlock] = []
    unknown: list[Any] = []
    for i, block in enumerate(content):
        block = c.mapping(block, f"content[{i}]")
        kind = block.get("type")
        if not isinstance(kind, str):
            raise c.fail(f"a block's type must be a string, got {_kind(kind)}", f"content[{i}]")
        if kind not in _ANTHROPIC_BLOCKS:
            unknown.append(block)
            continue
        fields = {k: v for k, v in block.items() if k not in ("citations", "cache_control")}
        try:
            blocks.append(msgspec.convert(fields, ContentBlock))
        except (msgspec.ValidationError, ValidationError) as exc:
            raise c.fail(f"a {kind} block cannot be read: {exc}", f"content[{i}]") from None
    return ModelResponse(
        content=tuple(blocks),
        raw_usage=c.usage(body.get("usage"), "usage", _ANTHROPIC_COUNTS),
        model=c.text(body, "model"),
        stop_reason=stop_reason,
        id=c.text(body, "id"),
        unknown=tuple(unknown),
    )


_CHAT_COUNTS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "prompt_tokens_details.cached_tokens",
    "completion_tokens_details.reasoning_tokens",
)


def _openai_chat(body: Mapping[str, Any]) -> ModelResponse:
    c = _Check("openai-chat")
    kind = body.get("object")
    if kind == "chat.completion.chunk":
        raise c.fail(
            "this is one chunk of a stream, not the answer: pass the list of the "
            "stream's chunks, or stream.get_final_completion()",
            "object",
            stream=True,
        )
    if kind is not None and kind != "chat.completion":
        raise c.fail(f"the object is {kind!r}, not 'chat.completion'", "object")
    choices = c.items(body.get("choices"), "choices", empty=False)
    first = c.mapping(choices[0], "choices[0]")
    message = c.mapping(first.get("message"), "choices[0].message")
    c.role(message, "assistant", "choices[0].message.role", required=True)
    finish = c.text(first, "finish_reason", "choices[0].finish_reason")
    blocks: list[ContentBlock] = []
    text = message.get("content")
    if isinstance(text, str):
        if text:
            blocks.append(TextBlock(text=text))
    elif isinstance(text, list):  # content parts
        for j, p in enumerate(text):
            part = c.mapping(p, f"choices[0].message.content[{j}]")
            value = part.get("text", part.get("refusal", ""))
            if not isinstance(value, str):
                raise c.fail(
                    f"a part's text must be a string, got {_kind(value)}",
                    f"choices[0].message.content[{j}]",
                )
            blocks.append(TextBlock(text=value))
    elif text is not None:
        raise c.fail(
            f"must be a string, a list of parts or null, got {_kind(text)}",
            "choices[0].message.content",
        )
    refusal = c.text(message, "refusal", "choices[0].message.refusal")
    if refusal and not blocks:
        blocks.append(TextBlock(text=refusal))  # what the model said, in its words
    calls = message.get("tool_calls")
    for j, call in enumerate(c.items(calls, "choices[0].message.tool_calls") if calls else []):
        where = f"choices[0].message.tool_calls[{j}]"
        call = c.mapping(call, where)
        fn = c.mapping(call.get("function"), f"{where}.function")
        name = c.text(fn, "name", f"{where}.function.name")
        raw = fn.get("arguments")
        if raw is not None and not isinstance(raw, (str, dict)):
            raise c.fail(f"must be a JSON string, got {_kind(raw)}", f"{where}.function.arguments")
        args, _ = tool_arguments(raw)
        blocks.append(ToolUseBlock(id=c.text(call, "id", f"{where}.id"), name=name, input=args))
    if not blocks and not finish:
        raise c.fail(
            "holds no content, no tool call and no finish_reason: not a finished answer",
            "choices[0].message",
        )
    usage = c.usage(body.get("usage"), "usage", _CHAT_COUNTS)
    c.no_more_than(usage, "prompt_tokens_details.cached_tokens", "prompt_tokens")
    return ModelResponse(
        content=tuple(blocks),
        raw_usage=usage,
        model=c.text(body, "model"),
        stop_reason=finish,
        id=c.text(body, "id"),
    )


_RESPONSES_COUNTS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "input_tokens_details.cached_tokens",
    "output_tokens_details.reasoning_tokens",
)


def _openai_responses(body: Mapping[str, Any]) -> ModelResponse:
    c = _Check("openai-responses")
    kind = body.get("type")
    if isinstance(kind, str) and (kind.startswith("response.") or kind == "error"):
        raise c.fail(
            f"this is one {kind!r} event of a stream, not the answer: pass the list of "
            "the stream's events, or stream.get_final_response()",
            "type",
            stream=True,
        )
    obj = body.get("object")
    if obj is not None and obj != "response":
        raise c.fail(f"the object is {obj!r}, not 'response'", "object")
    status = c.text(body, "status")
    if status in ("in_progress", "queued"):
        raise c.fail(
            f"the response is {status}, not finished: record it once it has completed",
            "status",
            stream=True,
        )
    output = c.items(body.get("output"), "output")
    if not output and status not in ("completed", "incomplete"):
        raise c.fail("is empty and the status does not say the response finished", "output")
    blocks: list[ContentBlock] = []
    unknown: list[Any] = []
    for i, raw_item in enumerate(output):
        where = f"output[{i}]"
        item = c.mapping(raw_item, where)
        kind = item.get("type")
        if not isinstance(kind, str):
            raise c.fail(f"an item's type must be a string, got {_kind(kind)}", where)
        if kind == "message":
            c.role(item, "assistant", f"{where}.role", required=False)
            for j, raw_part in enumerate(c.items(item.get("content") or [], f"{where}.content")):
                part = c.mapping(raw_part, f"{where}.content[{j}]")
                if part.get("type") == "output_text":
                    text = part.get("text", "")
                    if not isinstance(text, str):
                        raise c.fail(
                            f"must be a string, got {_kind(text)}", f"{where}.content[{j}].text"
                        )
                    blocks.append(TextBlock(text=text))
                else:
                    unknown.append(part)
        elif kind == "function_call":
            raw = item.get("arguments")
            if raw is not None and not isinstance(raw, (str, dict)):
                raise c.fail(f"must be a JSON string, got {_kind(raw)}", f"{where}.arguments")
            args, _ = tool_arguments(raw)
            call_id = c.text(item, "call_id", f"{where}.call_id") or c.text(item, "id", where)
            blocks.append(
                ToolUseBlock(id=call_id, name=c.text(item, "name", f"{where}.name"), input=args)
            )
        elif kind == "compaction" and isinstance(item.get("encrypted_content"), str):
            blocks.append(
                CompactionBlock(
                    encrypted_content=item["encrypted_content"],
                    id=c.text(item, "id", f"{where}.id"),
                    vendor="openai",
                )
            )
        else:  # reasoning items and the like: kept, not shown as the model's words
            unknown.append(item)
    incomplete = body.get("incomplete_details")
    reason = incomplete.get("reason") if isinstance(incomplete, Mapping) else None
    usage = c.usage(body.get("usage"), "usage", _RESPONSES_COUNTS)
    c.no_more_than(usage, "input_tokens_details.cached_tokens", "input_tokens")
    return ModelResponse(
        content=tuple(blocks),
        raw_usage=usage,
        model=c.text(body, "model"),
        stop_reason=str(reason or status or ""),
        id=c.text(body, "id"),
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


def _says(block: ContentBlock) -> bool:
    """Whether ``block`` holds something of an answer (a signature alone does not)."""
    if isinstance(block, TextBlock):
        return bool(block.text)
    if isinstance(block, ThinkingBlock):
        return bool(block.thinking)
    return True


_GEMINI_COUNTS = (
    "promptTokenCount",
    "candidatesTokenCount",
    "totalTokenCount",
    "cachedContentTokenCount",
    "thoughtsTokenCount",
    "toolUsePromptTokenCount",
)


def _gemini(body: Mapping[str, Any]) -> ModelResponse:
    c = _Check("gemini")
    candidates = c.items(body.get("candidates"), "candidates", empty=False)
    first = c.mapping(candidates[0], "candidates[0]")
    finish = c.text(first, "finishReason", "candidates[0].finishReason")
    if not finish:
        raise c.fail(
            "has no finishReason: one chunk of a stream, or an answer cut short (pass the "
            "list of the stream's chunks)",
            "candidates[0].finishReason",
            stream=True,
        )
    content = first.get("content")
    parts: list[Any] = []
    if content is not None:
        content = c.mapping(content, "candidates[0].content")
        c.role(content, "model", "candidates[0].content.role", required=False)
        parts = c.items(content.get("parts") or [], "candidates[0].content.parts")
        for j, part in enumerate(parts):
            part = c.mapping(part, f"candidates[0].content.parts[{j}]")
            text = part.get("text")
            if text is not None and not isinstance(text, str):
                raise c.fail(
                    f"must be a string, got {_kind(text)}", f"candidates[0].content.parts[{j}].text"
                )
    rid = c.text(body, "responseId")
    blocks = gemini_part_blocks(parts, lambda j, name: f"{name}_{rid or 'call'}_{j}")
    usage = c.usage(body.get("usageMetadata"), "usageMetadata", _GEMINI_COUNTS)
    c.no_more_than(usage, "cachedContentTokenCount", "promptTokenCount")
    stopped = parts or finish in ("STOP", "1")  # not a whole answer cut off (safety …)
    said = (usage or {}).get("candidatesTokenCount")
    if said and stopped and not any(_says(b) for b in blocks):
        # A stream's last chunk carries the finish reason and the whole answer's usage,
        # often with an empty text part only: the answer is in the chunks before it.
        raise c.fail(
            f"holds nothing of an answer that usage counts {said} output tokens for: "
            "the last chunk of a stream (pass the list of the stream's chunks)",
            "candidates[0].content",
            stream=True,
        )
    return ModelResponse(
        content=tuple(blocks),
        raw_usage=usage,
        model=c.text(body, "modelVersion"),
        stop_reason=finish,
        id=rid,
    )


_PARSERS = {
    "anthropic": _anthropic,
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
    "gemini": _gemini,
}


def wire_of(body: Mapping[str, Any]) -> str | None:
    """The built-in wire whose answer ``body`` looks like (``None``: none of them);
    what an error says when a body is handed to the wrong provider."""
    kind, obj = body.get("type"), body.get("object")
    if kind == "message" or kind in ANTHROPIC_EVENTS:
        return "anthropic"
    if "choices" in body or (isinstance(obj, str) and obj.startswith("chat.completion")):
        return "openai-chat"
    if obj == "response" or (isinstance(kind, str) and kind.startswith("response.")):
        return "openai-responses"
    if "candidates" in body or "usageMetadata" in body or "promptFeedback" in body:
        return "gemini"
    if "output" in body and "status" in body:
        return "openai-responses"
    return None


def error_envelope(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """A vendor's error in the envelope every built-in recogniser reads,
    ``{"error": {"message", "type", "code", …}}``, when ``body`` is one: Anthropic's
    ``{"type": "error", "error": …}``, OpenAI's and Gemini's ``{"error": …}``, a failed
    Responses ``{"status": "failed", "error": …}``, and a Gemini prompt blocked before
    any candidate (``promptFeedback.blockReason``).  ``None`` for anything else."""
    err = body.get("error")
    if body.get("type") == "error" or ("error" in body and set(body) <= _ERROR_KEYS):
        inner = err if isinstance(err, Mapping) else {"message": str(err)}
        return {"error": dict(inner)}
    if body.get("status") == "failed" and isinstance(err, Mapping):
        return {"error": dict(err)}
    feedback = body.get("promptFeedback")
    if not body.get("candidates") and isinstance(feedback, Mapping) and feedback.get("blockReason"):
        reason = str(feedback["blockReason"])
        return {
            "error": {
                "message": f"the prompt was blocked ({reason}) before any answer",
                "status": reason,
                "code": reason,
            }
        }
    return None


#: The keys an error body has besides ``error`` (Anthropic adds a request id).
_ERROR_KEYS = frozenset({"error", "type", "request_id", "code", "message", "status"})


def response_dict(body: Any) -> Mapping[str, Any]:
    """A response body as a mapping: a dict as it is, JSON text or bytes decoded, an SDK
    object dumped with the field names of the vendor's JSON (``model_dump(by_alias=True)``:
    google-genai's objects use snake_case attributes but camelCase JSON)."""
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            raise ProviderError(f"the response is not JSON: {exc}", where="response") from None
    elif not isinstance(body, Mapping):
        dump = getattr(body, "model_dump", None)
        if callable(dump):
            try:
                body = dump(mode="json", by_alias=True, exclude_none=True, warnings=False)
            except TypeError:  # a model_dump of another signature
                body = dump()
        else:
            for method in ("to_dict", "to_json_dict"):
                other = getattr(body, method, None)
                if callable(other):
                    body = other()
                    break
    return _mapping(body, "body")


def parse_response(wire: str, body: Mapping[str, Any]) -> ModelResponse:
    """Read one answer ``body`` (see ``response_dict``) of the built-in wire format
    ``wire``; ``usage`` is left for the provider to fill.  ``ResponseError`` (or
    ``StreamError``) naming the field when ``body`` is not such an answer."""
    if wire not in _PARSERS:
        raise ProviderError(
            f"no response reader for wire format {wire!r}",
            hint="a plugin provider overrides Provider.read_response",
        )
    other = wire_of(body)
    if other is not None and other != wire:
        raise _Check(wire).fail(
            f"this is {WIRE_TITLES[other]}, not {WIRE_TITLES[wire]}: the engine's provider "
            f"is {wire}",
            stream=body.get("object") == "chat.completion.chunk"
            or str(body.get("type", "")).startswith("response."),
        )
    return _PARSERS[wire](body)
