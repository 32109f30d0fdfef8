"""The proxy's HTTP side: an aiohttp server on loopback, an aiohttp client upstream.

aiohttp because it is both halves in one dependency, streams in both directions
without buffering (``iter_any`` hands on each chunk as it arrives), parses HTTP in C,
and lets the client leave bodies compressed (``auto_decompress=False``) and headers as
given (``skip_auto_headers``), which byte-for-byte forwarding needs.  It is the
optional extra ``ctxrules[proxy]``, imported by this package only.

Every request is forwarded to the upstream of its vendor (by path and headers, see
``vendor_of``) with its bytes, method, path, query and headers unchanged but the
hop-by-hop ones (RFC 9110 7.6.1) and ``Host``; the response comes back the same way,
status, headers and bytes, each chunk written to the client as soon as it is read.
A conversation call is teed to the recorder when it ends (answered, failed, cut
short or abandoned by the client); the tee keeps the chunks and nothing else, so
recording costs the forwarding a list append per chunk.  A client that disconnects
cancels its handler (``handler_cancellation``), which closes the upstream request.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
from aiohttp import web

from ..importers.traffic import KEPT_HEADERS, SESSION_HEADERS, wire_of
from ._apply import Applier, count_tokens
from ._recorder import Call, Recorder

__all__ = ["HOP_BY_HOP", "ProxyServer", "vendor_of"]

#: Headers that belong to one connection, never forwarded (with ``Host``, which names
#: the upstream, and ``Content-Length``, which the body sets again: the same bytes).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
#: Request headers the recorder may see; credentials never leave the handler.
_RECORDED_REQUEST = frozenset({"content-encoding", *SESSION_HEADERS, *KEPT_HEADERS})
_RECORDED_RESPONSE = frozenset({"content-type", "content-encoding"})
#: The largest request body accepted (Claude Code sends megabytes of history).
MAX_REQUEST = 256 * 1024 * 1024
#: The largest response the tee keeps for recording; a longer one is forwarded whole
#: and recorded without its answer.
MAX_RECORDED = 64 * 1024 * 1024


def vendor_of(path: str, headers: dict[str, str]) -> str:
    """Which upstream serves a path: ``anthropic``, ``openai`` or ``gemini``."""
    wire = wire_of(path)
    if wire is not None:
        return "openai" if wire.startswith("openai") else wire
    p = path.split("?", 1)[0]
    if p.startswith(("/v1beta/", "/upload/")) or "x-goog-api-key" in headers:
        return "gemini"
    if "anthropic-version" in headers or "x-api-key" in headers or p.startswith("/v1/messages"):
        return "anthropic"
    return "openai"


def _error_body(vendor: str, status: int, message: str) -> bytes:
    """An error in the vendor's own envelope, so its SDK raises its usual error."""
    if vendor == "anthropic":
        body: Any = {"type": "error", "error": {"type": "api_error", "message": message}}
    elif vendor == "gemini":
        body = {"error": {"code": status, "message": message, "status": "UNAVAILABLE"}}
    else:
        body = {"error": {"message": message, "type": "proxy_error", "code": None}}
    return json.dumps(body).encode()


class ProxyServer:
    """The aiohttp application and its upstream client (``Proxy`` runs it)."""

    def __init__(
        self,
        upstreams: dict[str, str],
        recorder: Recorder,
        *,
        applier: Applier | None = None,
        forward_count_tokens: bool = False,
        log: Any = None,
    ):
        self.upstreams = {k: v.rstrip("/") for k, v in upstreams.items()}
        self.recorder = recorder
        self.applier = applier
        self.forward_count_tokens = forward_count_tokens
        self.log = log
        self.session: aiohttp.ClientSession | None = None
        self.app = web.Application(client_max_size=MAX_REQUEST)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)
        self.app.on_startup.append(self._open)
        self.app.on_cleanup.append(self._close)

    async def _open(self, _app: web.Application) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            cookie_jar=aiohttp.DummyCookieJar(),
        )

    async def _close(self, _app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Forward one request (see the module docstring)."""
        started = time.perf_counter()
        at = time.time()
        path = request.raw_path
        body = await request.read()
        headers: list[tuple[str, str]] = []
        lower: dict[str, str] = {}
        for k, v in request.raw_headers:
            key, value = k.decode("latin-1"), v.decode("latin-1")
            name = key.lower()
            lower.setdefault(name, value)
            if name not in HOP_BY_HOP:
                headers.append((key, value))
        vendor = vendor_of(path, lower)
        wire = wire_of(path)
        record = wire is not None and request.method == "POST"
        if (
            self.applier is not None
            and not self.forward_count_tokens
            and path.split("?", 1)[0].rstrip("/").endswith("/messages/count_tokens")
        ):
            status, answer = count_tokens(body)
            return web.Response(status=status, body=answer, content_type="application/json")
        original = body
        sent: dict[str, Any] | None = None
        if self.applier is not None and record:
            body, headers, sent = await self.applier.prepare(path, original, headers)
        call = Call(
            path=path,
            request=original,
            request_headers={k: v for k, v in lower.items() if k in _RECORDED_REQUEST},
            status=0,
            response=b"",
            response_headers={},
            at=at,
            sent=sent,
        )
        chunks: list[bytes] = []
        size = 0
        assert self.session is not None
        if record:  # counted from here, so a flush waits for a call still in flight
            self.recorder.begin()
        try:
            async with self.session.request(
                request.method,
                self.upstreams[vendor] + path,
                data=body,
                headers=headers,
                allow_redirects=False,
                compress=False,
            ) as up:
                call.status = up.status
                resp = web.StreamResponse(status=up.status, reason=up.reason)
                for k, v in up.raw_headers:
                    key = k.decode("latin-1")
                    name = key.lower()
                    if name in _RECORDED_RESPONSE:
                        call.response_headers.setdefault(name, v.decode("latin-1"))
                    if name not in HOP_BY_HOP or name == "content-length":
                        resp.headers.add(key, v.decode("latin-1"))
                await resp.prepare(request)
                try:
                    async for chunk in up.content.iter_any():
                        if call.first_byte is None:
                            call.first_byte = time.perf_counter() - started
                        await resp.write(chunk)
                        if record and size <= MAX_RECORDED:
                            chunks.append(chunk)
                            size += len(chunk)
                except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
                    # The upstream broke the stream: break the client's the same way
                    # (a clean end would tell it the answer was whole).
                    call.response = b"".join(chunks)
                    self._note(f"{path}: upstream stream broke: {exc}")
                    if request.transport is not None:
                        request.transport.close()
                    raise
                await resp.write_eof()
                return resp
        except asyncio.CancelledError:
            call.disconnected = True
            raise
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
            if call.status:
                raise
            call.status = 502
            message = f"ctxrules proxy: the upstream {self.upstreams[vendor]} is unreachable"
            self._note(message)
            return web.Response(
                status=502, body=_error_body(vendor, 502, message), content_type="application/json"
            )
        finally:
            call.latency = time.perf_counter() - started
            if record:
                if size <= MAX_RECORDED:
                    call.response = b"".join(chunks)
                else:
                    call.response = b""
                    self._note(f"{path}: response over {MAX_RECORDED:,} bytes, answer not recorded")
                self.recorder.submit(call, begun=True)

    def _note(self, line: str) -> None:
        if self.log is not None:
            self.log(f"ctxrules proxy: {line}")
