"""A headless Chromium for the viewer's tests, driven over the DevTools protocol.

The browser is Debian's ``chromium`` package (``make setup`` installs it with apt-get
when it is missing; ``$CTXRULES_CHROMIUM`` names another binary).  It is started with
``--remote-debugging-pipe``: the protocol runs over two pipes (commands on fd 3, answers
and events on fd 4, each message ending in a NUL byte), so nothing listens on a port and
no client library is needed.  Host names other than the loopback addresses resolve to
nothing (``--host-resolver-rules``) and background services are off, so a page that
tried to load something from the network would fail, and the tests see every request it
made (``Page.requests``).  Runs as root need ``--no-sandbox``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["BrowserError", "Chromium", "Page", "find_chromium"]

FLAGS = (
    "--headless",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication",
    "--metrics-recording-only",
    "--password-store=basic",
    "--use-mock-keychain",
    "--mute-audio",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
    "--window-size=1400,1000",
)


class BrowserError(RuntimeError):
    """The browser answered a command with an error, died, or timed out."""


def find_chromium() -> str | None:
    """The Chromium binary: ``$CTXRULES_CHROMIUM``, else ``chromium`` on PATH."""
    named = os.environ.get("CTXRULES_CHROMIUM")
    if named:
        return named
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _above(fd: int, low: int = 10) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, low)
    os.close(fd)
    return moved


class Chromium:
    """One headless browser process; ``page()`` opens a tab, ``close()`` ends it."""

    def __init__(self, binary: str):
        self.profile = Path(tempfile.mkdtemp(prefix="ctxrules-chromium-"))
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The child's ends move above 3 and 4; bash puts them there and runs the browser
        # (no preexec_fn, unsafe with threads; dash takes one-digit descriptors only).
        to_browser_r, from_browser_w = _above(to_browser_r), _above(from_browser_w)
        argv = [binary, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe"]
        if os.geteuid() == 0:
            argv.append("--no-sandbox")
        argv.append("about:blank")
        self.log = open(self.profile / "stderr.log", "wb")
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w}', *argv],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            pass_fds=(to_browser_r, from_browser_w),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        try:
            self.call("Target.getBrowserContexts", timeout=60)  # answers once it is up
        except BaseException:
            self.close()
            raise

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium exited: {self.stderr()[-2000:]}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout: float = 30,
    ) -> dict[str, Any]:
        """Send one command and return its result (events read meanwhile are kept)."""
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == ident:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return dict(answer.get("result", {}))
            if "method" in answer:
                self.events.append(answer)

    def pump(self, seconds: float) -> None:
        """Read events for up to ``seconds`` (returns early when none are waiting)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._from_browser], [], [], 0.05)
            if not ready and b"\0" not in self._buffer:
                return
            self.events.append(self._read(deadline + 5))

    def page(self) -> Page:
        """A new tab with the page, runtime, log and network domains enabled."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session, target)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(f"{domain}.enable")
        return page

    def stderr(self) -> str:
        """What the browser wrote to its output so far."""
        self.log.flush()
        return (self.profile / "stderr.log").read_text(errors="replace")

    def close(self) -> None:
        """End the browser and remove its profile."""
        try:
            if self.proc.poll() is None:
                try:
                    self.call("Browser.close", timeout=10)
                except BrowserError:
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One tab of a ``Chromium``."""

    def __init__(self, browser: Chromium, session: str, target: str):
        self.browser = browser
        self.session = session
        self.target = target

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """A command to this tab."""
        return self.browser.call(method, params, session=self.session, **kw)

    def _events(self, name: str) -> list[dict[str, Any]]:
        return [
            e["params"]
            for e in self.browser.events
            if e.get("method") == name and e.get("sessionId") == self.session
        ]

    def goto(self, url: str, timeout: float = 30) -> None:
        """Load ``url`` and wait for its load event (none when only its fragment changes)."""
        before = len(self._events("Page.loadEventFired"))
        if "loaderId" not in self.call("Page.navigate", {"url": url}):
            return  # within the document (only the #fragment changed): nothing loads
        deadline = time.monotonic() + timeout
        while len(self._events("Page.loadEventFired")) == before:
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not finish loading")
            self.browser.pump(0.2)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        """Evaluate ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"still false after {timeout} s: {expression}")
            self.browser.pump(0.1)

    def settle(self, timeout: float = 60) -> None:
        """Wait until the viewer has no answer in flight (its ``data-pending`` is 0)."""
        self.wait_for("document.documentElement.dataset.pending === '0'", timeout)

    def click(self, selector: str) -> None:
        """Click the middle of the first element matching ``selector`` with the mouse."""
        box = self.evaluate(
            f"""(() => {{
              const e = document.querySelector({json.dumps(selector)});
              if (!e) return null;
              e.scrollIntoView({{block: "center"}});
              const r = e.getBoundingClientRect();
              return {{x: r.left + r.width / 2, y: r.top + r.height / 2}};
            }})()"""
        )
        if not box:
            raise BrowserError(f"nothing matches {selector!r}")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box["x"], "y": box["y"], "button": "left", "clickCount": 1},
            )

    def screenshot(self, path: Path) -> Path:
        """Save a PNG of the whole page to ``path``."""
        data = self.call(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
        )["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def requests(self) -> list[str]:
        """The URLs of every request the tab made."""
        return [e["request"]["url"] for e in self._events("Network.requestWillBeSent")]

    def exceptions(self) -> list[str]:
        """Uncaught script errors in the tab."""
        return [
            str(e["exceptionDetails"].get("exception", {}).get("description") or e)
            for e in self._events("Runtime.exceptionThrown")
        ]

    def console(self) -> list[str]:
        """Console messages and browser log entries (CSP violations are reported here)."""
        out = [
            " ".join(str(a.get("value", a.get("description", ""))) for a in e.get("args", []))
            for e in self._events("Runtime.consoleAPICalled")
        ]
        out += [e["entry"].get("text", "") for e in self._events("Log.entryAdded")]
        return out
