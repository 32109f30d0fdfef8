"""Streamed responses: the events of one stream, accumulated into the answer's body.

An agent that streams gets its answer as events (Anthropic's ``message_start`` …
``message_stop``, OpenAI's ``chat.completion.chunk`` s, the Responses API's
``response.*`` events, Gemini's partial ``GenerateContentResponse`` s).
``StreamAccumulator`` collects them as they arrive — the event objects of the
official SDKs, their dicts, or the server-sent-event text as received — and gives the
body the same request would have had without streaming, which ``Provider.read_response``
(and so ``Engine.record``) reads like any answer.  ``record`` takes the list of events
directly and accumulates it the same way.  The traffic importer (and so ``ctxrules
proxy``) assembles the streams it records with the same accumulators (``assemble``,
``sse_assemble``), leniently: it stores what arrived and says whether it was whole.

A stream is finished when its last event came: ``message_stop``, a finish reason on
every choice, ``response.completed`` / ``response.incomplete``, a ``finishReason``.
Anything less is refused with a ``StreamError`` that says what was received and what is
missing: an answer cut short must not be stored as if it were whole.  An error event
(Anthropic's ``error``, a Responses ``response.failed`` or ``error``, an error chunk)
becomes the vendor's error through the provider (a prompt-too-long refusal is
recognised as one).

How each vendor reports usage while streaming, as the accumulators follow it:
Anthropic's ``message_delta`` usage is cumulative (it replaces ``message_start``'s);
OpenAI Chat sends usage on a last chunk without choices, and only when the request
asked for it (``stream_options.include_usage``; Groq in the last chunk's
``x_groq``); Responses carry it on the final event's response; every Gemini chunk
carries the usage so far (the last one is kept, never summed).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from ..errors import ProviderError, StreamError
from ..plugins import registry
from .responses import WIRE_TITLES, error_envelope

__all__ = [
    "StreamAccumulator",
    "accumulate",
    "assemble",
    "is_event_stream",
    "json_value",
    "sse_assemble",
    "sse_events",
]


class _Provider(Protocol):
    """What an accumulator needs of a provider (``ctxrules.providers.Provider``)."""

    @property
    def name(self) -> str: ...

    @property
    def wire(self) -> str | None: ...

    def vendor_error(self, status: int | None, envelope: Mapping[str, Any]) -> Exception: ...


def _event_dict(event: Any) -> dict[str, Any]:
    """One event as a dict: a dict as it is, an SDK object dumped under its JSON names."""
    if isinstance(event, Mapping):
        return dict(event)
    dump = getattr(event, "model_dump", None)
    if callable(dump):
        try:
            out = dump(mode="json", by_alias=True, exclude_none=True, warnings=False)
        except TypeError:
            out = dump()
        if isinstance(out, Mapping):
            return dict(out)
    raise ProviderError(
        f"a stream event must be an object, got {type(event).__name__}",
        where="stream",
        hint="pass the events as the SDK yielded them, or their dicts",
    )


class _Wire:
    """The accumulation of one wire's events, as they arrive (subclasses per wire).

    Never raises on what it is given: an event it cannot use is left out, an error
    event lands in the body's ``error``, and ``complete`` says whether the stream
    reached its end without one.  The ``StreamAccumulator`` (and ``record``) turns
    those into errors; the traffic importer stores what it can.
    """

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def add(self, name: str, event: Any) -> None:
        """Take one event: its SSE event name (``""``: none) and its decoded data."""
        raise NotImplementedError

    @property
    def complete(self) -> bool:
        raise NotImplementedError

    def body(self) -> Any:
        """The body so far (``None``: nothing usable arrived)."""
        raise NotImplementedError

    def missing(self) -> str:
        """What a finished stream would still have sent (for the ``StreamError``)."""
        raise NotImplementedError

    def note(self, kind: str) -> None:
        if not self.kinds or self.kinds[-1] != kind:
            self.kinds.append(kind)


class _Anthropic(_Wire):
    """Messages streaming: ``message_start`` gives the message, ``content_block_*`` build
    its blocks (text and thinking concatenated, tool input JSON parsed at the end, the
    signature assigned, citations appended), ``message_delta`` assigns the stop reason
    and the usage counts it carries (cumulative, never added), ``message_stop`` ends it.
    The SDK's helper events (``text``, ``input_json``, …) repeat the deltas: skipped."""

    def __init__(self) -> None:
        super().__init__()
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, list[str]] = {}
        self.stopped = False
        self.error: Any = None

    def add(self, name: str, event: Any) -> None:
        if not isinstance(event, Mapping):
            return
        kind = str(event.get("type", name))
        self.note(kind)
        if kind == "message_start" and isinstance(event.get("message"), Mapping):
            self.message = dict(event["message"])
            self.message["usage"] = dict(self.message.get("usage") or {})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), Mapping):
            self.blocks[int(event.get("index", len(self.blocks)))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), Mapping):
            index = int(event.get("index", 0))
            block = self.blocks.setdefault(index, {})
            delta = event["delta"]
            if delta.get("type") == "input_json_delta":
                self.partial.setdefault(index, []).append(str(delta.get("partial_json", "")))
            elif delta.get("type") == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
            elif delta.get("type") == "signature_delta":
                block["signature"] = delta.get("signature", "")
            else:  # text_delta, thinking_delta and any later string delta
                for key, value in delta.items():
                    if key != "type" and isinstance(value, str):
                        block[key] = str(block.get(key, "")) + value
        elif kind == "message_delta" and self.message is not None:
            delta = event.get("delta")
            if isinstance(delta, Mapping):
                self.message.update(delta)
            usage = event.get("usage")
            if isinstance(usage, Mapping):  # cumulative counts: assigned
                self.message["usage"].update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            self.error = event.get("error", dict(event))

    @property
    def complete(self) -> bool:
        return self.stopped and self.message is not None and self.error is None

    def missing(self) -> str:
        if self.message is None:
            return "message_start (the stream's first event)"
        return "message_stop (the stream's last event)"

    def body(self) -> Any:
        if self.message is None:
            return {"type": "error", "error": self.error} if self.error is not None else None
        blocks = {i: dict(b) for i, b in self.blocks.items()}
        for index, parts in self.partial.items():
            text = "".join(parts)
            value = json_value(text) if text.strip() else {}
            blocks.setdefault(index, {})["input"] = value if isinstance(value, dict) else {}
        message = dict(self.message, content=[blocks[i] for i in sorted(blocks)])
        if self.error is not None:
            message["error"] = self.error
        return message


