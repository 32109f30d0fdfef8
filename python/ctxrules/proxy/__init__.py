"""``ctxrules proxy``: any agent's live traffic recorded into the graph, and optionally
shaped by the rules, without a code change (docs/proxy.md).

A loopback HTTP proxy for the four wires — Anthropic Messages (and
``count_tokens``), OpenAI Chat Completions and Responses, Gemini ``generateContent``
and ``streamGenerateContent`` — that an agent reaches by its base URL setting.

* **observe** (the default) forwards every byte unchanged, streams as they arrive,
  and records each call into the store off the hot path (``_recorder``): the
  request's conversation and the answer as nodes of a session, grouped as
  ``ctxrules.importers.traffic`` groups them — the same graph ``ctxrules import
  --format traffic`` makes of a cassette of the same calls;
* **apply** sends the request rendered from the session's commit under the rules
  instead (``_apply``), and answers ``count_tokens`` from the estimator.

``Proxy`` runs one: ``start()`` serves from a background thread (tests, embedding),
``serve_forever()`` from the calling thread (the command line).  It listens on
loopback only unless ``allow_remote`` is given.  It needs the optional extra
``ctxrules[proxy]`` (aiohttp).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import threading
from collections.abc import Callable
from typing import Any, Literal

import msgspec
from aiohttp import web

from ..config import PipelineConfig
from ..errors import ConfigError
from ..store import CommitStore
from ._apply import Applier, count_tokens
from ._recorder import KV_NAMESPACE, Call, Recorder
from ._server import ProxyServer, vendor_of

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_UPSTREAMS",
    "KV_NAMESPACE",
    "Call",
    "Proxy",
    "ProxyConfig",
    "Recorder",
    "count_tokens",
    "is_loopback",
    "vendor_of",
]

#: The port ``ctxrules proxy`` listens on unless told otherwise.
DEFAULT_PORT = 8788
#: Where each vendor's calls go unless told otherwise.
DEFAULT_UPSTREAMS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "gemini": "https://generativelanguage.googleapis.com",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ProxyConfig(msgspec.Struct, kw_only=True):
    """How a proxy runs.

    ``port`` 0 takes any free port (``Proxy.url`` says which).  ``upstreams`` maps
    ``anthropic`` / ``openai`` / ``gemini`` to base URLs (missing ones take
    ``DEFAULT_UPSTREAMS``).  ``config`` is the rule configuration of apply mode
    (``None``: ``find_config()``).  ``allow_remote`` lets ``host`` be an address other
    machines reach — the proxy has no authentication of its own, so only do that on
    a network you trust.
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    upstreams: dict[str, str] = {}
    mode: Literal["observe", "apply"] = "observe"
    config: PipelineConfig | None = None
    forward_count_tokens: bool = False
    allow_remote: bool = False


class Proxy:
    """A proxy recording into ``store`` (a location, or an open ``CommitStore``).

    ``log`` receives one line per event worth telling (a broken upstream, a call
    that could not be recorded); by default they go to standard error.
    """

    def __init__(
        self,
        config: ProxyConfig,
        store: str | CommitStore,
        *,
        log: Callable[[str], None] | None = None,
    ):
        if not is_loopback(config.host) and not config.allow_remote:
            raise ConfigError(
                f"the proxy listens on loopback only, not on {config.host!r}",
                where="--host",
                hint="use 127.0.0.1 (the default), or pass --allow-remote to expose it "
                "without authentication to every machine that reaches that address",
            )
        if config.mode not in ("observe", "apply"):
            raise ConfigError(
                f"unknown mode {config.mode!r}", where="--mode", hint="observe or apply"
            )
        self.config = config
        self.upstreams = {**DEFAULT_UPSTREAMS, **config.upstreams}
        self.recorder = Recorder(store, report=log)
        applier = Applier(self.recorder, config.config, log=log) if config.mode == "apply" else None
        self.server = ProxyServer(
            self.upstreams,
            self.recorder,
            applier=applier,
            forward_count_tokens=config.forward_count_tokens,
            log=log,
        )
        self.port = config.port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._stop_event: asyncio.Event | None = None

    @property
    def url(self) -> str:
        """The proxy's base URL (``http://127.0.0.1:PORT``)."""
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self.port}"

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.server.app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port, reuse_address=True)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def start(self) -> Proxy:
        """Serve from a background thread; returns once the proxy listens."""
        self.recorder.start()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._start())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_until_complete(self._wait_stopped())
                loop.run_until_complete(self._stop())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="ctxrules-proxy", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            self.recorder.stop()
            raise failure[0]
        return self

    async def _wait_stopped(self) -> None:
        self._stop_event = asyncio.Event()
        self._started.set()
        await self._stop_event.wait()

    def serve_forever(self, on_ready: Callable[[Proxy], None] | None = None) -> None:
        """Serve from the calling thread until interrupted (Ctrl-C), then write what is
        queued and stop."""
        self.recorder.start()
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._start())
            if on_ready is not None:
                on_ready(self)
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows
                loop.add_signal_handler(signal.SIGTERM, self._sigterm)
            loop.run_until_complete(self._wait_stopped())
        except KeyboardInterrupt:
            pass
        finally:
            try:
                loop.run_until_complete(self._stop())
            finally:
                loop.close()
                self.recorder.stop()

    def _sigterm(self) -> None:
        if self._stop_event is not None:
            self._stop_event.set()

    def flush(self, timeout: float | None = 30) -> bool:
        """Wait until every call so far is recorded; ``False`` on timeout."""
        return self.recorder.flush(timeout)

    def stop(self) -> None:
        """Stop serving, write what is queued, close the store the proxy opened."""
        if self._thread is not None:
            self._started.wait()
            loop, event = self._loop, self._stop_event
            if loop is not None and event is not None:
                loop.call_soon_threadsafe(event.set)
            self._thread.join()
            self._thread = None
        self.recorder.stop()

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
