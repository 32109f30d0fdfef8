"""Recorded HTTP traffic (cassettes): the requests a client sent to a model API, as sessions.

Three recorders' files are read alike (``_http``): vcrpy YAML cassettes, Ruby VCR YAML
cassettes and Go httprr traces.  An exchange whose URL is one of the four wires
(``traffic.wire_of``: ``…/messages``, ``…/chat/completions``, ``…/responses``,
``…:generateContent`` / ``…:streamGenerateContent``; a URL naming none of them goes by
its body) and whose request body is a JSON object is a call; token counting,
embeddings, uploads, telemetry and the rest are not, and are listed with why in the
metadata ``other_exchanges`` of every session of the file.  Bodies are read through
their ``Content-Encoding`` (gzip, deflate, br) and a streamed answer is put back
together (``_streams.read_response``).

The ``cassette`` importer takes the last call (in an agent loop it carries the whole
conversation) and ``cassette-all`` every call, one session each.  A session holds
exactly its request's conversation, read by the importers' converters: Anthropic
messages, Chat Completions messages, Gemini contents (camelCase or snake_case parts),
OpenAI Responses items (``_messages.ResponsesReader``; a request chained on an earlier
one with ``previous_response_id`` holds that request's conversation and its response
first, when the file recorded it — else metadata ``previous_response_missing``).  The
session metadata keeps, per call:

* ``request_body``: the request body's text exactly as recorded (pydantic-ai's
  decoded ``parsed_body`` as its JSON, keys in their order), and ``request``: its keys
  but the conversation (``messages``, ``contents``, ``input``);
* the defaults every importer fills (``_defaults``): ``system``, ``tools``,
  ``model``, ``provider``, ``params``;
* ``interaction``, ``uri``, ``wire`` (``anthropic``, ``openai`` (Chat Completions),
  ``openai-responses``, ``gemini``), ``recorder`` (``vcrpy``, ``ruby-vcr``,
  ``httprr``) and ``status``;
* ``response``: the answer as the vendor's non-streamed body, and ``usage``: its usage
  (what the provider billed for exactly this request); for a stream also
  ``response_streamed``, ``response_complete`` and ``response_body`` (the recorded
  events' text).

A file with no call at all is refused, saying what its exchanges are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from ._common import ImportedSession, SessionBuilder, empty, fail, file_key_of
from ._defaults import WIRE_PROVIDERS, request_defaults
from ._http import HttpExchange, is_recording, read_exchanges
from ._messages import anthropic_messages, gemini_contents, openai_messages, responses_items
from ._streams import brotli_missing, decode_body
from .openai_chat import anthropic_features
from .traffic import Exchange, gemini_model, recorded_exchange, wire_of

__all__ = ["Call", "CassetteImporter", "recorded_calls"]

#: The conversation keys of each wire's request body (kept as nodes, not in ``request``).
_CONVERSATION = ("messages", "contents", "input")
#: A cassette's ``wire`` for each provider (Chat Completions' is ``openai``).
_WIRE = {provider: wire for wire, provider in WIRE_PROVIDERS.items()}


class Call(msgspec.Struct, kw_only=True):
    """One recorded model call: the exchange as recorded (``http``) and as read
    (``read``: provider, decoded request, response read back)."""

    http: HttpExchange
    read: Exchange

    @property
    def wire(self) -> str:
        """The cassette wire name (``anthropic``, ``openai``, ``openai-responses``,
        ``gemini``)."""
        return _WIRE[self.read.provider]


def _other(rec: HttpExchange, why: str) -> dict[str, Any]:
    """An exchange that is no call, as ``other_exchanges`` lists it."""
    return {"interaction": rec.index, "method": rec.method, "uri": rec.uri, "why": why}


def _why_not(rec: HttpExchange) -> str:
    if wire_of(rec.path) is None and _wire_by_body(rec) is None:
        return "not a call of a model API this importer reads"
    body = rec.request_body
    if body is None or (isinstance(body, (str, bytes)) and not body.strip()):
        return "no request body recorded"
    return "the request body is not a JSON object"


def _check_encoding(path: str, rec: HttpExchange) -> None:
    for part, headers in (("request", rec.request_headers), ("response", rec.response_headers)):
        if brotli_missing(headers.get("content-encoding", "")):
            raise fail(
                path,
                rec.line,
                f"the {part} body of {rec.at} is br (Brotli) encoded and the brotli "
                "package is not installed",
                "pip install 'ctxrules[brotli]' and import again",
                at=None if rec.line else rec.at,
            )


#: URL path ends that are no model call, whatever the body holds.
_NOT_CALLS = ("count_tokens", "counttokens", "embeddings", "embedcontent", "batchembedcontents")


def _wire_by_body(rec: HttpExchange) -> str | None:
    """The wire of a request whose URL names none (a gateway, a proxy, a test server),
    from its body: ``contents`` is Gemini, ``messages`` Anthropic (with ``system`` or
    Anthropic-only blocks) or Chat Completions, ``input`` beside ``model`` Responses."""
    last = rec.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1].lower()
    if wire_of(rec.path) is not None or last.endswith(_NOT_CALLS):
        return None
    body = rec.request_body
    if not isinstance(body, dict):
        raw = decode_body(rec.request_bytes(), rec.request_headers.get("content-encoding", ""))
        try:
            body = json.loads(raw) if raw else None
        except (ValueError, RecursionError):
            return None
    if not isinstance(body, dict):
        return None
    msgs = body.get("messages")
    if isinstance(body.get("contents"), list):
        return "gemini"
    if isinstance(msgs, list):
        anthropic = "system" in body or "anthropic_version" in body or anthropic_features(msgs)
        return "anthropic" if anthropic else "openai-chat"
    if "model" in body and isinstance(body.get("input"), (list, str)):
        return "openai-responses"
    return None


def recorded_calls(path: str) -> tuple[str, list[Call], list[dict[str, Any]]]:
    """``(recorder, calls, other exchanges)`` of a recorded-traffic file; each other
    exchange is ``{"interaction", "method", "uri", "why"}``."""
    recorder, exchanges = read_exchanges(path)
    calls: list[Call] = []
    others: list[dict[str, Any]] = []
    for rec in exchanges:
        _check_encoding(path, rec)
        read = recorded_exchange(rec, _wire_by_body(rec))
        if read is None:
            others.append(_other(rec, _why_not(rec)))
        else:
            calls.append(Call(http=rec, read=read))
    return recorder, calls, others


def _usage(provider: str, response: Any) -> Any:
    if not isinstance(response, Mapping):
        return None
    if provider == "gemini":
        return response.get("usageMetadata", response.get("usage_metadata"))
    return response.get("usage")


def _text(rec: HttpExchange, part: str) -> str:
    """A body's text, its content encoding undone."""
    if part == "request":
        data, headers = rec.request_bytes(), rec.request_headers
    else:
        data, headers = rec.response_bytes(), rec.response_headers
    raw = decode_body(data, headers.get("content-encoding", ""))
    return (raw or b"").decode("utf-8", "replace")


