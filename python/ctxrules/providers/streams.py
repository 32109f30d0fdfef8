"""Streamed responses: the events of one stream, accumulated into the answer's body.

An agent that streams gets its answer as events (Anthropic's ``message_start`` …
``message_stop``, OpenAI's ``chat.completion.chunk`` s, the Responses API's
``response.*`` events, Gemini's partial ``GenerateContentResponse`` s).
``StreamAccumulator`` collects them as they arrive — the event objects of the
official SDKs, their dicts, or the server-sent-event text as received — and gives the
body the same request would have had without streaming, which ``Provider.read_response``
(and so ``Engine.record``) reads like any answer.  ``record`` takes the list of events
directly and accumulates it the same way.

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
asked for it (``stream_options.include_usage``); Responses carry it on the final
event's response; every Gemini chunk carries the usage so far (the last one is kept,
never summed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from ..errors import ProviderError, StreamError
from ..plugins import registry
from .responses import WIRE_TITLES, error_envelope

__all__ = ["StreamAccumulator", "accumulate", "is_event_stream", "sse_events"]

#: Makes the vendor's error from an error envelope (``Provider.vendor_error``).
ErrorMaker = Callable[[int | None, Mapping[str, Any]], Exception]


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
    """The accumulation of one wire's events (subclasses per wire)."""

    title = ""

    def __init__(self, error: ErrorMaker):
        self.error = error
        self.kinds: list[str] = []

    def add(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        raise NotImplementedError

    def body(self) -> dict[str, Any]:
        raise NotImplementedError

    def missing(self) -> str:
        """What a finished stream would still have sent (for the ``StreamError``)."""
        raise NotImplementedError

    def note(self, kind: str) -> None:
        if not self.kinds or self.kinds[-1] != kind:
            self.kinds.append(kind)


class _Anthropic(_Wire):
    """Messages streaming: ``message_start``, content blocks by index (text, tool input
    JSON, thinking and its signature, citations), ``message_delta``, ``message_stop``."""

    def __init__(self, error: ErrorMaker):
        super().__init__(error)
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json: dict[int, str] = {}
        self.stopped = False

    def add(self, event: dict[str, Any]) -> None:
        kind = str(event.get("type", ""))
        self.note(kind)
        if kind == "error":
            raise self.error(None, {"error": event.get("error") or {}})
        if kind == "message_start":
            self.message = dict(event.get("message") or {})
            self.message["content"] = []
        elif kind == "content_block_start":
            index = int(event.get("index", len(self.blocks)))
            block = dict(event.get("content_block") or {})
            if block.get("type") in ("tool_use", "server_tool_use"):
                self.json[index] = ""
            self.blocks[index] = block
        elif kind == "content_block_delta":
            index = int(event.get("index", 0))
            block = self.blocks.setdefault(index, {})
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif dtype == "input_json_delta":
                self.json[index] = self.json.get(index, "") + str(delta.get("partial_json", ""))
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "content_block_stop":
            index = int(event.get("index", 0))
            raw = self.json.pop(index, None)
            if raw is not None and index in self.blocks:
                try:
                    self.blocks[index]["input"] = json.loads(raw) if raw.strip() else {}
                except json.JSONDecodeError:
                    raise StreamError(
                        f"the input of tool call block {index} is not JSON: {raw[:80]!r}",
                        field=f"content[{index}].input",
                        where="an Anthropic Messages stream",
                    ) from None
        elif kind == "message_delta":
            if self.message is None:
                self.message = {"content": []}
            delta = event.get("delta") or {}
            for key in ("stop_reason", "stop_sequence", "container"):
                if delta.get(key) is not None:
                    self.message[key] = delta[key]
            usage = event.get("usage")
            if isinstance(usage, Mapping):
                merged = dict(self.message.get("usage") or {})
                # Cumulative: each count given replaces the one before.
                merged.update({k: v for k, v in usage.items() if v is not None})
                self.message["usage"] = merged
        elif kind == "message_stop":
            self.stopped = True
        # ping and the SDK's helper events (text, input_json, …) repeat the deltas.

    @property
    def done(self) -> bool:
        return self.stopped and self.message is not None

    def missing(self) -> str:
        if self.message is None:
            return "message_start (the stream's first event)"
        return "message_stop (the stream's last event)"

    def body(self) -> dict[str, Any]:
        assert self.message is not None
        message = dict(self.message)
        message["content"] = [self.blocks[i] for i in sorted(self.blocks)]
        return message


class _Chat(_Wire):
    """Chat Completions chunks: each choice's deltas (content, refusal, tool calls by
    index with their argument fragments), its finish reason, the usage chunk."""

    def __init__(self, error: ErrorMaker):
        super().__init__(error)
        self.head: dict[str, Any] = {}
        self.choices: dict[int, dict[str, Any]] = {}
        self.usage: Any = None

    def add(self, event: dict[str, Any]) -> None:
        if event.get("type") == "chunk" and isinstance(event.get("chunk"), Mapping):
            event = dict(event["chunk"])  # the SDK's ChatCompletionStream helper event
        elif "type" in event and "object" not in event:
            return  # the helper's other events (content.delta, …) repeat the chunks
        if isinstance(event.get("error"), Mapping):
            self.note("error")
            raise self.error(None, {"error": event["error"]})
        self.note(str(event.get("object") or "chunk"))
        for key in ("id", "model", "created", "system_fingerprint", "service_tier"):
            if event.get(key) is not None:
                self.head[key] = event[key]
        if event.get("usage") is not None:
            self.usage = event["usage"]
        for raw in event.get("choices") or []:
            index = int(raw.get("index", 0))
            choice = self.choices.setdefault(index, {"text": None, "refusal": None, "calls": {}})
            delta = raw.get("delta") or {}
            for key in ("text", "refusal"):
                piece = delta.get("content" if key == "text" else key)
                if isinstance(piece, str):
                    choice[key] = (choice[key] or "") + piece
            for call in delta.get("tool_calls") or []:
                slot = choice["calls"].setdefault(
                    int(call.get("index", 0)),
                    {"id": "", "type": "function", "name": "", "args": ""},
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                fn = call.get("function") or {}
                slot["name"] += str(fn.get("name") or "")
                slot["args"] += str(fn.get("arguments") or "")
            if raw.get("finish_reason"):
                choice["finish_reason"] = raw["finish_reason"]

    @property
    def done(self) -> bool:
        return bool(self.choices) and all(c.get("finish_reason") for c in self.choices.values())

    def missing(self) -> str:
        if not self.choices:
            return "any choice (no chunk carried one)"
        return "the finish_reason of the last chunk"

    def body(self) -> dict[str, Any]:
        choices = []
        for index in sorted(self.choices):
            c = self.choices[index]
            message: dict[str, Any] = {"role": "assistant", "content": c["text"]}
            if c["refusal"] is not None:
                message["refusal"] = c["refusal"]
            if c["calls"]:
                message["tool_calls"] = [
                    {
                        "id": s["id"],
                        "type": s["type"],
                        "function": {"name": s["name"], "arguments": s["args"]},
                    }
                    for _, s in sorted(c["calls"].items())
                ]
            choices.append(
                {"index": index, "message": message, "finish_reason": c["finish_reason"]}
            )
        body = {**self.head, "object": "chat.completion", "choices": choices}
        if self.usage is not None:
            body["usage"] = self.usage
        return body


class _Responses(_Wire):
    """Responses events: the final ``response.completed`` / ``response.incomplete``
    carries the whole response; ``response.failed`` and ``error`` are the vendor's
    error.  The output items seen done are kept for a final event without them."""

    def __init__(self, error: ErrorMaker):
        super().__init__(error)
        self.final: dict[str, Any] | None = None
        self.items: dict[int, Any] = {}

    def add(self, event: dict[str, Any]) -> None:
        kind = str(event.get("type", ""))
        self.note(kind)
        if kind == "error":
            inner = {k: v for k, v in event.items() if k not in ("type", "sequence_number")}
            raise self.error(None, {"error": inner})
        if kind == "response.failed":
            response = event.get("response") or {}
            raise self.error(None, {"error": dict(response.get("error") or {})})
        if kind == "response.output_item.done":
            self.items[int(event.get("output_index", len(self.items)))] = event.get("item")
        elif kind in ("response.completed", "response.incomplete"):
            self.final = dict(event.get("response") or {})

    @property
    def done(self) -> bool:
        return self.final is not None

    def missing(self) -> str:
        return "response.completed (or response.incomplete), the stream's last event"

    def body(self) -> dict[str, Any]:
        assert self.final is not None
        body = dict(self.final)
        if not body.get("output") and self.items:
            body["output"] = [self.items[i] for i in sorted(self.items)]
        return body


class _Gemini(_Wire):
    """Gemini chunks: the first candidate's parts in order (adjacent text of the same
    kind joined), the last usage, model and response id, the finish reason."""

    def __init__(self, error: ErrorMaker):
        super().__init__(error)
        self.parts: list[dict[str, Any]] = []
        self.head: dict[str, Any] = {}
        self.finish: str | None = None
        self.role = "model"

    def add(self, event: dict[str, Any]) -> None:
        self.note("chunk")
        envelope = error_envelope(event)
        if envelope is not None:
            raise self.error(None, envelope)
        for key in ("usageMetadata", "modelVersion", "responseId", "createTime"):
            if event.get(key) is not None:
                self.head[key] = event[key]
        candidates = event.get("candidates") or []
        first = candidates[0] if candidates and isinstance(candidates[0], Mapping) else {}
        content = first.get("content") or {}
        self.role = str(content.get("role") or self.role)
        for part in content.get("parts") or []:
            part = dict(part)
            prev = self.parts[-1] if self.parts else None
            if (
                prev is not None
                and set(part) <= {"text", "thought"}
                and set(prev) <= {"text", "thought", "thoughtSignature"}
                and "text" in part
                and "text" in prev
                and bool(part.get("thought")) == bool(prev.get("thought"))
            ):
                prev["text"] = str(prev["text"]) + str(part["text"])
            else:
                self.parts.append(part)
        if first.get("finishReason"):
            self.finish = str(first["finishReason"])

    @property
    def done(self) -> bool:
        return self.finish is not None

    def missing(self) -> str:
        return "the finishReason of the last chunk"

    def body(self) -> dict[str, Any]:
        candidate = {
            "content": {"role": self.role, "parts": self.parts},
            "finishReason": self.finish,
            "index": 0,
        }
        return {"candidates": [candidate], **self.head}


_WIRES: dict[str, type[_Wire]] = {
    "anthropic": _Anthropic,
    "openai-chat": _Chat,
    "openai-responses": _Responses,
    "gemini": _Gemini,
}


def sse_events(text: str | bytes) -> list[dict[str, Any]]:
    """The JSON events of server-sent-event text as received (``data:`` lines; an
    ``event:`` line names the event when its data has no ``type``; ``[DONE]`` ends it)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    events: list[dict[str, Any]] = []
    name, data = "", list[str]()
    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if data:
                raw = "\n".join(data)
                if raw.strip() != "[DONE]":
                    try:
                        event = json.loads(raw)
                    except json.JSONDecodeError as exc:
                        raise StreamError(
                            f"an event's data is not JSON: {exc}", where="server-sent events"
                        ) from None
                    if isinstance(event, dict) and name and "type" not in event:
                        event["type"] = name
                    events.append(event)
            name, data = "", []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            name = line[6:].strip()
    return events


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
    ``Engine.record`` takes (so does ``record(prep, events)`` with the list).  An error
    event raises the vendor's error from ``add``; ``response()`` before the end raises
    ``StreamError`` naming what is missing.
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
        self._wire = _WIRES[wire](prov.vendor_error)
        self.count = 0

    def add(self, event: Any) -> None:
        """Take one event (an SDK event object, its dict)."""
        self.count += 1
        self._wire.add(_event_dict(event))

    def extend(self, events: Iterable[Any]) -> StreamAccumulator:
        """Take each of ``events``; returns the accumulator."""
        for event in events:
            self.add(event)
        return self

    @property
    def done(self) -> bool:
        """Whether the stream's last event has come."""
        return self._wire.done

    def response(self) -> dict[str, Any]:
        """The whole answer's body (``StreamError`` when the stream has not finished)."""
        if not self._wire.done:
            seen = ", ".join(self._wire.kinds[-6:]) or "nothing"
            raise StreamError(
                f"the stream is not finished: {self.count} events received (last: {seen}), "
                f"missing {self._wire.missing()}",
                where=f"a stream of {WIRE_TITLES[self.wire]}",
                hint="record a stream once it has ended; a stream cut short is not the "
                "model's answer (send the request again)",
            )
        return self._wire.body()


def accumulate(provider: _Provider, events: Any) -> dict[str, Any]:
    """The answer's body from a finished stream's ``events`` (a list of events, or
    server-sent-event text); see ``StreamAccumulator``."""
    if isinstance(events, (str, bytes)):
        events = sse_events(events)
    return StreamAccumulator(provider).extend(events).response()
