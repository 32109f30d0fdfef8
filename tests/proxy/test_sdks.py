"""The official SDKs through the proxy, for real: each cassette's recorded requests are
sent by the vendor's SDK (sync and async; the streamed cassettes stream) through the
proxy to a loopback upstream replaying the recorded responses.

For every call: the upstream receives the very bytes and headers the client sent
(observe mode changes nothing), and the client receives the very bytes the upstream
sent.  Afterwards the proxy's store holds the same graph that ``ctxrules import
--format traffic`` makes of a cassette of the same calls.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from google import genai
from google.genai import types

from ctxrules.importers import import_paths
from ctxrules.proxy import Proxy, ProxyConfig
from ctxrules.store import open_store

from .loopback import AsyncTee, Tee, Upstream, recorded_requests, recorded_responses, write_cassette

#: Cassettes replayed (paths under the corpus), by wire; the chatlas ones stream (SSE).
CASSETTES = [
    "vcr-cassettes-yaml/anthropic/test_multiple_parallel_tool_calls.yaml",
    "vcr-cassettes-yaml/anthropic/test_anthropic_tool_with_thinking.yaml",
    "vcr-cassettes-yaml/anthropic/chatlas__test_anthropic_tool_variations.yaml",
    "vcr-cassettes-yaml/openai-chat/test_tool_search_eval_openai-chat.yaml",
    "vcr-cassettes-yaml/openai-chat/chatlas__test_openai_tool_variations.yaml",
    "vcr-cassettes-yaml/openai-responses/chatlas__test_openai_tool_variations.yaml",
    "vcr-cassettes-yaml/gemini/test_google_instructions_only_with_tool_calls.yaml",
    "vcr-cassettes-yaml/gemini/chatlas__test_tools_simple.yaml",
]

#: Headers a hop may change (the proxy forwards every other one unchanged).
HOP = {"host", "connection", "keep-alive", "transfer-encoding", "content-length"}


def _split(fn: Any, body: dict[str, Any]) -> dict[str, Any]:
    """An SDK method's keyword arguments for a recorded body (unknown keys as extra_body)."""
    known = set(inspect.signature(fn).parameters)
    kwargs = {k: v for k, v in body.items() if k in known}
    extra = {k: v for k, v in body.items() if k not in known}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _gemini_args(body: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = dict(body.get("generationConfig") or {})
    for key in ("systemInstruction", "tools", "toolConfig", "safetySettings"):
        if key in body:
            config[key] = body[key]
    return {
        "contents": body["contents"],
        "config": types.GenerateContentConfig.model_validate(config),
    }


def _drain(result: Any) -> None:
    for _ in result if hasattr(result, "__iter__") and not isinstance(result, dict) else ():
        pass


async def _adrain(result: Any) -> None:
    if hasattr(result, "__aiter__"):
        async for _ in result:
            pass


def _send_sync(wire: str, base: str, tee: Tee, calls: list[tuple[str, dict, str]]) -> None:
    http = httpx2.Client(transport=tee)
    if wire == "anthropic":
        client = anthropic.Anthropic(
            base_url=base, api_key="sk-ant-test", http_client=http, max_retries=0
        )
        for _, body, _ in calls:
            _drain(client.messages.create(**_split(client.messages.create, body)))
    elif wire.startswith("openai"):
        oc = openai.OpenAI(
            base_url=base + "/v1", api_key="sk-test", http_client=http, max_retries=0
        )
        api = oc.chat.completions if wire == "openai-chat" else oc.responses
        for _, body, _ in calls:
            _drain(api.create(**_split(api.create, body)))
    else:
        gc = genai.Client(
            api_key="g-test",
            http_options=types.HttpOptions(base_url=base, httpx_client=http),
        )
        for _, body, uri in calls:
            model = uri.rsplit("/models/", 1)[1].split(":")[0]
            if ":streamGenerateContent" in uri:
                _drain(gc.models.generate_content_stream(model=model, **_gemini_args(body)))
            else:
                gc.models.generate_content(model=model, **_gemini_args(body))


async def _send_async(
    wire: str, base: str, tee: AsyncTee, calls: list[tuple[str, dict, str]]
) -> None:
    http = httpx2.AsyncClient(transport=tee)
    if wire == "anthropic":
        client = anthropic.AsyncAnthropic(
            base_url=base, api_key="sk-ant-test", http_client=http, max_retries=0
        )
        for _, body, _ in calls:
            await _adrain(await client.messages.create(**_split(client.messages.create, body)))
    elif wire.startswith("openai"):
        oc = openai.AsyncOpenAI(
            base_url=base + "/v1", api_key="sk-test", http_client=http, max_retries=0
        )
        api = oc.chat.completions if wire == "openai-chat" else oc.responses
        for _, body, _ in calls:
            await _adrain(await api.create(**_split(api.create, body)))
    else:
        gc = genai.Client(
            api_key="g-test",
            http_options=types.HttpOptions(base_url=base, httpx_async_client=http),
        )
        for _, body, uri in calls:
            model = uri.rsplit("/models/", 1)[1].split(":")[0]
            if ":streamGenerateContent" in uri:
                await _adrain(
                    await gc.aio.models.generate_content_stream(model=model, **_gemini_args(body))
                )
            else:
                await gc.aio.models.generate_content(model=model, **_gemini_args(body))


def graph(store) -> list[tuple[Any, ...]]:
    """A store's graph: each session's id, HEAD and nodes (content, edges, metadata),
    times and store order left out."""
    out = []
    for info in sorted(store.list_sessions(), key=lambda s: s.id):
        nodes = sorted(
            (
                n.id,
                n.role,
                n.name,
                repr(n.input),
                repr(n.output),
                n.predecessor,
                n.caller,
                repr(n.metadata),
            )
            for n in store.nodes(info.id)
        )
        out.append((info.id, info.head, nodes))
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("cassette", CASSETTES, ids=lambda c: c.split("/", 1)[1])
def test_sdk_through_the_proxy(cassette, mode, corpus: Path, tmp_path):
    path = corpus / cassette
    calls = recorded_requests(path)
    wire = calls[0][0]
    store = open_store(tmp_path / "proxied")
    with Upstream(recorded_responses(path), event_pause=0.001) as up:
        upstreams = {"anthropic": up.url, "openai": up.url, "gemini": up.url}
        with Proxy(ProxyConfig(port=0, upstreams=upstreams), store) as proxy:
            if mode == "sync":
                tee: Tee | AsyncTee = Tee()
                _send_sync(wire, proxy.url, tee, calls)
            else:
                tee = AsyncTee()
                asyncio.run(_send_async(wire, proxy.url, tee, calls))
            assert proxy.flush()
        assert proxy.recorder.recorded == len(calls) and proxy.recorder.failed == 0
    assert len(up.log) == len(calls) == len(tee.requests) == len(tee.responses)
    for (sent_headers, sent_body), got, received in zip(tee.requests, up.log, tee.responses):
        assert got.body == sent_body  # the request's bytes, unchanged
        assert [(k.lower(), v) for k, v in got.headers if k.lower() not in HOP] == [
            (k.lower(), v) for k, v in sent_headers if k.lower() not in HOP
        ]
        assert received == got.response  # the response's bytes, as the upstream sent them
        assert got.status == 200
    # The same calls as a cassette, imported: the same graph as the proxy recorded.
    imported = open_store(tmp_path / "imported")
    import_paths(imported, [str(write_cassette(up.log, tmp_path / "calls.yaml"))], format="traffic")
    recorded = graph(store)
    assert recorded == graph(imported)
    answers = [
        n for _, _, nodes in recorded for n in nodes if n[1] == "assistant" and "usage" in n[7]
    ]
    assert len(answers) >= len(calls)  # every answer is a node with its usage
    for info in store.list_sessions():
        assert "sk-" not in repr(info.metadata) and "g-test" not in repr(info.metadata)
        for n in store.nodes(info.id):
            assert "sk-ant-test" not in repr(n)
    store.close()
    imported.close()
