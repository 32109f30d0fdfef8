"""A loopback HTTP server for the tests that drive an official SDK or an agent framework.

It binds 127.0.0.1 on a free port, records every request (method, path, headers, JSON
body) and answers from a queue of ``Reply`` s — JSON, or server-sent events for the
streaming paths — or from a ``responder`` that picks the reply from the request.  Use
it as a context manager: the server stops when the block ends.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One answer: ``body`` (JSON-able, or bytes as they are) with ``status``, or
    ``events`` — ``(name, data)`` pairs sent as server-sent events (``name`` ``""``:
    a ``data:`` line only; ``data`` a str is sent as it is, e.g. ``[DONE]``)."""

    body: Any = None
    status: int = 200
    events: Sequence[tuple[str, Any]] | None = None

    def encode(self) -> tuple[bytes, str]:
        if self.events is not None:
            out = []
            for name, data in self.events:
                line = data if isinstance(data, str) else json.dumps(data)
                out.append((f"event: {name}\n" if name else "") + f"data: {line}\n\n")
            return "".join(out).encode(), "text/event-stream"
        if isinstance(self.body, bytes):
            return self.body, "application/json"
        return json.dumps(self.body).encode(), "application/json"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Loopback:
    """The running server: ``url``, what it ``seen``, what it answers next."""

    url: str = ""
    replies: list[Reply] = field(default_factory=list)
    responder: Callable[[Seen], Reply] | None = None
    seen: list[Seen] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    def reply(self, *replies: Reply | dict[str, Any]) -> Loopback:
        """Queue replies (a dict is a 200 JSON reply)."""
        self.replies.extend(r if isinstance(r, Reply) else Reply(r) for r in replies)
        return self

    def __enter__(self) -> Loopback:
        state = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self, method: str) -> None:
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                seen = Seen(
                    method, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                state.seen.append(seen)
                if state.responder is not None:
                    reply = state.responder(seen)
                elif state.replies:
                    reply = state.replies.pop(0)
                else:
                    reply = Reply({"error": {"message": "no reply queued"}}, status=500)
                data, kind = reply.encode()
                self.send_response(reply.status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                self._answer("POST")

            def do_GET(self) -> None:
                self._answer("GET")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