def _request_as_recorded(rec: HttpExchange) -> str | None:
    """The request body's text as recorded (decoded from its content encoding); a
    body a recorder kept decoded (pydantic-ai's ``parsed_body``) as its JSON, keys in
    their order (``None`` if it nests too deep to encode: the node check refuses it)."""
    if isinstance(rec.request_body, (dict, list)):
        try:
            return msgspec.json.encode(rec.request_body).decode()
        except RecursionError:
            return None
    return _text(rec, "request")


def _responses_chain(calls: list[Call], k: int) -> tuple[list[Any], list[int]]:
    """The Responses items call ``k`` stands for: the items of the call its
    ``previous_response_id`` names (when recorded before it, recursively) and that
    call's output, then its own input; and the interactions it chained on."""
    by_id: dict[str, int] = {}
    for i, c in enumerate(calls[:k]):
        body = c.read.response.body
        if c.read.provider == "openai-responses" and isinstance(body, Mapping):
            rid = body.get("id")
            if isinstance(rid, str):
                by_id[rid] = i
    items: list[Any] = []
    chain: list[int] = []
    seen: set[int] = set()

    def add(i: int) -> None:
        body = calls[i].read.request
        prev = body.get("previous_response_id")
        j = by_id.get(prev) if isinstance(prev, str) else None
        if j is not None and j not in seen:
            seen.add(j)
            add(j)
            chain.append(calls[j].http.index)
            response = calls[j].read.response.body
            output = response.get("output") if isinstance(response, Mapping) else None
            items.extend(output if isinstance(output, list) else [])
        own = body.get("input")
        items.extend([{"role": "user", "content": own}] if isinstance(own, str) else own or [])

    add(k)
    return items, chain


