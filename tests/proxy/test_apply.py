"""Apply mode: the request the rules make is sent instead of the agent's, its stream
setting kept; the answer is recorded against it; count_tokens is answered locally
unless forwarded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
from aiohttp import web

from ctxrules.commit import Pipeline, persist
from ctxrules.config import PipelineConfig
from ctxrules.providers import get_provider
from ctxrules.proxy import KV_NAMESPACE, Proxy, ProxyConfig
from ctxrules.ruleapi.cache import CachePricing
from ctxrules.store import open_store

from .loopback import Upstream

HEADERS = {
    "x-api-key": "sk-ant-x",
    "anthropic-version": "2023-06-01",
    "content-type": "application/json",
}
ANSWER = {
    "id": "msg_2",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "done"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 50, "output_tokens": 2},
}


def conversation(result: str, *, then: bool = False) -> dict:
    """A read of ``result``; with ``then``, the answer to it and one more question (the
    result is no longer the newest input, which the rules keep whole)."""
    more = [
        {"role": "assistant", "content": "It is a long log."},
        {"role": "user", "content": "Any errors in it?"},
    ]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "system": "You are terse.",
        "tools": [
            {"name": "read", "description": "read a file", "input_schema": {"type": "object"}}
        ],
        "messages": [
            {"role": "user", "content": "summarise the log"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "log"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": result}],
            },
            *(more if then else []),
        ],
    }


def test_apply_sends_the_request_the_rules_make_and_records_the_agents(tmp_path):
    store = open_store(tmp_path / "store")
    long_result = "line of a very long log\n" * 400  # far over the preset's result cap
    with Upstream() as up:

        async def answer(request: web.Request, ex) -> web.Response:
            return web.json_response(ANSWER)

        up.handler = answer
        config = ProxyConfig(
            port=0,
            upstreams={"anthropic": up.url},
            mode="apply",
            config=PipelineConfig.preset("aggressive"),
        )
        with Proxy(config, store, log=lambda _l: None) as proxy:
            agent = json.dumps(conversation(long_result, then=True)).encode()
            r = httpx2.post(proxy.url + "/v1/messages", content=agent, headers=HEADERS)
            assert r.status_code == 200 and r.json() == ANSWER
            assert proxy.flush()
    (got,) = up.log
    sent = json.loads(got.body)
    assert got.body != agent and len(got.body) < len(agent) // 2  # the rules capped the result
    assert sent["model"] == "claude-sonnet-4-5" and sent["max_tokens"] == 256
    assert [t["name"] for t in sent["tools"]] == ["read"]
    assert "You are terse." in json.dumps(sent["system"])
    assert "stream" not in sent  # as the agent asked
    assert json.dumps(sent).count("cache_control") >= 1  # breakpoints at the stable layers
    (info,) = store.list_sessions()
    nodes = store.nodes(info.id)
    tool = next(n for n in nodes if n.role == "tool")
    assert tool.output == long_result  # the history holds what the agent sent
    assert store.get_node(info.head).metadata["usage"] == ANSWER["usage"]
    (row,) = [json.loads(store.kv_get(KV_NAMESPACE, k)) for k in store.kv_keys(KV_NAMESPACE)]
    assert row["sent"]["bytes"] == len(got.body) and row["sent"]["commit"].startswith("cc_")
    store.close()


@contextmanager
def applying(store, vendor: str, answer: dict) -> Iterator[tuple[Proxy, Upstream]]:
    """A proxy in apply mode before a loopback ``vendor`` upstream that answers ``answer``."""
    with Upstream() as up:

        async def reply(request: web.Request, ex) -> web.Response:
            return web.json_response(answer)

        up.handler = reply
        config = ProxyConfig(port=0, upstreams={vendor: up.url}, mode="apply")
        with Proxy(config, store, log=lambda _l: None) as proxy:
            yield proxy, up


def test_apply_keeps_the_agents_stream_setting(tmp_path):
    store = open_store(tmp_path / "store")
    with applying(store, "anthropic", ANSWER) as (proxy, up):
        body = {**conversation("ok"), "stream": True}
        httpx2.post(proxy.url + "/v1/messages", content=json.dumps(body), headers=HEADERS)
        assert proxy.flush()
    assert json.loads(up.log[0].body)["stream"] is True
    store.close()


def test_count_tokens_is_answered_locally_in_apply_mode_unless_forwarded(tmp_path):
    store = open_store(tmp_path / "store")
    body = json.dumps({k: v for k, v in conversation("x" * 4000).items() if k != "max_tokens"})
    small = json.dumps(
        {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
    )
    with Upstream() as up:

        async def counted(request: web.Request, ex) -> web.Response:
            return web.json_response({"input_tokens": 12345})

        up.handler = counted
        urls = {"anthropic": up.url}
        with Proxy(ProxyConfig(port=0, upstreams=urls, mode="apply"), store) as proxy:
            big_count = httpx2.post(
                proxy.url + "/v1/messages/count_tokens", content=body, headers=HEADERS
            ).json()
            small_count = httpx2.post(
                proxy.url + "/v1/messages/count_tokens", content=small, headers=HEADERS
            ).json()
            bad = httpx2.post(
                proxy.url + "/v1/messages/count_tokens", content=b"{", headers=HEADERS
            )
        assert up.log == []  # never asked upstream
        assert 1000 < big_count["input_tokens"] and 0 < small_count["input_tokens"] < 50
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
        forward = ProxyConfig(port=0, upstreams=urls, mode="apply", forward_count_tokens=True)
        with Proxy(forward, store) as proxy:
            r = httpx2.post(proxy.url + "/v1/messages/count_tokens", content=small, headers=HEADERS)
        assert r.json() == {"input_tokens": 12345} and len(up.log) == 1
    store.close()


def test_apply_prices_the_rules_at_the_model_of_the_request(tmp_path):
    # The default preset's cache-aware rules decide by the prices of the model sent to:
    # an OpenAI request's commit is made at gpt-4o's, not at the default (Anthropic's).
    store = open_store(tmp_path / "store")
    chat = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "summarise the log"},
        ],
    }
    answer = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "done"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 1, "total_tokens": 21},
    }
    with applying(store, "openai", answer) as (proxy, _):
        headers = {"authorization": "Bearer sk-x", "content-type": "application/json"}
        r = httpx2.post(proxy.url + "/v1/chat/completions", json=chat, headers=headers)
        assert r.status_code == 200 and r.json() == answer
        assert proxy.flush()
    (row,) = [json.loads(store.kv_get(KV_NAMESPACE, k)) for k in store.kv_keys(KV_NAMESPACE)]
    commit = persist.load(store, row["sent"]["commit"])
    default = Pipeline.from_config(PipelineConfig.preset("default"))
    openai = get_provider("openai-chat")
    gpt4o = default.priced(CachePricing.for_model(openai, "gpt-4o"))
    assert gpt4o.version != default.version
    assert commit.rules_version == gpt4o.version
    store.close()
