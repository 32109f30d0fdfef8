"""The proxy's faithful edge cases: errors reach the client as sent and are recorded as
failed requests, a broken stream stays broken, a client that leaves cancels the
upstream request, unknown fields and beta headers pass, credentials are never stored,
64 concurrent streams share one store, and neither a locked store nor a failing one
touches forwarding."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from pathlib import Path

import httpx2
import msgspec
import pytest
from aiohttp import web

from ctxrules.errors import ConfigError, StoreError
from ctxrules.proxy import KV_NAMESPACE, Proxy, ProxyConfig
from ctxrules.store import open_store

from .loopback import Upstream

KEY = "sk-ant-secret-do-not-store"


def sse(*events: tuple[str, dict]) -> bytes:
    return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)


START = (
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 9, "output_tokens": 1},
        },
    },
)
TEXT = [
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
]
END = [
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]
BODY = {
    "model": "claude-x",
    "max_tokens": 10,
    "stream": True,
    "messages": [{"role": "user", "content": "hello"}],
}
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}


def rows(store) -> list[dict]:
    return [json.loads(store.kv_get(KV_NAMESPACE, k)) for k in store.kv_keys(KV_NAMESPACE)]


@pytest.fixture
def upstream():
    with Upstream() as up:
        yield up


@pytest.fixture
def proxied(upstream, tmp_path):
    """``(proxy, store)`` in observe mode against the loopback upstream."""
    store = open_store(tmp_path / "store")
    urls = {v: upstream.url for v in ("anthropic", "openai", "gemini")}
    with Proxy(ProxyConfig(port=0, upstreams=urls), store, log=lambda _line: None) as proxy:
        yield proxy, store
    store.close()


def answer_with(
    upstream: Upstream, status: int, body: bytes, content_type: str, *, cut: bool = False
):
    async def handler(request: web.Request, ex) -> web.StreamResponse:
        resp = web.StreamResponse(status=status, headers={"content-type": content_type})
        await resp.prepare(request)
        await resp.write(body)
        if cut:  # the upstream dies mid-stream
            assert request.transport is not None
            request.transport.close()
            return resp
        await resp.write_eof()
        return resp

    upstream.handler = handler


@pytest.mark.parametrize("status", [400, 429, 500, 529])
def test_an_error_status_reaches_the_client_as_sent_and_is_recorded_as_failed(
    upstream, proxied, status
):
    proxy, store = proxied
    body = json.dumps(
        {"type": "error", "error": {"type": "overloaded_error", "message": "x"}}
    ).encode()
    answer_with(upstream, status, body, "application/json")
    r = httpx2.post(proxy.url + "/v1/messages", content=json.dumps(BODY), headers=HEADERS)
    assert r.status_code == status and r.content == body
    assert proxy.flush()
    (row,) = rows(store)
    assert row["status"] == status and row["error"] == f"HTTP {status}" and row["answer"] is None
    (info,) = store.list_sessions()
    assert info.metadata["proxy"]["failed"] == 1
    assert [n.role for n in store.nodes(info.id)] == ["user"]  # the request, no answer


def test_an_error_event_after_a_200_is_passed_on_and_recorded_as_failed(upstream, proxied):
    proxy, store = proxied
    err = (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    body = sse(START, *TEXT, err)
    answer_with(upstream, 200, body, "text/event-stream")
    r = httpx2.post(proxy.url + "/v1/messages", content=json.dumps(BODY), headers=HEADERS)
    assert r.status_code == 200 and r.content == body
    assert proxy.flush()
    (row,) = rows(store)
    assert row["error"] == "error event" and row["answer"] is None


def test_a_broken_stream_stays_broken_and_is_recorded_as_cut_short(upstream, proxied):
    proxy, store = proxied
    answer_with(upstream, 200, sse(START, *TEXT), "text/event-stream", cut=True)
    with pytest.raises(httpx2.HTTPError):  # the client sees the break, not a clean end
        httpx2.post(proxy.url + "/v1/messages", content=json.dumps(BODY), headers=HEADERS)
    assert proxy.flush()
    (row,) = rows(store)
    assert row["error"] == "stream cut short" and row["answer"] is None


def test_a_client_that_leaves_cancels_the_upstream_request(upstream, proxied):
    proxy, store = proxied
    started = threading.Event()

    async def slow(request: web.Request, ex) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(sse(START))
        started.set()
        await asyncio.sleep(30)  # cancelled long before
        return resp

    upstream.handler = slow
    with (
        httpx2.Client() as client,
        client.stream(
            "POST", proxy.url + "/v1/messages", content=json.dumps(BODY), headers=HEADERS
        ) as r,
    ):
        next(r.iter_raw())
        assert started.wait(5)
    deadline = time.monotonic() + 10
    while upstream.cancelled == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert upstream.cancelled == 1
    assert proxy.flush()
    (row,) = rows(store)
    assert row["error"] == "client disconnected"


def test_unknown_fields_and_beta_headers_pass_through_and_keys_are_never_stored(
    upstream, proxied, tmp_path
):
    proxy, store = proxied
    answer_with(upstream, 200, sse(START, *TEXT, *END), "text/event-stream")
    body = json.dumps({**BODY, "a_field_from_next_year": {"x": [1, 2]}}, indent=1).encode()
    headers = {
        **HEADERS,
        "anthropic-beta": "future-feature-2031-01-01",
        "authorization": f"Bearer {KEY}",
    }
    r = httpx2.post(proxy.url + "/v1/messages", content=body, headers=headers)
    assert r.status_code == 200
    (got,) = upstream.log
    assert got.body == body
    sent = {k.lower(): v for k, v in got.headers}
    assert sent["anthropic-beta"] == "future-feature-2031-01-01"
    assert sent["x-api-key"] == KEY and sent["authorization"] == f"Bearer {KEY}"
    assert proxy.flush()
    (info,) = store.list_sessions()
    assert info.metadata["headers"]["anthropic-beta"] == "future-feature-2031-01-01"
    store.close()
    for f in Path(tmp_path / "store").iterdir():  # the database and its WAL, byte for byte
        assert KEY.encode() not in f.read_bytes(), f


def test_64_concurrent_streams_into_one_store(upstream, proxied):
    proxy, store = proxied

    async def slow_stream(request: web.Request, ex) -> web.StreamResponse:
        user = json.loads(ex.body)["messages"][0]["content"]
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        text = (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": user},
            },
        )
        for event in (START, TEXT[0], text, text, TEXT[2], *END):
            await resp.write(sse(event))
            await asyncio.sleep(0.005)
        await resp.write_eof()
        return resp

    upstream.handler = slow_stream

    async def run() -> list[bytes]:
        async with httpx2.AsyncClient(timeout=60) as client:

            async def one(i: int) -> bytes:
                body = {**BODY, "messages": [{"role": "user", "content": f"agent {i}"}]}
                r = await client.post(
                    proxy.url + "/v1/messages", content=json.dumps(body), headers=HEADERS
                )
                return r.content

            return await asyncio.gather(*(one(i) for i in range(64)))

    bodies = asyncio.run(run())
    assert all(f"agent {i}agent {i}".encode() not in b for i, b in enumerate(bodies))  # two deltas
    assert all(b.count(f'"text": "agent {i}"'.encode()) == 2 for i, b in enumerate(bodies))
    assert proxy.flush()
    sessions = store.list_sessions()
    assert len(sessions) == 64
    answers = {s.id: store.get_node(s.head).output[0].text for s in sessions}
    assert sorted(answers.values()) == sorted(f"agent {i}agent {i}" for i in range(64))


def test_a_locked_store_does_not_hold_up_forwarding(upstream, proxied, tmp_path):
    proxy, store = proxied
    answer_with(upstream, 200, sse(START, *TEXT, *END), "text/event-stream")
    other = sqlite3.connect(tmp_path / "store" / "ctxrules.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        started = time.monotonic()
        for i in range(5):
            body = {**BODY, "messages": [{"role": "user", "content": f"q{i}"}]}
            r = httpx2.post(proxy.url + "/v1/messages", content=json.dumps(body), headers=HEADERS)
            assert r.status_code == 200
        assert time.monotonic() - started < 5  # forwarded while the store was locked
        assert not proxy.flush(timeout=0.5)  # …and not recorded yet
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert proxy.flush()
    assert len(store.list_sessions()) == 5


class _Failing:
    """A store whose writes fail (a full disk, a dropped server)."""

    def __init__(self, inner):
        self._inner = inner

    def transaction(self):
        raise StoreError("disk full", where="test")

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_a_recording_failure_is_reported_and_never_fails_the_request(upstream, tmp_path):
    store = open_store(tmp_path / "store")
    lines: list[str] = []
    urls = {v: upstream.url for v in ("anthropic", "openai", "gemini")}
    answer_with(upstream, 200, sse(START, *TEXT, *END), "text/event-stream")
    with Proxy(ProxyConfig(port=0, upstreams=urls), _Failing(store), log=lines.append) as proxy:
        r = httpx2.post(proxy.url + "/v1/messages", content=json.dumps(BODY), headers=HEADERS)
        assert r.status_code == 200 and r.content == sse(START, *TEXT, *END)
        assert proxy.flush()
        assert proxy.recorder.failed == 1
    assert any("recording /v1/messages failed" in line and "disk full" in line for line in lines)
    store.close()


def test_other_paths_are_forwarded_unrecorded(upstream, proxied):
    proxy, store = proxied

    async def models(request: web.Request, ex) -> web.Response:
        return web.json_response({"data": [{"id": "claude-x"}]})

    upstream.handler = models
    r = httpx2.get(proxy.url + "/v1/models?limit=5", headers=HEADERS)
    assert r.json() == {"data": [{"id": "claude-x"}]}
    assert upstream.log[0].path == "/v1/models?limit=5"
    assert proxy.flush() and store.list_sessions() == [] and rows(store) == []


def test_the_proxy_listens_on_loopback_only_unless_forced(tmp_path):
    with pytest.raises(ConfigError, match="loopback only"):
        Proxy(ProxyConfig(host="0.0.0.0", port=0), str(tmp_path / "s"))
    with pytest.raises(ConfigError, match="loopback only"):
        Proxy(ProxyConfig(host="192.168.1.10", port=0), str(tmp_path / "s"))
    Proxy(ProxyConfig(host="::1", port=0), str(tmp_path / "s"))  # accepted, not started
    Proxy(ProxyConfig(host="0.0.0.0", port=0, allow_remote=True), str(tmp_path / "s"))


def test_an_unreachable_upstream_answers_502_in_the_vendors_envelope(tmp_path):
    store = open_store(tmp_path / "store")
    urls = {"anthropic": "http://127.0.0.1:9"}  # the discard port: nothing listens
    with Proxy(ProxyConfig(port=0, upstreams=urls), store, log=lambda _l: None) as proxy:
        r = httpx2.post(proxy.url + "/v1/messages", content=json.dumps(BODY), headers=HEADERS)
        assert r.status_code == 502
        assert r.json()["type"] == "error" and "unreachable" in r.json()["error"]["message"]
        assert proxy.flush()
    assert (
        msgspec.json.decode(store.kv_get(KV_NAMESPACE, store.kv_keys(KV_NAMESPACE)[0]))["status"]
        == 502
    )
    store.close()


def test_a_flush_waits_for_a_call_still_in_flight(tmp_path):
    """A handler counts its call when it starts forwarding: a flush made while the
    answer travels (the client may already hold all of it) waits for its record."""
    from ctxrules.proxy import Call, Recorder

    rec = Recorder(str(tmp_path / "store"), report=lambda _line: None)
    rec.start()
    try:
        rec.begin()
        assert rec.flush(timeout=0.2) is False  # begun, not yet submitted
        call = Call(
            path="/v1/messages",
            request=json.dumps(BODY).encode(),
            request_headers={},
            status=500,
            response=b"{}",
            response_headers={},
            at=time.time(),
        )
        rec.submit(call, begun=True)
        assert rec.flush(timeout=30) is True and rec.recorded == 1
    finally:
        rec.stop()
