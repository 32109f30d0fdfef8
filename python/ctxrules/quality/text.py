"""The text of a rendered request: every system and message string the model is sent.

Walks the decoded body of any provider (Anthropic ``system`` / ``messages``, Chat
Completions ``messages``, Responses ``instructions`` / ``input``, Gemini
``systemInstruction`` / ``contents``, or a plugin's shape) and keeps every string value
except the tool declarations and the wire's bookkeeping (model, roles, types, call
ids, signatures).  A string that holds JSON (Chat Completions' tool ``arguments``) is
kept as sent and also read as the data it encodes, so an argument is found as the
model reads it, unescaped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec

from .facts import normalize

__all__ = ["SKIPPED_KEYS", "request_strings", "request_text"]

#: Keys whose values are not text the model reads as conversation: the tool
#: declarations, and the fields that only route or sign the request.
SKIPPED_KEYS = frozenset(
    {
        "tools",
        "tool_choice",
        "toolConfig",
        "tool_config",
        "model",
        "role",
        "type",
        "id",
        "tool_use_id",
        "tool_call_id",
        "call_id",
        "signature",
        "thoughtSignature",
        "thought_signature",
        "cache_control",
        "name",
        "media_type",
        "mime_type",
        "mimeType",
        "data",
        "encrypted_content",
    }
)


def _decoded(text: str) -> Any:
    if text[:1] in ("{", "[") and text[-1:] in ("}", "]"):
        try:
            return json.loads(text)
        except ValueError:
            return None
    return None


def request_strings(value: Any) -> Iterator[str]:
    """Every string of a decoded request body that the model reads (depth first)."""
    if isinstance(value, str):
        yield value  # as sent (a JSON tool result keeps its numbers)
        inner = _decoded(value)
        if inner is not None:
            yield from request_strings(inner)  # and as the data it encodes
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in SKIPPED_KEYS:
                yield from request_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from request_strings(item)


#: A body's top-level fields, and a conversation's entries, left undecoded.
_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ENTRIES = msgspec.json.Decoder(list[msgspec.Raw])


def _text(value: Any) -> str:
    return normalize(" ".join(request_strings(value)))


def request_text(body: bytes, memo: dict[bytes, str] | None = None) -> str:
    """The whitespace-normalised text of a request body (JSON bytes), strings joined by
    a space: what a fact must appear in to count as kept.

    ``memo`` is for a caller reading many requests of one session (``session_recall``):
    the text of each entry of a top-level list (the messages, contents or input items)
    is kept by the entry's bytes, so an entry the previous request sent as well is not
    decoded again — only the new ones are.  The text is the same with or without it
    (whitespace runs are one space, so the text of the parts joined is the parts'
    texts joined)."""
    if memo is None or body[:1] != b"{":
        return _text(msgspec.json.decode(body))
    parts: list[str] = []
    for key, raw in _FIELDS.decode(body).items():
        if key in SKIPPED_KEYS:
            continue
        data = bytes(raw)
        if data[:1] != b"[":
            parts.append(_text(msgspec.json.decode(data)))
            continue
        for entry in _ENTRIES.decode(data):
            got = bytes(entry)
            text = memo.get(got)
            if text is None:
                text = memo[got] = _text(msgspec.json.decode(got))
            parts.append(text)
    return " ".join(p for p in parts if p)
