"""Reading responses: each recorded response, read by ``Provider.read_response``, is the
assistant turn the agent sent back in its next recorded request (the oracle: the
request bodies of the cassettes, read with plain YAML), and its usage is the usage
recorded with it."""

from __future__ import annotations

import base64
import json

import msgspec
import pytest

from ctxrules.errors import ProviderError
from ctxrules.model import ContentBlock, TextBlock, ThinkingBlock, ToolUseBlock
from ctxrules.providers import get_provider
from ctxrules.providers.responses import tool_arguments

from .conftest import CASSETTES, CORPUS_CASSETTES, interaction_count, load_cassette


def _turns(request: dict) -> list:
    return request.get("messages") or request.get("contents") or []


def _pairs():
    """Interactions whose next request continues the same conversation (it starts with
    this request's turns), so it carries this response as its assistant turn."""
    for kind, rels in CASSETTES.items():
        for rel in rels:
            n = interaction_count(CORPUS_CASSETTES / rel)
            for i in range(n - 1):
                now, _, _ = load_cassette(CORPUS_CASSETTES / rel, i)
                after, _, _ = load_cassette(CORPUS_CASSETTES / rel, i + 1)
                if len(_turns(after)) > len(_turns(now)):
                    yield pytest.param(kind, rel, i, id=f"{rel.split('/')[-1]}#{i}")


def _sent_back(kind: str, request: dict) -> object:
    """The last assistant turn of a recorded request, as the agent sent it."""
    if kind == "gemini":
        return next(c for c in reversed(request["contents"]) if c.get("role") == "model")
    return next(m for m in reversed(request["messages"]) if m["role"] == "assistant")


def _blocks(blocks: list[dict]) -> list[ContentBlock]:
    return [
        msgspec.convert({k: v for k, v in b.items() if k != "cache_control"}, ContentBlock)
        for b in blocks
    ]


def _signature_bytes(sig: str) -> bytes:
    # The agent re-encodes Gemini's signatures as base64url; the bytes are the same.
    return base64.urlsafe_b64decode(sig.replace("+", "-").replace("/", "_"))


@pytest.mark.parametrize(("kind", "rel", "i"), list(_pairs()))
def test_a_response_is_the_turn_the_agent_sent_back(kind, rel, i):
    _, response, _ = load_cassette(CORPUS_CASSETTES / rel, i)
    request_after, _, _ = load_cassette(CORPUS_CASSETTES / rel, i + 1)
    read = get_provider(kind).read_response(response)
    sent = _sent_back(kind, request_after)
    if kind == "anthropic":
        assert list(read.content) == _blocks(sent["content"])
    elif kind == "openai-chat":
        calls = [b for b in read.content if isinstance(b, ToolUseBlock)]
        assert [(c.id, c.name, c.input) for c in calls] == [
            (t["id"], t["function"]["name"], json.loads(t["function"]["arguments"]))
            for t in sent.get("tool_calls") or []
        ]
        text = "".join(b.text for b in read.content if isinstance(b, TextBlock))
        assert text == (sent.get("content") or "")
    else:
        parts = sent["parts"]
        calls = [b for b in read.content if isinstance(b, ToolUseBlock)]
        assert [(c.name, c.input) for c in calls] == [
            (p["functionCall"]["name"], p["functionCall"].get("args", {}))
            for p in parts
            if "functionCall" in p
        ]
        signatures = [b.signature for b in read.content if isinstance(b, ThinkingBlock)]
        assert [_signature_bytes(s) for s in signatures] == [
            _signature_bytes(p["thoughtSignature"]) for p in parts if "thoughtSignature" in p
        ]


@pytest.mark.parametrize(("kind", "rel"), [(k, r) for k, rels in CASSETTES.items() for r in rels])
def test_the_usage_read_is_the_usage_recorded(kind, rel):
    _, response, _ = load_cassette(CORPUS_CASSETTES / rel, -1)
    read = get_provider(kind).read_response(json.dumps(response).encode())
    raw = response.get("usage") or response.get("usageMetadata")
    assert read.raw_usage == raw
    assert read.usage == get_provider(kind).parse_usage(response)
    assert read.usage is not None and read.usage.prompt_tokens > 0


def test_responses_items_and_unknown_blocks_are_kept_apart():
    body = {
        "id": "resp_1",
        "model": "gpt-5",
        "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": '{"p": 1}'},
        ],
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }
    read = get_provider("openai-responses").read_response(body)
    assert read.content == (TextBlock(text="Hi"), ToolUseBlock(id="c1", name="ls", input={"p": 1}))
    assert read.unknown == ({"type": "reasoning", "id": "rs_1", "summary": []},)
    assert read.usage is not None and read.usage.input_tokens == 10
    anthropic = get_provider("anthropic").read_response(
        {
            "role": "assistant",
            "content": [
                {"type": "server_tool_use", "id": "s", "name": "web_search"},
                {"type": "text", "text": "x"},
            ],
        }
    )
    assert anthropic.content == (TextBlock(text="x"),) and len(anthropic.unknown) == 1


def test_broken_arguments_are_kept_not_lost():
    assert tool_arguments('{"a": 1') == ({"arguments": '{"a": 1'}, '{"a": 1')
    assert tool_arguments("[1, 2]") == ({"arguments": [1, 2]}, "[1, 2]")
    assert tool_arguments("") == ({}, None)


def test_a_response_that_is_not_json_is_a_clear_error():
    with pytest.raises(ProviderError, match="not JSON"):
        get_provider("anthropic").read_response(b"<html>")
    with pytest.raises(ProviderError, match="must be an object"):
        get_provider("anthropic").read_response([1, 2])