class _Chat(_Wire):
    """Chat Completions chunks: each choice's string deltas concatenated (content,
    refusal, reasoning), its tool calls by ``index`` (argument fragments joined), its
    finish reason; ``usage`` from the ``include_usage`` chunk; ``[DONE]`` or a finish
    reason on every choice ends it; an ``error`` in a chunk is the vendor's error."""

    def __init__(self) -> None:
        super().__init__()
        self.out: dict[str, Any] = {}
        self.choices: dict[int, dict[str, Any]] = {}
        self.calls: dict[int, dict[int, dict[str, Any]]] = {}
        self.done = False

    def add(self, name: str, event: Any) -> None:
        if event == "[DONE]":
            self.note("[DONE]")
            self.done = True
            return
        if not isinstance(event, Mapping):
            return
        if event.get("type") == "chunk" and isinstance(event.get("chunk"), Mapping):
            event = event["chunk"]  # the SDK's ChatCompletionStream helper event
        elif "type" in event and "choices" not in event and "error" not in event:
            return  # the helper's other events (content.delta, …) repeat the chunks
        self.note(str(event.get("object") or "chunk"))
        if "error" in event:
            self.out["error"] = event["error"]
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if key in event and key not in self.out:
                self.out[key] = event[key]
        if event.get("usage"):
            self.out["usage"] = event["usage"]
        elif isinstance(event.get("x_groq"), Mapping) and event["x_groq"].get("usage"):
            self.out["usage"] = event["x_groq"]["usage"]  # where Groq sends it
        for ch in event.get("choices") or []:
            if not isinstance(ch, Mapping):
                continue
            index = int(ch.get("index", 0))
            choice = self.choices.setdefault(
                index, {"index": index, "message": {"role": "assistant", "content": None}}
            )
            message = choice["message"]
            delta = ch.get("delta")
            for key, value in (delta if isinstance(delta, Mapping) else {}).items():
                if key == "tool_calls" and isinstance(value, list):
                    slots = self.calls.setdefault(index, {})
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

    @property
    def complete(self) -> bool:
        finished = bool(self.choices) and all("finish_reason" in c for c in self.choices.values())
        return (self.done or finished) and "error" not in self.out

    def missing(self) -> str:
        if not self.choices:
            return "any choice (no chunk carried one)"
        return "the finish_reason of the last chunk"

    def body(self) -> Any:
        if not self.choices and not self.out:
            return None
        choices = {i: dict(c, message=dict(c["message"])) for i, c in self.choices.items()}
        for index, slots in self.calls.items():
            choices[index]["message"]["tool_calls"] = [slots[i] for i in sorted(slots)]
        return {
            **self.out,
            "object": "chat.completion",
            "choices": [choices[i] for i in sorted(choices)],
        }


