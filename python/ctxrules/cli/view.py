"""``ctxrules view [SESSION]``: a web page for people, served on this machine only.

The page shows a session's history graph (branches with their ``< N/M >`` switchers,
tool calls under the turn that made them, sub-agent frames, forks, merges, attach
pointers, compaction boundaries), the commit at each turn of the selected branch (items
with their state, tokens, reason and ``attached_from``, and what each rule did), the
diff of two commits, the usage record split by category, and the request rendered for a
chosen provider with its predicted cache read.  It reads JSON answers
(``ctxrules.cli.viewdata``) made by the same functions as the commands' ``--json``.

The server listens on a loopback address only (``--host`` refuses any other), answers
only requests whose ``Host`` names that address (so another site cannot reach it through
DNS rebinding) and that no other site's page made (``Origin``, ``Sec-Fetch-Site``),
serves nothing but the page's three files, all shipped in the package, and sends a
Content-Security-Policy that allows scripts, styles and requests from itself alone.  It
only reads the store (``store.ReadOnlyView``: commits made for answers stay in memory),
answers on a bounded pool of threads each with its own store connection, keeps idle
connections in one selector with a timeout, and drops clients that go away quietly.
The page builds its elements with ``textContent``: transcript text is never parsed as
HTML.

``--export FILE.html`` writes one self-contained file instead: the page, its script and
style inline (allowed by their hashes in the file's own policy) and the answers for the
session's HEAD embedded as JSON (``<`` ``>`` ``&`` escaped, so no text can close the
element).  ``--json`` prints those answers.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import errno
import functools
import hashlib
import ipaddress
import queue
import selectors
import socket
import sys
import threading
import time
import traceback
import webbrowser
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import msgspec

from ..errors import ConfigError, CtxrulesError, NotFoundError
from ..model import ContextCommit
from ..outfiles import OutputFile
from ..store import open_store
from ._common import add_now_option, now_of, port_number, print_json, subcommand
from ._store import add_config_options, add_id_argument, add_store_option, config_of, store_of
from ._terminal import echo
from .commit import diff_json
from .log import log_json
from .sessions import session_json, session_title
from .viewdata import ENDPOINTS, TIMELINE_TURNS, ViewData, commit_answer, request_key

__all__ = [
    "DEFAULT_PORT",
    "ViewerServer",
    "add_parser",
    "asset",
    "export_answers",
    "export_html",
    "is_export",
    "iter_answers",
    "loopback_host",
    "run",
    "write_export",
]

DEFAULT_PORT = 8742

#: The page's files (in ``ctxrules/data/viewer``), by the path the server gives them.
ASSETS: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/viewer.js": ("viewer.js", "text/javascript; charset=utf-8"),
    "/viewer.css": ("viewer.css", "text/css; charset=utf-8"),
}

#: What the served page may load: its own files and answers, nothing else.
SERVED_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

#: What an exported page carries in its head, so a later export knows the file is ours.
EXPORT_MARK = '<meta name="generator" content="ctxrules view --export">'
#: How the data element of an exported page starts (pages of older versions too).
_DATA_START = '{"format":"ctxrules-view/1","session":'

#: The tags of index.html that an export replaces with the inline script and style.
_STYLE_TAG = '<link rel="stylesheet" href="/viewer.css">'
_SCRIPT_TAG = '<script src="/viewer.js" defer></script>'


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``view`` subcommand."""
    p = subcommand(
        sub,
        "view",
        run,
        description="Serve a web page on this machine only (127.0.0.1) that shows a "
        "session's history graph, the commit at each turn of a branch with its items "
        "and what each rule did, the diff of two commits, the usage by category and the "
        "request rendered for a provider with its predicted cache read.  Click a "
        "conversation node to look at its turn.  The page makes the commit at a turn "
        "that has none stored and keeps it in memory: the viewer never writes the "
        "store.  --export writes one "
        "self-contained HTML file of the session at its HEAD for sharing instead.",
        examples="""
ctxrules view                                  # pick a session on the page
ctxrules view s_a5a2 --port 8800               # http://127.0.0.1:8800/ (Ctrl-C stops)
ctxrules view s_a5a2 --preset aggressive --now 2026-01-01T00:00:00Z
ctxrules view s_a5a2 --export s_a5a2.html      # one file: the page and its data, no server
ctxrules view s_a5a2 --json                    # the data an export embeds
""",
    )
    add_id_argument(
        p,
        "session",
        kind="session",
        nargs="?",
        default=None,
        help="the session to open, an id or unique start of one (default: choose on the page)",
    )
    p.add_argument(
        "--port",
        type=port_number,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"port to serve on (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDR",
        help="loopback address to serve on (default 127.0.0.1; ::1 works; no other is allowed)",
    )
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.add_argument(
        "--export",
        metavar="FILE",
        default=None,
        help="write one self-contained HTML file of SESSION at its HEAD instead of serving; "
        "an existing file is replaced only if it is such a page",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="let --export replace an existing file that is not a page it wrote",
    )
    p.add_argument(
        "--json", action="store_true", help="print the data an export embeds instead of serving"
    )
    p.add_argument(
        "--turns",
        type=int,
        default=TIMELINE_TURNS,
        metavar="N",
        help=f"how many last turns of a branch the timeline shows (default {TIMELINE_TURNS}; "
        "0: all)",
    )
    add_now_option(p, "clock for the rules and the next request (default: now)")
    add_config_options(p)
    add_store_option(p)


