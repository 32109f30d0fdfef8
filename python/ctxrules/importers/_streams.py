"""Response bodies as they travel: compressed, streamed, or plain JSON.

A recorded or proxied response is bytes: maybe ``gzip`` / ``deflate`` encoded, maybe a
stream — server-sent events for Anthropic, Chat Completions, Responses and Gemini
(``alt=sse``), or Gemini's JSON array of chunks.  ``read_response`` turns it into the
one JSON body the vendor would have answered without streaming, built from the
events the way the vendors' SDKs accumulate them:

* Anthropic: ``message_start`` gives the message, ``content_block_*`` build its
  blocks (text, tool input JSON, thinking and its signature, citations), and
  ``message_delta`` *assigns* the stop reason and the usage fields it carries (its
  counts are cumulative, never added);
* Chat Completions: the chunks' deltas concatenated per choice (content, reasoning,
  refusal, tool calls by ``index``); ``usage`` from the ``include_usage`` chunk;
* Responses: the ``response`` of ``response.completed`` / ``incomplete`` / ``failed``
  (it holds the whole output), else the items of ``response.output_item.done``;
* Gemini: the candidates' parts concatenated (adjacent text parts joined), the
  last chunk's ``usageMetadata`` and ``finishReason``.

An ``error`` event (Anthropic, Responses, or an ``error`` object in a chunk) lands in the
body's ``error``.  Nothing here raises on bad input: what cannot be read is ``None``,
and a stream cut short says so (``ResponseRead.complete``).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from typing import Any

import msgspec

__all__ = ["ResponseRead", "decode_body", "read_response", "sse_events"]

#: The terminal events of a Responses stream; each carries the whole response.
_RESPONSES_DONE = ("response.completed", "response.incomplete", "response.failed")


class ResponseRead(msgspec.Struct, frozen=True, kw_only=True):
    """A response body as JSON (``body``: ``None`` when it could not be read).

    ``streamed``: it came as a stream; ``complete``: the stream reached its end (a
    terminal event; always true for a plain body that parsed); ``error``: the error
    object the vendor sent (a 4xx/5xx body's, or an ``error`` event after a 200).
    """

    body: Any = None
    streamed: bool = False
    complete: bool = False
    error: Any = None


def decode_body(raw: bytes, encoding: str = "") -> bytes | None:
    """The bytes of a body under its ``Content-Encoding`` (``gzip``, ``deflate``,
    identity); ``None`` for an encoding that cannot be undone here, or corrupt data."""
    enc = encoding.strip().lower()
    try:
        if enc in ("", "identity"):
            return raw
        if enc in ("gzip", "x-gzip"):
            return gzip.decompress(raw)
        if enc == "deflate":  # zlib-wrapped as the RFC says, raw deflate as servers do
            try:
                return zlib.decompress(raw)
            except zlib.error:
                return zlib.decompress(raw, -zlib.MAX_WBITS)
    except (OSError, EOFError, zlib.error):
        return None
    return None


def sse_events(text: str) -> Iterator[tuple[str, str]]:
    """``(event name, data)`` of each server-sent event (data lines joined by ``\\n``)."""
    event, data = "", list[str]()
    for line in text.splitlines():
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "", []
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
        elif line.startswith("event:"):
            event = line[6:].strip()
    if data:
        yield event, "\n".join(data)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def read_response(
    provider: str, raw: bytes, *, content_type: str = "", encoding: str = ""
) -> ResponseRead:
    """The JSON body of a response of ``provider``'s wire (``anthropic``,
    ``openai-chat``, ``openai-responses``, ``gemini``), streamed or not (see the
    module docstring)."""
    data = decode_body(raw, encoding)
    if data is None:
        return ResponseRead()
    text = data.decode("utf-8", "replace")
    stripped = text.lstrip()
    if "text/event-stream" in content_type.lower() or stripped.startswith(("event:", "data:")):
        events = [(e, d) for e, d in sse_events(text)]
        return _assemble(provider, events)
    body = _json(text)
    if provider == "gemini" and isinstance(body, list):  # a JSON-array stream
        chunks = [c for c in body if isinstance(c, dict)]
        merged, complete = _gemini(chunks)
        return ResponseRead(body=merged, streamed=True, complete=complete, error=_error(merged))
    if body is None:
        return ResponseRead()
    return ResponseRead(body=body, complete=True, error=_error(body))


def _error(body: Any) -> Any:
    return body.get("error") if isinstance(body, dict) else None


def _assemble(provider: str, events: list[tuple[str, str]]) -> ResponseRead:
    if provider == "anthropic":
        body, complete = _anthropic(events)
    elif provider == "openai-chat":
        body, complete = _chat(events)
    elif provider == "openai-responses":
        body, complete = _responses(events)
    else:
        chunks = [c for _, d in events if isinstance(c := _json(d), dict)]
        body, complete = _gemini(chunks)
    return ResponseRead(body=body, streamed=True, complete=complete, error=_error(body))


def _anthropic(events: list[tuple[str, str]]) -> tuple[Any, bool]:
    msg: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    done = False
    error = None
    for name, data in events:
        ev = _json(data)
        if not isinstance(ev, dict):
            continue
        kind = ev.get("type", name)
        if kind == "message_start" and isinstance(ev.get("message"), dict):
            msg = dict(ev["message"])
            msg["usage"] = dict(msg.get("usage") or {})
        elif kind == "content_block_start" and isinstance(ev.get("content_block"), dict):
            blocks[int(ev.get("index", len(blocks)))] = dict(ev["content_block"])
        elif kind == "content_block_delta" and isinstance(ev.get("delta"), dict):
            index = int(ev.get("index", 0))
            block = blocks.setdefault(index, {})
            delta = ev["delta"]
            if delta.get("type") == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json", "")))
            elif delta.get("type") == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
            elif delta.get("type") == "signature_delta":
                block["signature"] = delta.get("signature", "")
            else:  # text_delta, thinking_delta and any later string delta
                for key, value in delta.items():
                    if key != "type" and isinstance(value, str):
                        block[key] = str(block.get(key, "")) + value
        elif kind == "message_delta" and msg is not None:
            delta = ev.get("delta")
            if isinstance(delta, dict):
                msg.update(delta)
            if isinstance(ev.get("usage"), dict):
                msg["usage"].update(ev["usage"])  # cumulative counts: assigned
        elif kind == "message_stop":
            done = True
        elif kind == "error":
            error = ev.get("error", ev)
    for index, parts in partial.items():
        text = "".join(parts)
        value = _json(text) if text.strip() else {}
        blocks.setdefault(index, {})["input"] = value if isinstance(value, dict) else {}
    if msg is None:
        return ({"type": "error", "error": error} if error is not None else None), False
    msg["content"] = [blocks[i] for i in sorted(blocks)]
    if error is not None:
        msg["error"] = error
    return msg, done and error is None


def _chat(events: list[tuple[str, str]]) -> tuple[Any, bool]:
    out: dict[str, Any] = {}
    choices: dict[int, dict[str, Any]] = {}
    calls: dict[int, dict[int, dict[str, Any]]] = {}
    done = False
    for _, data in events:
        if data.strip() == "[DONE]":
            done = True
            continue
        chunk = _json(data)
        if not isinstance(chunk, dict):
            continue
        if "error" in chunk:
            out["error"] = chunk["error"]
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if key in chunk and key not in out:
                out[key] = chunk[key]
        if chunk.get("usage"):
            out["usage"] = chunk["usage"]
        for ch in chunk.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            index = int(ch.get("index", 0))
            choice = choices.setdefault(
                index,
                {"index": index, "message": {"role": "assistant", "content": None}},
            )
            message = choice["message"]
            delta = ch.get("delta")
            for key, value in (delta if isinstance(delta, dict) else {}).items():
                if key == "tool_calls" and isinstance(value, list):
                    slots = calls.setdefault(index, {})
                    for tc in value:
                        _chat_call(slots, tc)
                elif key == "role" and isinstance(value, str):
                    message["role"] = value
                elif isinstance(value, str):
                    message[key] = (message.get(key) or "") + value
                elif value is not None:
                    message[key] = value
            if ch.get("finish_reason") is not None:
                choice["finish_reason"] = ch["finish_reason"]
    for index, slots in calls.items():
        choices[index]["message"]["tool_calls"] = [slots[i] for i in sorted(slots)]
    if not choices and not out:
        return None, False
    out["object"] = "chat.completion"
    out["choices"] = [choices[i] for i in sorted(choices)]
    finished = all("finish_reason" in c for c in out["choices"]) and bool(out["choices"])
    return out, (done or finished) and "error" not in out


def _chat_call(slots: dict[int, dict[str, Any]], tc: Any) -> None:
    if not isinstance(tc, dict):
        return
    slot = slots.setdefault(
        int(tc.get("index", len(slots))),
        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
    )
    if tc.get("id"):
        slot["id"] = tc["id"]
    if tc.get("type"):
        slot["type"] = tc["type"]
    fn = tc.get("function")
    if isinstance(fn, dict):
        for key in ("name", "arguments"):
            if isinstance(fn.get(key), str):
                slot["function"][key] += fn[key]


def _responses(events: list[tuple[str, str]]) -> tuple[Any, bool]:
    start: dict[str, Any] | None = None
    items: dict[int, Any] = {}
    error = None
    for name, data in events:
        ev = _json(data)
        if not isinstance(ev, dict):
            continue
        kind = ev.get("type", name)
        if kind in _RESPONSES_DONE and isinstance(ev.get("response"), dict):
            return ev["response"], kind != "response.failed"
        if kind == "response.created" and isinstance(ev.get("response"), dict):
            start = dict(ev["response"])
        elif kind == "response.output_item.done":
            items[int(ev.get("output_index", len(items)))] = ev.get("item")
        elif kind == "error":
            error = {k: v for k, v in ev.items() if k not in ("type", "sequence_number")}
    if start is None and error is None:
        return None, False
    out = start or {}
    out["output"] = [items[i] for i in sorted(items)]
    if error is not None:
        out["error"] = error
    return out, False


def _text_only(part: dict[str, Any]) -> bool:
    return "text" in part and set(part) <= {"text", "thought"}


def _gemini(chunks: list[dict[str, Any]]) -> tuple[Any, bool]:
    if not chunks:
        return None, False
    out: dict[str, Any] = {}
    parts: list[dict[str, Any]] = []
    candidate: dict[str, Any] = {}
    for chunk in chunks:
        for key, value in chunk.items():
            if key != "candidates":
                out[key] = value  # the last chunk's usageMetadata and ids win
        cands = chunk.get("candidates")
        if not isinstance(cands, list) or not cands or not isinstance(cands[0], dict):
            continue
        cand = cands[0]
        for key, value in cand.items():
            if key != "content":
                candidate[key] = value
        content = cand.get("content")
        for part in content.get("parts") or [] if isinstance(content, dict) else []:
            if not isinstance(part, dict):
                continue
            last = parts[-1] if parts else None
            if (
                last is not None
                and _text_only(part)
                and "text" in last
                and bool(last.get("thought")) == bool(part.get("thought"))
                and not (set(last) - {"text", "thought", "thoughtSignature"})
            ):
                last["text"] = str(last["text"]) + str(part["text"])
            else:
                parts.append(dict(part))
    if candidate or parts:
        out["candidates"] = [{**candidate, "content": {"role": "model", "parts": parts}}]
    finished = "finishReason" in candidate
    return out, finished and "error" not in out
