"""Our rendered requests, sent by each vendor's official SDK to a loopback server.

Each test renders a real recorded conversation (a corpus cassette, imported and
committed the ordinary way), hands the body to the SDK, and checks: the SDK accepts and
sends it, the server receives a body our validator finds structurally sound and that
equals what we rendered, the SDK accepts the recorded response, and our usage parsing
gives the usage recorded in the cassette (read here with plain YAML, not our code).

OpenAI Responses has no cassette in the corpus: that test renders the Chat cassette's
conversation for Responses, validates it structurally, and answers with a response we
construct from the documented Responses format (the figures below are ours, stated
once and checked against our parsing).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxrules.providers import Usage, get_provider
from ctxrules.render import render, session_defaults

from .conftest import CASSETTES

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")


def _recorded_anthropic_usage(resp: dict[str, Any]) -> Usage:
    u = resp["usage"]
    return Usage(
        input_tokens=u["input_tokens"],
        cache_read_tokens=u.get("cache_read_input_tokens") or 0,
        cache_write_tokens=u.get("cache_creation_input_tokens") or 0,
        output_tokens=u["output_tokens"],
    )


@pytest.mark.parametrize("rel", CASSETTES["anthropic"])
def test_anthropic_sdk_sends_our_request(rel, cassette_session, loopback):
    cs = cassette_session(rel)
    provider = get_provider("anthropic")
    rendered = render(cs.commit, provider, **session_defaults(cs.metadata, provider).options)
    body = json.loads(rendered.body)
    loopback.reply, loopback.check = cs.response, provider.validate
    client = anthropic.Anthropic(api_key="test-key", base_url=loopback.url, max_retries=0)
    message = client.messages.create(**body)
    (ex,) = loopback.seen
    assert ex.path == "/v1/messages"
    assert "anthropic-version" in ex.headers  # it went through the SDK
    assert loopback.problems == []
    assert ex.body == body
    assert message.role == "assistant"  # the SDK parsed the recorded response
    assert provider.parse_usage(message.model_dump()) == _recorded_anthropic_usage(cs.response)


def test_openai_chat_sdk_sends_our_request(cassette_session, loopback):
    cs = cassette_session(CASSETTES["openai-chat"][0], 2)  # two calls and their results
    provider = get_provider("openai-chat")
    body = json.loads(
        render(cs.commit, provider, **session_defaults(cs.metadata, provider).options).body
    )
    loopback.reply, loopback.check = cs.response, provider.validate
    client = openai.OpenAI(api_key="test-key", base_url=loopback.url + "/v1", max_retries=0)
    completion = client.chat.completions.create(**body)
    (ex,) = loopback.seen
    assert ex.path == "/v1/chat/completions"
    assert loopback.problems == []
    assert ex.body == body
    assert completion.choices[0].message.role == "assistant"
    u = cs.response["usage"]
    cached = u["prompt_tokens_details"]["cached_tokens"]
    assert provider.parse_usage(completion.model_dump()) == Usage(
        input_tokens=u["prompt_tokens"] - cached,
        cache_read_tokens=cached,
        output_tokens=u["completion_tokens"],
    )


# A Responses reply built from the documented format (no recorded one exists).
RESPONSES_REPLY: dict[str, Any] = {
    "id": "resp_loopback",
    "object": "response",
    "created_at": 1_700_000_000,
    "status": "completed",
    "model": "gpt-4o",
    "output": [
        {
            "type": "message",
            "id": "msg_loopback",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "1 USD is 0.92 EUR.", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 1200,
        "input_tokens_details": {"cached_tokens": 1024},
        "output_tokens": 9,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 1209,
    },
}


def test_openai_responses_sdk_sends_our_request(cassette_session, loopback):
    cs = cassette_session(CASSETTES["openai-chat"][0], 2)  # a request with two tool results
    provider = get_provider("openai-responses")
    body = json.loads(
        render(cs.commit, provider, **session_defaults(cs.metadata, provider).options).body
    )
    assert any(it["type"] == "function_call_output" for it in body["input"])
    loopback.reply, loopback.check = RESPONSES_REPLY, provider.validate
    client = openai.OpenAI(api_key="test-key", base_url=loopback.url + "/v1", max_retries=0)
    response = client.responses.create(**body)
    (ex,) = loopback.seen
    assert ex.path == "/v1/responses"
    assert loopback.problems == []
    assert ex.body == body
    assert response.output_text == "1 USD is 0.92 EUR."
    assert provider.parse_usage(response.model_dump()) == Usage(
        input_tokens=1200 - 1024, cache_read_tokens=1024, output_tokens=9
    )


def test_gemini_sdk_sends_our_request(cassette_session, loopback):
    from google.genai import types

    cs = cassette_session(CASSETTES["gemini"][0])
    provider = get_provider("gemini")
    model = cs.uri.rsplit("/", 1)[-1].split(":")[0]
    rendered = render(cs.commit, provider, **session_defaults(cs.metadata, provider).options)
    body = json.loads(rendered.body)
    loopback.reply, loopback.check = cs.response, provider.validate
    client = genai.Client(
        api_key="test-key",
        http_options=types.HttpOptions(base_url=loopback.url, api_version="v1beta"),
    )
    # The SDK takes the body's parts as typed config; it must accept every field we emit.
    config = types.GenerateContentConfig(
        system_instruction=body.get("systemInstruction"), tools=body.get("tools")
    )
    response = client.models.generate_content(model=model, contents=body["contents"], config=config)
    (ex,) = loopback.seen
    assert ex.path == f"/v1beta/models/{model}:generateContent"
    assert rendered.endpoint == ex.path
    assert loopback.problems == []
    assert ex.body["contents"] == body["contents"]
    assert ex.body["systemInstruction"]["parts"] == body["systemInstruction"]["parts"]
    names = [d["name"] for d in ex.body["tools"][0]["functionDeclarations"]]
    assert names == [d["name"] for d in body["tools"][0]["functionDeclarations"]]
    assert response.candidates  # the SDK parsed the recorded response
    u = cs.response["usageMetadata"]
    expected = Usage(
        input_tokens=u["promptTokenCount"] - u.get("cachedContentTokenCount", 0),
        cache_read_tokens=u.get("cachedContentTokenCount", 0),
        output_tokens=u["candidatesTokenCount"] + u.get("thoughtsTokenCount", 0),
    )
    assert provider.parse_usage(response.model_dump(mode="json")) == expected
    assert provider.parse_usage(cs.response) == expected
