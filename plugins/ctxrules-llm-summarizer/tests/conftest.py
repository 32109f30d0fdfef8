"""A loopback HTTP server that answers the SDKs with scripted, recorded-style replies."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Seen:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Loopback:
    """127.0.0.1 on a random port; each POST gets the next of ``replies`` (status, JSON
    body), the last one repeating."""

    url: str
    replies: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    state: Loopback

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            state.seen.append(
                Seen(
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    json.loads(raw) if raw else None,
                )
            )
            status, body = state.replies[min(len(state.seen), len(state.replies)) - 1]
            out = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = Loopback(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
