"""Response bodies as they travel: compressed, streamed, or plain JSON.

A recorded or proxied response is bytes: maybe ``gzip`` / ``deflate`` / ``br`` encoded, maybe a
stream — server-sent events for Anthropic, Chat Completions, Responses and Gemini
(``alt=sse``), or Gemini's JSON array of chunks.  ``read_response`` turns it into the
one JSON body the vendor would have answered without streaming, built from the
events the way the vendors' SDKs accumulate them (by ``ctxrules.providers.streams``,
the accumulators ``Engine.record`` reads a stream with):

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
import zlib
from typing import Any

import msgspec

from ..providers.streams import assemble, json_value, sse_assemble

__all__ = ["ResponseRead", "brotli_missing", "decode_body", "read_response"]


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
    """The bytes of a body under its ``Content-Encoding`` (``gzip``, ``deflate``, ``br``,
    identity; several, comma-separated, undone last first); ``None`` for an encoding that
    cannot be undone here, or corrupt data.

    Recorders keep the header of a body they stored decoded (vcrpy with
    ``decode_compressed_response``): bytes that already are JSON or an event stream are
    taken as they are.  ``br`` needs the ``brotli`` package (``brotli_missing`` says when a
    body is left undecoded for want of it).
    """
    data: bytes | None = raw
    for enc in reversed([e.strip().lower() for e in encoding.split(",") if e.strip()]):
        data = _undo(enc, data) if data is not None else None
    return data


def brotli_missing(encoding: str) -> bool:
    """Whether a body of this ``Content-Encoding`` needs the ``brotli`` package and it is
    not installed (``pip install 'ctxrules[brotli]'``)."""
    return "br" in [e.strip().lower() for e in encoding.split(",")] and _brotli() is None


def _brotli() -> Any:
    try:
        # deferred: optional (the ``brotli`` extra); only a br-encoded body needs it
        import brotli  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        return None
    return brotli


def _decoded(data: bytes) -> bool:
    """Bytes that already are a JSON body or an event stream."""
    start = data.lstrip()[:6]
    return start[:1] in (b"{", b"[") or start.startswith((b"data:", b"event:"))


def _undo(enc: str, data: bytes) -> bytes | None:
    try:
        if enc == "identity":
            return data
        if enc in ("gzip", "x-gzip"):
            return data if _decoded(data) else gzip.decompress(data)
        if enc == "deflate":  # zlib-wrapped as the RFC says, raw deflate as servers do
            if _decoded(data):
                return data
            try:
                return zlib.decompress(data)
            except zlib.error:
                return zlib.decompress(data, -zlib.MAX_WBITS)
        if enc == "br":
            if _decoded(data):
                return data
            brotli = _brotli()
            return bytes(brotli.decompress(data)) if brotli is not None else None
    except (OSError, EOFError, zlib.error):
        return None
    except Exception as exc:  # brotli.error, which the module defines itself
        if type(exc).__module__.startswith(("brotli", "_brotli")):
            return None
        raise
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
        body, complete = sse_assemble(provider, text)
        return ResponseRead(body=body, streamed=True, complete=complete, error=_error(body))
    body = json_value(text)
    if provider == "gemini" and isinstance(body, list):  # a JSON-array stream
        merged, complete = assemble("gemini", [("", c) for c in body if isinstance(c, dict)])
        return ResponseRead(body=merged, streamed=True, complete=complete, error=_error(merged))
    if body is None:
        return ResponseRead()
    return ResponseRead(body=body, complete=True, error=_error(body))


def _error(body: Any) -> Any:
    return body.get("error") if isinstance(body, dict) else None