def _chat_call(slots: dict[int, dict[str, Any]], tc: Any) -> None:
    if not isinstance(tc, Mapping):
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
    if isinstance(fn, Mapping):
        for key in ("name", "arguments"):
            if isinstance(fn.get(key), str):
                slot["function"][key] += fn[key]


#: The terminal events of a Responses stream; each carries the whole response.
_RESPONSES_DONE = ("response.completed", "response.incomplete", "response.failed")


class _Responses(_Wire):
    """Responses events: the ``response`` of ``response.completed`` / ``incomplete`` /
    ``failed`` holds the whole output (a failed one its ``error``); before it, the
    items of ``response.output_item.done``; an ``error`` event is the vendor's error."""

    def __init__(self) -> None:
        super().__init__()
        self.final: dict[str, Any] | None = None
        self.failed = False
        self.start: dict[str, Any] | None = None
        self.items: dict[int, Any] = {}
        self.error: Any = None

    def add(self, name: str, event: Any) -> None:
        if not isinstance(event, Mapping) or self.final is not None:
            return
        kind = str(event.get("type", name))
        self.note(kind)
        if kind in _RESPONSES_DONE and isinstance(event.get("response"), Mapping):
            self.final = dict(event["response"])
            self.failed = kind == "response.failed"
        elif kind == "response.created" and isinstance(event.get("response"), Mapping):
            self.start = dict(event["response"])
        elif kind == "response.output_item.done":
            self.items[int(event.get("output_index", len(self.items)))] = event.get("item")
        elif kind == "error":
            self.error = {k: v for k, v in event.items() if k not in ("type", "sequence_number")}

    @property
    def complete(self) -> bool:
        return self.final is not None and not self.failed

    def missing(self) -> str:
        return "response.completed (or response.incomplete), the stream's last event"

    def body(self) -> Any:
        if self.final is not None:
            return self.final
        if self.start is None and self.error is None:
            return None
        out = dict(self.start or {})
        out["output"] = [self.items[i] for i in sorted(self.items)]
        if self.error is not None:
            out["error"] = self.error
        return out


class _Gemini(_Wire):
    """Gemini chunks: the first candidate's parts in order (adjacent text parts of the
    same kind joined), its other fields and the top-level ones as the last chunk has
    them (``usageMetadata`` is cumulative: kept, never summed); ``finishReason`` ends
    it; an ``error`` chunk is the vendor's error."""

    def __init__(self) -> None:
        super().__init__()
        self.out: dict[str, Any] = {}
        self.parts: list[dict[str, Any]] = []
        self.candidate: dict[str, Any] = {}

    def add(self, name: str, event: Any) -> None:
        if not isinstance(event, Mapping):
            return
        self.note("chunk")
        for key, value in event.items():
            if key != "candidates":
                self.out[key] = value  # the last chunk's usageMetadata and ids win
        cands = event.get("candidates")
        if not isinstance(cands, list) or not cands or not isinstance(cands[0], Mapping):
            return
        cand = cands[0]
        for key, value in cand.items():
            if key != "content":
                self.candidate[key] = value
        content = cand.get("content")
        for part in content.get("parts") or [] if isinstance(content, Mapping) else []:
            if not isinstance(part, Mapping):
                continue
            last = self.parts[-1] if self.parts else None
            if (
                last is not None
                and "text" in part
                and set(part) <= {"text", "thought"}
                and "text" in last
                and bool(last.get("thought")) == bool(part.get("thought"))
                and not (set(last) - {"text", "thought", "thoughtSignature"})
            ):
                last["text"] = str(last["text"]) + str(part["text"])
            else:
                self.parts.append(dict(part))

    @property
    def complete(self) -> bool:
        return "finishReason" in self.candidate and "error" not in self.out

    def missing(self) -> str:
        return "the finishReason of the last chunk"

    def body(self) -> Any:
        if not self.out and not self.candidate and not self.parts:
            return None
        out = dict(self.out)
        if self.candidate or self.parts:
            parts = [dict(p) for p in self.parts]
            out["candidates"] = [{**self.candidate, "content": {"role": "model", "parts": parts}}]
        return out


