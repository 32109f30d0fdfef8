"""Recording off the hot path: a queue drained by one writer thread.

The request handlers hand each finished call to ``Recorder.submit`` — a bounded
queue put that never blocks and never raises; a full queue drops the call and says
so.  The writer thread owns its own store connection: it takes what is queued (up to
``BATCH`` calls), parses each (``importers.traffic``: the importers' own readers),
plans the nodes each adds (``TrafficGraph``) and writes the batch in one transaction
(one sync to disk for the batch, which is what makes a thousand calls a second
possible on SQLite).  A batch that fails is written again call by call; a call that
still fails is reported and skipped.  So a busy store slows the recording, never the
forwarding, and a recording failure never fails a request.

Besides the graph, every call leaves a row under the store's key/value namespace
``proxy`` (``request/<session>/<time>``): status, what failed, latency, sizes — the
proxy's own log of what passed through, which ``docs/proxy.md`` describes.  An OpenAI
Responses answer also leaves its link (``response/<id>``: the id it continued and the
items it added), so a request naming it as ``previous_response_id`` continues its
session after the proxy restarts.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from ..errors import CtxrulesError, ImportFormatError, NotFoundError
from ..importers.traffic import FORMAT, Exchange, ResponseLink, Step, TrafficGraph, exchange_of
from ..store import CommitStore, open_store

__all__ = ["BATCH", "KV_NAMESPACE", "Call", "Recorder"]

#: Calls written per transaction at most.
BATCH = 256
#: The store's key/value namespace holding one row per proxied call.
KV_NAMESPACE = "proxy"
#: Calls waiting for the writer at most; more are dropped (and reported).
QUEUE_SIZE = 10_000


class Call(msgspec.Struct, kw_only=True):
    """One finished call as the handler saw it: bytes, the headers recording may read
    (never credentials: the handler filters them), status and timings (seconds)."""

    path: str
    request: bytes
    request_headers: dict[str, str]
    status: int
    response: bytes
    response_headers: dict[str, str]
    at: float
    latency: float = 0.0
    first_byte: float | None = None
    disconnected: bool = False
    sent: dict[str, Any] | None = None  # apply mode: what was sent instead


class Recorder:
    """The writer thread (see the module docstring); ``report`` receives one line per
    problem (default: standard error)."""

    def __init__(
        self,
        store: str | CommitStore,
        *,
        report: Callable[[str], None] | None = None,
        queue_size: int = QUEUE_SIZE,
    ):
        self._target = store
        self._queue: queue.Queue[Call | Callable[[], Any] | None] = queue.Queue(queue_size)
        self._report = report or (lambda line: print(line, file=sys.stderr, flush=True))
        self.recorded = 0
        self.failed = 0
        self.dropped = 0
        self._idle = threading.Condition()
        self._pending = 0
        self._store: CommitStore | None = None
        self._thread = threading.Thread(target=self._run, name="ctxrules-proxy-recorder")
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.graph = TrafficGraph(self._stored, self._link)

    # -- the handlers' side ------------------------------------------------------------
    def start(self) -> None:
        """Start the writer (opens the store; its error is raised here)."""
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def begin(self) -> None:
        """Count a call whose answer is still travelling: ``flush`` waits for it until
        its ``submit(call, begun=True)``, which every ``begin`` must be followed by (a
        handler calls it in ``finally``) — else the client may hold the whole answer
        while a flush finds nothing to wait for."""
        with self._idle:
            self._pending += 1

    def submit(self, call: Call, *, begun: bool = False) -> bool:
        """Queue a call for recording; ``False`` (and a report) when the queue is full.
        ``begun``: the call was counted by ``begin`` already."""
        if not begun:
            self.begin()
        try:
            self._queue.put_nowait(call)
        except queue.Full:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()
            self.dropped += 1
            self._report(f"ctxrules proxy: recording queue full, {call.path} not recorded")
            return False
        return True

    def run_in_writer(self, job: Callable[[], Any]) -> Any:
        """Run ``job`` on the writer thread (after what is queued) and return its result
        (apply mode writes the request there, so one thread writes the store)."""
        done = threading.Event()
        box: list[Any] = []

        def wrapped() -> None:
            try:
                box.append((True, job()))
            except BaseException as exc:
                box.append((False, exc))
            finally:
                done.set()

        self.begin()
        self._queue.put(wrapped)
        done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued or begun so far is written; ``False`` on
        timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def stop(self) -> None:
        """Write what is queued, then stop the writer and close its store."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    @property
    def store(self) -> CommitStore:
        """The writer's store (use it only from the writer thread, ``run_in_writer``)."""
        assert self._store is not None
        return self._store

    # -- the writer thread ------------------------------------------------------------
    def _stored(self, session_id: str) -> list[str] | None:
        try:
            self.store.get_session(session_id)
        except NotFoundError:
            return None
        return [n.id for n in self.store.nodes(session_id)]

    def _link(self, response_id: str) -> ResponseLink | None:
        raw = self.store.kv_get(KV_NAMESPACE, _link_key(response_id))
        if raw is None:
            return None
        try:
            return msgspec.json.decode(raw, type=ResponseLink)
        except msgspec.DecodeError:
            self._report(f"ctxrules proxy: the stored link of response {response_id} is damaged")
            return None

    def _run(self) -> None:
        try:
            self._store = (
                open_store(self._target) if isinstance(self._target, str) else self._target
            )
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        stop = False
        try:
            while not stop:
                items = [self._queue.get()]
                while len(items) < BATCH:
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                calls: list[Call] = []
                for item in items:
                    if item is None:
                        stop = True
                    elif isinstance(item, Call):
                        calls.append(item)
                    else:  # a job: write what came before it first
                        self._write(calls)
                        calls = []
                        item()
                self._write(calls)
                with self._idle:
                    self._pending -= len([i for i in items if i is not None])
                    self._idle.notify_all()
        finally:
            if isinstance(self._target, str):
                self.store.close()

    def _write(self, calls: list[Call]) -> None:
        if not calls:
            return
        try:
            self._write_batch(calls)
        except (CtxrulesError, OSError) as exc:  # one bad call must not lose the others
            if len(calls) == 1:
                self.failed += 1
                self._report(f"ctxrules proxy: recording {calls[0].path} failed: {exc}")
                self.graph.forget()
                return
            self.graph.forget()  # what the failed batch planned was not written
            for call in calls:
                self._write([call])

    def _write_batch(self, calls: list[Call]) -> None:
        planned: list[tuple[Call, Exchange | None, Step | None]] = []
        for call in calls:
            ex = exchange_of(
                call.path,
                call.request,
                call.request_headers,
                call.status,
                call.response,
                call.response_headers,
                at=call.at,
            )
            step = None
            if ex is not None:
                try:
                    step = self.graph.plan(ex)
                except ImportFormatError as exc:  # recorded as a row without nodes
                    self._report(f"ctxrules proxy: {call.path} not read: {exc.message}")
                if step is not None and step.warning is not None:
                    self._report(f"ctxrules proxy: {call.path}: {step.warning}")
            planned.append((call, ex, step))
        store = self.store
        with store.transaction():
            for n, (call, _ex, step) in enumerate(planned):
                if step is not None:
                    failed = step.error is not None or call.disconnected
                    self._store_step(store, step, call.at, failed=failed)
                    if step.response is not None:
                        store.kv_put(
                            KV_NAMESPACE,
                            _link_key(step.response.id),
                            msgspec.json.encode(step.response),
                        )
                store.kv_put(KV_NAMESPACE, _row_key(call, step, n), _row(call, step))
        self.recorded += len(calls)

    def write_request(self, ex: Exchange) -> Step:
        """Plan and write a request's nodes, without an answer (apply mode, on the
        writer thread: ``run_in_writer``); its answer comes as a call later."""
        step = self.graph.plan(ex)
        try:
            with self.store.transaction():
                self._store_step(self.store, step, ex.at, failed=False, count=False)
        except BaseException:
            self.graph.forget(step.session_id)
            raise
        return step

    def _store_step(
        self, store: CommitStore, step: Step, at: float, *, failed: bool, count: bool = True
    ) -> None:
        """Write one planned step; ``count`` it in the session's ``proxy`` metadata."""
        if step.created:
            counts = {"requests": int(count), "failed": int(failed and count), "last_at": at}
            store.create_session(
                session_id=step.session_id,
                source="proxy",
                import_key=step.import_key or None,
                metadata={**step.metadata, "format": FORMAT, "proxy": counts},
                nodes=step.nodes,
                head=step.head,
            )
            return
        for node in step.nodes:
            store.append(step.session_id, node)
        if step.head is not None:
            store.set_head(step.session_id, step.head)
        info = store.get_session(step.session_id)
        patch = {k: v for k, v in step.metadata.items() if info.metadata.get(k) != v}
        if count:
            before = info.metadata.get("proxy")
            before = before if isinstance(before, dict) else {}
            patch["proxy"] = {
                "requests": int(before.get("requests", 0)) + 1,
                "failed": int(before.get("failed", 0)) + int(failed),
                "last_at": at,
            }
        if patch:
            store.update_metadata(step.session_id, patch)


def _link_key(response_id: str) -> str:
    return f"response/{response_id}"


def _row_key(call: Call, step: Step | None, n: int) -> str:
    sid = step.session_id if step is not None else "-"
    return f"request/{sid}/{call.at:017.6f}-{time.monotonic_ns() % 10**9:09d}-{n}"


def _row(call: Call, step: Step | None) -> bytes:
    row: dict[str, Any] = {
        "path": call.path,
        "status": call.status,
        "at": call.at,
        "latency_ms": round(call.latency * 1000, 3),
        "request_bytes": len(call.request),
        "response_bytes": len(call.response),
    }
    if call.first_byte is not None:
        row["first_byte_ms"] = round(call.first_byte * 1000, 3)
    if step is not None:
        row.update(session=step.session_id, head=step.head, answer=step.answer)
        if step.error is not None:
            row["error"] = step.error
        if step.warning is not None:
            row["warning"] = step.warning
    if call.disconnected:  # what the stream's end then says is the client's doing
        row["error"] = "client disconnected"
    if call.sent is not None:
        row["sent"] = call.sent
    return msgspec.json.encode(row)