def loopback_host(text: str) -> str:
    """``text`` as an address if it is a loopback one (``localhost`` is 127.0.0.1).

    ``ConfigError`` for anything else: the page shows transcripts and the server has
    no authentication, so it serves this machine only.
    """
    if text.strip().lower() == "localhost":
        return "127.0.0.1"
    hint = "use 127.0.0.1 or ::1; to share a session, write a file with --export"
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        raise ConfigError(
            f"--host {text!r} is not an IP address; the viewer serves a loopback address only",
            hint=hint,
        ) from None
    if not address.is_loopback:
        raise ConfigError(
            f"--host {text} is not a loopback address: the viewer serves this machine only",
            hint=hint,
        )
    return str(address)


def asset(name: str) -> str:
    """The text of one of the page's files shipped in ``ctxrules/data/viewer``."""
    return (resources.files("ctxrules.data") / "viewer" / name).read_text(encoding="utf-8")


# -- the server -------------------------------------------------------------------------------


class ViewerServer(HTTPServer):
    """The page's HTTP server on a loopback address (see the module docstring);
    ``url`` is the page's address once bound.

    A connection waits for its request in one selector (no thread per idle
    connection: at most ``MAX_WAITING`` wait, the oldest closed beyond, each for at
    most ``IDLE_TIMEOUT_S``); a request is answered by one of ``workers`` threads, side
    by side (``ViewData`` reads through a ``ReadOnlyView`` of the store, one connection
    per thread when it was given an opener: no lock is shared by the requests).  A
    client that goes away mid-answer is dropped quietly.
    """

    #: Seconds a connection may stay silent: waiting for its request, or mid-request.
    IDLE_TIMEOUT_S = 15.0
    #: The most connections waiting for their request at once.
    MAX_WAITING = 256
    #: Threads answering requests (at most this many requests are worked on at once).
    WORKERS = 8

    def __init__(
        self,
        data: ViewData,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        workers: int = WORKERS,
    ):
        host = loopback_host(host)
        if ":" in host:
            self.address_family = socket.AF_INET6
        self.data = data
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"port {port} on {host} is in use",
                    hint="pass --port N for another one, or --port 0 for any free port",
                ) from None
            raise
        bound = self.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{bound}/"
        names = {f"{shown}:{bound}", f"localhost:{bound}"}
        if host == "127.0.0.1":
            names.add(f"127.0.0.1:{bound}")
        self.hosts = {n.lower() for n in names}
        self.origins = {f"http://{n}" for n in self.hosts}
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="ctxrules-view")
        self._doors = _WaitingRoom(self)

    def answer(self, name: str, params: Mapping[str, str]) -> tuple[int, Any]:
        """``(HTTP status, JSON-able body)`` of a request of the page."""
        if name not in ENDPOINTS:
            return 404, {"error": f"unknown request {name!r}"}
        try:
            return 200, self.data.answer(name, params)
        except NotFoundError as exc:
            return 404, {"error": str(exc)}
        except CtxrulesError as exc:
            return 400, {"error": str(exc)}
        except Exception as exc:  # a bug: say so on the page, the traceback on stderr
            traceback.print_exc()
            return 500, {"error": f"internal error: {type(exc).__name__}: {exc}"}

    # -- connections: waiting in a selector, answered by the pool -----------------------
    def process_request(self, request: Any, client_address: Any) -> None:
        self._doors.admit(request, client_address)

    def _answer_one(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(self.IDLE_TIMEOUT_S)
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return  # the client went away or fell silent: nothing to report
        super().handle_error(request, client_address)

    def server_close(self) -> None:
        super().server_close()
        self._doors.close()
        self._pool.shutdown(wait=True, cancel_futures=True)


class _WaitingRoom:
    """Connections waiting for their request, in one selector on one thread: a
    readable one goes to the server's pool; one silent past the idle timeout, or the
    oldest when too many wait, is closed."""

    def __init__(self, server: ViewerServer):
        self.server = server
        self._selector = selectors.DefaultSelector()
        self._new: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._since: dict[Any, float] = {}  # waiting connection → when it came
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="ctxrules-view-wait", daemon=True)
        self._thread.start()

    def admit(self, request: Any, client_address: Any) -> None:
        self._new.put((request, client_address))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def _run(self) -> None:
        timeout = self.server.IDLE_TIMEOUT_S
        while not self._closed:
            for key, _ in self._selector.select(timeout=min(1.0, timeout)):
                if key.data is None:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                    continue
                self._selector.unregister(key.fileobj)
                self._since.pop(key.fileobj, None)
                self.server._pool.submit(self.server._answer_one, key.fileobj, key.data)
            while True:
                try:
                    request, address = self._new.get_nowait()
                except queue.Empty:
                    break
                self._since[request] = time.monotonic()
                self._selector.register(request, selectors.EVENT_READ, address)
            now = time.monotonic()
            waiting = sorted(self._since.items(), key=lambda kv: kv[1])
            excess = len(waiting) - self.server.MAX_WAITING
            for i, (request, since) in enumerate(waiting):
                if i < excess or now - since > timeout:
                    self._drop(request)

    def _drop(self, request: Any) -> None:
        self._since.pop(request, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(request)
        self.server.shutdown_request(request)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        self._thread.join(timeout=5)
        for request in list(self._since):
            self._drop(request)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "ctxrules-view"
    sys_version = ""

    def do_GET(self) -> None:
        self._serve(with_body=True)

    def do_HEAD(self) -> None:
        self._serve(with_body=False)

    def _refused(self) -> str | None:
        """Why another site's request is refused, if it is one.

        Another site's page can reach a loopback port through a name it controls that
        resolves here (DNS rebinding): its requests carry that name in Host.  A page of
        another origin that requests this origin directly says so in ``Origin`` (or, in
        any current browser, ``Sec-Fetch-Site: cross-site`` / ``same-site``)."""
        if self.headers.get("Host", "").lower() not in self.server.hosts:
            return "unknown Host"
        origin = self.headers.get("Origin")
        if origin is not None and origin.lower() not in self.server.origins:
            return "another origin"
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None and site.lower() not in ("same-origin", "none"):
            return "a request of another site"
        return None

    def _serve(self, *, with_body: bool) -> None:
        why = self._refused()
        if why is not None:
            self._send(403, f"{why}\n".encode(), "text/plain; charset=utf-8", with_body)
            return
        url = urlsplit(self.path)
        if url.path.startswith("/api/"):
            params = dict(parse_qsl(url.query, keep_blank_values=True))
            status, body = self.server.answer(url.path[len("/api/") :], params)
            self._send(status, msgspec.json.encode(body), "application/json", with_body)
            return
        if url.path in ASSETS:
            name, kind = ASSETS[url.path]
            self._send(200, asset(name).encode(), kind, with_body)
            return
        self._send(404, b"not found\n", "text/plain; charset=utf-8", with_body)

    def _send(self, status: int, body: bytes, kind: str, with_body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", SERVED_POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: stderr gets the command's own lines and bugs' tracebacks, not one per request


# -- the export -------------------------------------------------------------------------------


def iter_answers(data: ViewData, session: str) -> Iterator[tuple[str, Any]]:
    """The answers an exported file embeds, one ``(request_key, value)`` at a time (an
    export writes each as it comes: memory holds one answer, not the file): the
    session, its graph and every node, the timeline at HEAD with each commit and each
    commit's diff against the one before, the statistics at HEAD and the request at
    HEAD for every provider.  Each value is ``{"ok": answer}`` or ``{"error": message}``,
    as the server would answer.

    Each piece is read once: the nodes' answers are ``ctxrules log --json``'s list, and
    the commits' and diffs' answers are made from the commits the timeline holds."""

    def ok(name: str, answer: Any, **params: str) -> tuple[str, Any]:
        return request_key(name, params), {"ok": answer}

    def ask(name: str, **params: str) -> tuple[str, Any]:
        try:
            return ok(name, data.answer(name, params), **params)
        except CtxrulesError as exc:
            return request_key(name, params), {"error": str(exc)}

    yield ask("config")
    info = data.store.get_session(session)
    # The file shares one session, not the names of the store's others.
    yield ok("sessions", [session_json(info, session_title(data.store, info))])
    head = info.head or ""
    commits: list[ContextCommit] = []
    try:
        timeline, commits = data.timeline(session, head or None)
        yield ok("timeline", timeline, session=session, head=head)
    except CtxrulesError as exc:
        yield request_key("timeline", {"session": session, "head": head}), {"error": str(exc)}
    yield ask("graph", session=session)  # after the timeline: it shows the commits made
    for node in log_json(data.store, session):
        yield ok("node", node, session=session, id=str(node["id"]))
    for i, commit in enumerate(commits):
        yield ok("commit", commit_answer(commit), session=session, id=commit.id)
        if i:
            before = commits[i - 1]
            yield ok("diff", diff_json(before, commit), session=session, a=before.id, b=commit.id)
    del commits
    yield ask("stats", session=session, head=head)
    for provider in data.providers:
        yield ask("render", session=session, node=head, provider=provider)


def export_answers(data: ViewData, session: str) -> dict[str, Any]:
    """Every answer of ``iter_answers`` in one mapping (what ``--json`` prints)."""
    return dict(iter_answers(data, session))


def _embedded_json(obj: Any) -> str:
    # JSON inside <script type="application/json">: no "<" may appear, so no text can
    # end the element ("</script") or open a comment; ">" and "&" go too, for any reader
    # that treats the element differently.  \u escapes are valid JSON for the same text.
    text = msgspec.json.encode(obj).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _export_chunks(answers: Iterable[tuple[str, Any]], session: str) -> Iterator[str]:
    """The exported page in pieces: the page up to the data, each answer, the rest."""
    script, style = asset("viewer.js"), asset("viewer.css")
    # Our files, checked anyway: either tag inside would end the inline element early.
    if "</script" in script.lower() or "</style" in style.lower():
        raise ConfigError("the viewer's files contain a closing tag; they cannot be inlined")
    page = asset("index.html")
    policy = (
        f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n{EXPORT_MARK}'
    for tag in (_STYLE_TAG, _SCRIPT_TAG, "<head>"):
        if tag not in page:
            raise ConfigError(f"the viewer's index.html lacks {tag!r}; it cannot be exported")
    page = page.replace("<head>", f"<head>\n{meta}", 1).replace(
        _STYLE_TAG, f"<style>{style}</style>", 1
    )
    before, _, after = page.partition(_SCRIPT_TAG)
    yield before
    yield f'<script type="application/json" id="ctxrules-data">{_DATA_START}'
    yield f'{_embedded_json(session)},"answers":{{'
    for i, (key, value) in enumerate(answers):
        yield ("," if i else "") + f"{_embedded_json(key)}:{_embedded_json(value)}"
    yield f"}}}}</script>\n<script>{script}</script>"
    yield after


def export_html(answers: Mapping[str, Any], session: str) -> str:
    """One self-contained HTML page of ``answers`` (``export_answers``): the page's
    script and style inline, allowed by their hashes in a Content-Security-Policy
    ``<meta>`` that allows nothing else (no requests, no other script)."""
    return "".join(_export_chunks(answers.items(), session))


def is_export(path: str | Path) -> bool:
    """Whether the file at ``path`` is a page ``view --export`` wrote, by its content
    (read a piece at a time)."""
    marks = (EXPORT_MARK.encode(), _DATA_START.encode())
    keep = max(len(m) for m in marks)
    with open(path, "rb") as fh:
        head = fh.read(1 << 12)
        if not head.lstrip().lower().startswith(b"<!doctype html"):
            return False
        tail = b""
        chunk = head
        while chunk:
            window = tail + chunk
            if any(m in window for m in marks):
                return True
            tail = window[-keep:]
            chunk = fh.read(1 << 20)
    return False


def write_export(data: ViewData, session: str, out: OutputFile) -> int:
    """Write the exported page of ``session`` into ``out`` (then renamed into place),
    one answer at a time; returns its size in bytes."""
    size = 0
    for chunk in _export_chunks(iter_answers(data, session), session):
        raw = chunk.encode()
        out.write(raw)
        size += len(raw)
    out.commit()
    return size


# -- the command ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules view``; returns the exit code (serving: when stopped)."""
    config = config_of(args)
    # The export's file is checked (and locked) before anything is read.
    out = (
        OutputFile(
            args.export,
            kind="a page ctxrules view exported",
            ours=is_export,
            force=args.force,
            option="--export",
        )
        if args.export
        else None
    )
    try:
        with store_of(args) as store:
            data = ViewData(
                store=store,
                config=config,
                now=now_of(args),
                session=args.session,
                timeline_turns=max(0, args.turns),
            )
            if out is not None or args.json:
                session = args.session or _only_session(store)
                data.session = session
                if args.json:
                    answers = export_answers(data, session)
                    print_json({"session": session, "answers": answers})
                if out is not None:
                    if args.json:
                        size = 0
                        for chunk in _export_chunks(answers.items(), session):
                            out.write(raw := chunk.encode())
                            size += len(raw)
                        out.commit()
                    else:
                        size = write_export(data, session, out)
                        echo(f"wrote {args.export} ({size:,} bytes): session {session}")
                return 0
            return _serve(data, args)
    finally:
        if out is not None:
            out.close()


def _serve(data: ViewData, args: argparse.Namespace) -> int:
    # Each thread answering requests reads through a connection of its own.
    served = ViewData(
        store=data.store,
        config=data.config,
        now=data.now,
        session=data.session,
        timeline_turns=data.timeline_turns,
        opener=functools.partial(open_store, args.store, create=False),
    )
    server = ViewerServer(served, args.host, args.port)
    url = server.url + (f"#session={quote(args.session)}" if args.session else "")
    print(f"ctxrules view: serving {url} (this machine only; Ctrl-C stops)", flush=True)
    if args.open:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("ctxrules view: stopped", file=sys.stderr)
    finally:
        server.server_close()
        served.close()
    return 0


def _only_session(store: Any) -> str:
    sessions = store.list_sessions()
    if len(sessions) != 1:
        raise ConfigError(
            f"the store holds {len(sessions)} sessions: name the one to export",
            where=store.location,
            hint="`ctxrules sessions` lists them",
        )
    return str(sessions[0].id)