def json_value(text: str) -> Any:
    """The JSON value of ``text``, or ``None`` when it is not JSON (a stream's data
    line, a body as it travelled)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


_WIRES: dict[str, type[_Wire]] = {
    "anthropic": _Anthropic,
    "openai-chat": _Chat,
    "openai-responses": _Responses,
    "gemini": _Gemini,
}


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


def assemble(wire: str, events: Iterable[tuple[str, Any]]) -> tuple[Any, bool]:
    """The body a stream of ``wire`` amounts to, and whether it reached its end without
    an error: ``events`` are ``(event name, decoded data)`` pairs (``"[DONE]"`` as it
    came).  Lenient (see ``_Wire``); ``StreamAccumulator`` is the strict reader."""
    acc = _WIRES[wire]()
    for name, event in events:
        acc.add(name, event)
    return acc.body(), acc.complete


def sse_assemble(wire: str, text: str) -> tuple[Any, bool]:
    """``assemble`` of server-sent-event text (each event's data decoded as JSON)."""
    return assemble(
        wire, ((n, d if d.strip() == "[DONE]" else json_value(d)) for n, d in sse_events(text))
    )


def is_event_stream(body: Any) -> bool:
    """Whether ``body`` is a stream's events as received: a list or tuple of events, or
    server-sent-event text (``event:`` / ``data:`` lines)."""
    if isinstance(body, (list, tuple)):
        return True
    if isinstance(body, bytes):
        return body[:64].lstrip().startswith((b"event:", b"data:"))
    if isinstance(body, str):
        return body[:64].lstrip().startswith(("event:", "data:"))
    return False


class StreamAccumulator:
    """Collects one streamed response's events for ``provider`` (a name or a
    ``Provider``) as they arrive, and gives the finished answer's body.

    ``add(event)`` takes each event as the SDK yields it (or its dict); ``done`` says
    whether the last event came; ``response()`` is the body of the whole answer, which
    ``Engine.record`` takes (so does ``record(prep, events)`` with the list).
    ``response()`` raises the vendor's error when the stream carried one (a
    prompt-too-long refusal as ``PromptTooLongError``), and ``StreamError`` naming what
    is missing when the stream has not finished.
    """

    def __init__(self, provider: str | _Provider):
        prov: _Provider = (
            registry("providers").get(provider) if isinstance(provider, str) else provider
        )
        wire = prov.wire
        if wire not in _WIRES:
            raise ProviderError(
                f"provider {prov.name!r} has no built-in stream format",
                hint="accumulate its events yourself and pass the final body",
            )
        self.provider = prov
        self.wire: str = wire
        self._wire = _WIRES[wire]()
        self.count = 0

    def add(self, event: Any) -> None:
        """Take one event (an SDK event object, its dict, or ``"[DONE]"``)."""
        self.count += 1
        if event == "[DONE]":
            self._wire.add("", event)
            return
        data = _event_dict(event)
        self._wire.add(str(data.get("type", "")), data)

    def extend(self, events: Iterable[Any]) -> StreamAccumulator:
        """Take each of ``events``; returns the accumulator."""
        for event in events:
            self.add(event)
        return self

    @property
    def done(self) -> bool:
        """Whether the stream's last event has come (and no error event)."""
        return self._wire.complete

    def response(self) -> dict[str, Any]:
        """The whole answer's body (see the class docstring for what it raises)."""
        return _finished(self.provider, self._wire, self.count)


def _finished(provider: _Provider, acc: _Wire, count: int) -> dict[str, Any]:
    body = acc.body()
    if isinstance(body, Mapping):
        envelope = error_envelope(body)
        if envelope is None and body.get("error") is not None:
            err = body["error"]
            envelope = {"error": dict(err) if isinstance(err, Mapping) else {"message": str(err)}}
        if envelope is not None:
            raise provider.vendor_error(None, envelope)
    if not acc.complete or not isinstance(body, dict):
        seen = ", ".join(acc.kinds[-6:]) or "nothing"
        raise StreamError(
            f"the stream is not finished: {count} events received (last: {seen}), "
            f"missing {acc.missing()}",
            where=f"a stream of {WIRE_TITLES[provider.wire or '']}",
            hint="record a stream once it has ended; a stream cut short is not the "
            "model's answer (send the request again)",
        )
    return body


def accumulate(provider: _Provider, events: Any) -> dict[str, Any]:
    """The answer's body from a finished stream's ``events`` (a list of events, or
    server-sent-event text); see ``StreamAccumulator``."""
    if isinstance(events, bytes):
        events = events.decode("utf-8", "replace")
    acc = StreamAccumulator(provider)
    if isinstance(events, str):
        for name, data in sse_events(events):
            acc.count += 1
            acc._wire.add(name, data if data.strip() == "[DONE]" else json_value(data))
    else:
        acc.extend(events)
    return acc.response()