def _conversation(b: SessionBuilder, path: str, calls: list[Call], k: int) -> dict[str, Any]:
    """Add call ``k``'s conversation to ``b``; returns its metadata defaults."""
    call = calls[k]
    body, provider, rec = call.read.request, call.read.provider, call.http
    model = str(body.get("model") or "") or (gemini_model(rec.path) if provider == "gemini" else "")
    at = f"{rec.at}.request." + ("parsed_body" if isinstance(rec.request_body, dict) else "body")
    extra: dict[str, Any] = {}
    if provider == "anthropic":
        anthropic_messages(
            b, body.get("system"), body["messages"], path=path, at=f"{at}.messages", model=model
        )
    elif provider == "openai-chat":
        openai_messages(b, body["messages"], path=path, at=f"{at}.messages", model=model)
    elif provider == "gemini":
        gemini_contents(
            b,
            body.get("systemInstruction", body.get("system_instruction")),
            body["contents"],
            path=path,
            at=f"{at}.contents",
            model=model,
        )
    else:
        items, chain = _responses_chain(calls, k)
        prev = body.get("previous_response_id")
        missing = isinstance(prev, str) and not chain
        responses_items(
            b,
            body.get("instructions"),
            items,
            path=path,
            at=f"{at}.input",
            model=model,
            orphan_ok=missing,
        )
        if isinstance(prev, str):
            extra["previous_response_id"] = prev
            if chain:
                extra["chained_interactions"] = chain
            else:
                extra["previous_response_missing"] = True
    return {**request_defaults(body, provider, model=model), **extra}


def _has_conversation(read: Exchange) -> bool:
    body = read.request
    key = {"openai-responses": "input", "gemini": "contents"}.get(read.provider, "messages")
    value = body.get(key)
    return isinstance(value, list) or (key == "input" and isinstance(value, str))


class CassetteImporter:
    """Recorded HTTP traffic (vcrpy, Ruby VCR, httprr); ``which`` is ``"last"`` or
    ``"all"`` calls."""

    auto: bool
    description: str

    def __init__(self, which: str = "last"):
        self.which = which
        self.name = "cassette" if which == "last" else "cassette-all"
        self.auto = which == "last"
        what = "the last call's conversation" if which == "last" else "every call, one session each"
        self.description = f"recorded HTTP traffic (vcrpy / Ruby VCR YAML, httprr): {what}"

    def detect(self, path: str, head: bytes) -> bool:
        """A recording of HTTP traffic (``_http.is_recording``)."""
        return is_recording(head)

    def parse(self, path: str) -> list[ImportedSession]:
        """The last (or every) model call, one session each."""
        recorder, calls, others = recorded_calls(path)
        for call in calls:
            if not _has_conversation(call.read):
                others.append(_other(call.http, "the request body holds no conversation"))
        calls = [c for c in calls if _has_conversation(c.read)]
        others.sort(key=lambda o: int(o["interaction"]))
        if not calls:
            shown = "; ".join(f"{o['method']} {o['uri']}: {o['why']}" for o in others[:3])
            more = "; …" if len(others) > 3 else ""
            raise empty(
                path,
                f"no model call among its {len(others)} recorded exchanges"
                + (f" ({shown}{more})" if shown else ""),
                "the recording holds no request with a conversation to the Anthropic, "
                "OpenAI (Chat Completions, Responses) or Gemini APIs",
            )
        key = f"cassette:{file_key_of(path)}"
        picked = [len(calls) - 1] if self.which == "last" else list(range(len(calls)))
        return [self._session(path, key, recorder, calls, k, others) for k in picked]

    def _session(
        self,
        path: str,
        key: str,
        recorder: str,
        calls: list[Call],
        k: int,
        others: list[dict[str, Any]],
    ) -> ImportedSession:
        call = calls[k]
        rec, read = call.http, call.read
        b = SessionBuilder(f"{key}#{rec.index}", path, self.name)
        meta = _conversation(b, path, calls, k)
        b.metadata = {
            **meta,
            "interaction": rec.index,
            "uri": rec.uri,
            "wire": call.wire,
            "recorder": recorder,
            "request": {k2: v for k2, v in read.request.items() if k2 not in _CONVERSATION},
            "request_body": _request_as_recorded(rec),
        }
        if rec.status is not None:
            b.metadata["status"] = rec.status
        if others:
            b.metadata["other_exchanges"] = others
        response = read.response
        if isinstance(response.body, Mapping):
            b.metadata["response"] = response.body
            usage = _usage(read.provider, response.body)
            if usage is not None:
                # What the provider billed for exactly this request: the measured
                # basis for the session at its HEAD.
                b.metadata["usage"] = usage
        if response.streamed:
            b.metadata["response_streamed"] = True
            b.metadata["response_complete"] = response.complete
            b.metadata["response_body"] = _text(rec, "response")
        return b.build()
