"""A loopback upstream that replays recorded responses, and clients that keep the bytes
they exchange: the pieces of the proxy tests (servers on 127.0.0.1, started and
stopped by the tests).

``Upstream`` answers each call with the next recorded interaction of its wire, status,
headers and body as recorded; a server-sent event stream goes out one event at a
time, each written as it comes, so streaming is exercised for real.  It keeps what it
received and what it sent (``log``), and ``write_cassette`` writes that log as a VCR
cassette, which ``ctxrules import --format traffic`` reads.

``Tee`` / ``AsyncTee`` are httpx2 transports (the vendors' SDKs use httpx2) that keep
the request each client sent and the raw response bytes it received.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import yaml
from aiohttp import web

from ctxrules.importers.traffic import wire_of

#: Response headers replayed (the rest describe the recording's connection).
REPLAYED = (
    "content-type",
    "content-encoding",
    "request-id",
    "x-request-id",
    "anthropic-ratelimit-requests-limit",
)


@dataclass
class Recorded:
    """One recorded response to replay."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Exchange:
    """One call as the upstream saw it."""

    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response: bytes = b""


def _header(headers: Any, name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return str(value[0] if isinstance(value, list) else value)
    return None


def recorded_responses(path: Path) -> dict[str, list[Recorded]]:
    """A cassette's responses to conversation calls, by wire, in order."""
    doc = yaml.safe_load(path.read_text())
    out: dict[str, list[Recorded]] = {}
    for it in doc["interactions"]:
        req, resp = it["request"], it["response"]
        uri = req["uri"]
        wire = wire_of("/" + uri.split("://", 1)[-1].split("/", 1)[-1])
        if wire is None:
            continue
        body = resp.get("parsed_body")
        if body is not None:
            import json

            raw = json.dumps(body).encode()
        else:
            raw = resp["body"]["string"]
            raw = raw if isinstance(raw, bytes) else raw.encode()
        headers = {h: v for h in REPLAYED if (v := _header(resp.get("headers"), h)) is not None}
        if body is not None:
            headers["content-type"] = "application/json"
            headers.pop("content-encoding", None)
        status = resp.get("status", {})
        out.setdefault(wire, []).append(
            Recorded(
                int(status.get("code", 200)) if isinstance(status, dict) else 200, headers, raw
            )
        )
    return out


def recorded_requests(path: Path) -> list[tuple[str, dict[str, Any], str]]:
    """A cassette's conversation requests: ``(wire, body, uri)`` in order."""
    import json

    doc = yaml.safe_load(path.read_text())
    out = []
    for it in doc["interactions"]:
        req = it["request"]
        uri = req["uri"]
        wire = wire_of("/" + uri.split("://", 1)[-1].split("/", 1)[-1])
        if wire is None:
            continue
        body = req.get("parsed_body")
        if body is None:
            raw = req["body"]
            raw = raw.get("string") if isinstance(raw, dict) else raw
            body = json.loads(raw)
        out.append((wire, body, uri))
    return out


class Upstream:
    """The replaying server (see the module docstring); ``script`` maps a wire to the
    responses to give, in order.  ``hold`` (an ``asyncio.Event`` factory result set by
    the test) makes every answer wait for it; ``cut`` ends streams early."""

    def __init__(self, script: dict[str, list[Recorded]] | None = None, *, event_pause: float = 0):
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.log: list[Exchange] = []
        self.event_pause = event_pause
        self.handler: Any = None  # a coroutine (request) -> response, to replace replay
        self.cancelled = 0
        self.loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self.port = 0

    def __enter__(self) -> Upstream:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)

        async def start() -> None:
            assert self._runner is not None
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        self.loop.run_until_complete(start())
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._runner is not None
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        ex = Exchange(
            request.method,
            request.raw_path,
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.raw_headers],
            body,
        )
        self.log.append(ex)
        try:
            if self.handler is not None:
                return await self.handler(request, ex)
            wire = wire_of(request.raw_path)
            queue = self.script.get(wire or "", [])
            if not queue:
                return web.Response(status=599, text="nothing left to replay")
            rec = queue.pop(0)
            return await self.send(request, ex, rec)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def send(self, request: web.Request, ex: Exchange, rec: Recorded) -> web.StreamResponse:
        """Send a recorded response: a stream one event at a time, else in one write."""
        ex.status, ex.response_headers = rec.status, dict(rec.headers)
        resp = web.StreamResponse(status=rec.status, headers=rec.headers)
        await resp.prepare(request)
        streamed = "event-stream" in rec.headers.get("content-type", "")
        parts = rec.body.split(b"\n\n") if streamed else [rec.body]
        for i, part in enumerate(parts):
            chunk = part + (b"\n\n" if streamed and i < len(parts) - 1 else b"")
            if not chunk:
                continue
            await resp.write(chunk)
            ex.response += chunk
            if streamed and self.event_pause:
                await asyncio.sleep(self.event_pause)
        await resp.write_eof()
        return resp


def write_cassette(log: list[Exchange], path: Path, host: str = "https://api.example.com") -> Path:
    """The upstream's log as a VCR cassette (what ``--format traffic`` imports)."""
    interactions = []
    for ex in log:
        interactions.append(
            {
                "request": {
                    "method": ex.method,
                    "uri": host + ex.path,
                    "headers": {k: [v] for k, v in ex.headers},
                    "body": ex.body.decode(),
                },
                "response": {
                    "status": {"code": ex.status, "message": ""},
                    "headers": {k: [v] for k, v in ex.response_headers.items()},
                    "body": {"string": ex.response.decode("utf-8", "surrogateescape")},
                },
            }
        )
    path.write_text(yaml.safe_dump({"interactions": interactions, "version": 1}))
    return path


class _Kept:
    def __init__(self) -> None:
        self.requests: list[tuple[list[tuple[str, str]], bytes]] = []
        self.responses: list[bytes] = []


class _Stream(httpx2.SyncByteStream):
    def __init__(self, inner: Any, sink: list[bytes], index: int):
        self.inner, self.sink, self.index = inner, sink, index

    def __iter__(self):
        for chunk in self.inner:
            self.sink[self.index] += chunk
            yield chunk

    def close(self) -> None:
        self.inner.close()


class _AsyncStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, sink: list[bytes], index: int):
        self.inner, self.sink, self.index = inner, sink, index

    async def __aiter__(self):
        async for chunk in self.inner:
            self.sink[self.index] += chunk
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class Tee(httpx2.BaseTransport, _Kept):
    """A transport keeping each request as sent and each response's raw bytes."""

    def __init__(self) -> None:
        _Kept.__init__(self)
        self.inner = httpx2.HTTPTransport()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(
            (
                [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
                request.read(),
            )
        )
        resp = self.inner.handle_request(request)
        self.responses.append(b"")
        resp.stream = _Stream(resp.stream, self.responses, len(self.responses) - 1)
        return resp

    def close(self) -> None:
        self.inner.close()


class AsyncTee(httpx2.AsyncBaseTransport, _Kept):
    """``Tee`` for the async clients."""

    def __init__(self) -> None:
        _Kept.__init__(self)
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(
            (
                [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
                await request.aread(),
            )
        )
        resp = await self.inner.handle_async_request(request)
        self.responses.append(b"")
        resp.stream = _AsyncStream(resp.stream, self.responses, len(self.responses) - 1)
        return resp

    async def aclose(self) -> None:
        await self.inner.aclose()
