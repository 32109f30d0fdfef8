"""OpenAI Responses conversations chained by ``previous_response_id`` through the proxy:
a request that names an earlier answer continues that answer's session, also after the
proxy restarts on the same store (the answer's link is stored), and one that names an
answer recorded nowhere is recorded with a warning instead of silently starting a
conversation of its own."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from aiohttp import web

from ctxrules.model import content_text
from ctxrules.proxy import KV_NAMESPACE, Proxy, ProxyConfig
from ctxrules.store import open_store

from .loopback import Upstream

HEADERS = {"authorization": "Bearer sk-secret", "content-type": "application/json"}


def _answer(rid: str, text: str) -> dict:
    return {
        "id": rid,
        "object": "response",
        "model": "gpt-5-mini",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": f"msg_{rid}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15},
    }


@pytest.fixture
def upstream():
    """Answers the n-th Responses call with ``resp_n`` saying ``answer n``."""
    with Upstream() as up:
        calls = {"n": 0}

        async def handler(request: web.Request, ex) -> web.Response:
            calls["n"] += 1
            n = calls["n"]
            return web.json_response(_answer(f"resp_{n}", f"answer {n}"))

        up.handler = handler
        yield up


def _send(upstream: Upstream, store_path: Path, bodies: list[dict], lines: list[str]) -> None:
    """One proxy run on the store at ``store_path``: ``bodies`` sent in order."""
    urls = {v: upstream.url for v in ("anthropic", "openai", "gemini")}
    with Proxy(ProxyConfig(port=0, upstreams=urls), str(store_path), log=lines.append) as proxy:
        for body in bodies:
            r = httpx2.post(proxy.url + "/v1/responses", content=json.dumps(body), headers=HEADERS)
            assert r.status_code == 200
        assert proxy.flush()


def _texts(store, session_id: str) -> list[tuple[str, str]]:
    """The (role, text) of a session's nodes along its HEAD chain, oldest first."""
    info = store.get_session(session_id)
    nodes = {n.id: n for n in store.nodes(session_id)}
    chain = []
    at = info.head
    while at is not None:
        node = nodes[at]
        chain.append(node)
        at = node.predecessor
    return [
        (n.role, content_text(n.input or "") + content_text(n.output or ""))
        for n in reversed(chain)
    ]


FIRST = {"model": "gpt-5-mini", "input": [{"role": "user", "content": "hello there"}]}


def test_previous_response_id_continues_its_session_after_a_restart(upstream, tmp_path):
    path = tmp_path / "store"
    lines: list[str] = []
    _send(upstream, path, [FIRST], lines)
    # a new proxy process on the same store: the chain is read back from the store
    follow = {
        "model": "gpt-5-mini",
        "previous_response_id": "resp_1",
        "input": [{"role": "user", "content": "and then?"}],
    }
    _send(upstream, path, [follow], lines)
    store = open_store(path)
    try:
        sessions = store.list_sessions()
        assert len(sessions) == 1, "the follow-up started a session of its own"
        assert _texts(store, sessions[0].id) == [
            ("user", "hello there"),
            ("assistant", "answer 1"),
            ("user", "and then?"),
            ("assistant", "answer 2"),
        ]
        link = json.loads(store.kv_get(KV_NAMESPACE, "response/resp_2"))
        assert link["previous"] == "resp_1" and len(link["items"]) == 2
    finally:
        store.close()
    assert not any("was not recorded" in line for line in lines)


def test_a_chain_of_three_across_two_restarts(upstream, tmp_path):
    path = tmp_path / "store"
    lines: list[str] = []
    _send(upstream, path, [FIRST], lines)
    for n in (1, 2):
        body = {
            "model": "gpt-5-mini",
            "previous_response_id": f"resp_{n}",
            "input": [{"role": "user", "content": f"question {n + 1}"}],
        }
        _send(upstream, path, [body], lines)
    store = open_store(path)
    try:
        (session,) = store.list_sessions()
        texts = _texts(store, session.id)
        assert [t for _r, t in texts] == [
            "hello there",
            "answer 1",
            "question 2",
            "answer 2",
            "question 3",
            "answer 3",
        ]
    finally:
        store.close()


def test_an_unknown_previous_response_id_is_recorded_with_a_warning(upstream, tmp_path):
    path = tmp_path / "store"
    lines: list[str] = []
    orphan = {
        "model": "gpt-5-mini",
        "previous_response_id": "resp_from_elsewhere",
        "input": [{"role": "user", "content": "continue"}],
    }
    _send(upstream, path, [orphan], lines)
    assert any("resp_from_elsewhere" in line and "was not recorded" in line for line in lines)
    store = open_store(path)
    try:
        (session,) = store.list_sessions()
        answer = next(n for n in store.nodes(session.id) if n.role == "assistant")
        assert answer.metadata["continues_unknown"] == "resp_from_elsewhere"
        rows = [json.loads(store.kv_get(KV_NAMESPACE, k)) for k in store.kv_keys(KV_NAMESPACE)]
        assert any("resp_from_elsewhere" in r.get("warning", "") for r in rows)
    finally:
        store.close()
