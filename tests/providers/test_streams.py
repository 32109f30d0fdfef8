"""Streamed answers: the events an official SDK yields, accumulated, are the answer.

Each vendor's answer (a recorded cassette response; for Responses the documented
shape) is sent by a loopback server as the vendor streams it.  The oracle is the SDK's
own accumulation (``get_final_message`` / ``get_final_completion`` /
``get_final_response``), and for Gemini, which has none, the answer we streamed: what
``read_response`` reads from the list of events, from the server-sent-event text and
through ``StreamAccumulator`` must be what it reads from that.  A stream cut short,
one event on its own and an error event are refused with typed errors.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import msgspec
import pytest

from ctxrules.errors import PromptTooLongError, StreamError, VendorError
from ctxrules.model import ThinkingBlock
from ctxrules.providers import StreamAccumulator, get_provider
from fake_vendors import (
    RESPONSES_ANSWER,
    anthropic_events,
    chat_chunks,
    gemini_chunks,
    responses_events,
)
from loopback import Loopback, Reply

from .conftest import CASSETTES, CORPUS_CASSETTES, load_cassette

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")


def _answer(kind: str, rel: str | None = None) -> dict[str, Any]:
    # Gemini: the first answer, three function calls in three parts (three chunks).
    at = 0 if kind == "gemini" else -1
    _, response, _ = load_cassette(CORPUS_CASSETTES / (rel or CASSETTES[kind][0]), at)
    return response


def _blocks(read) -> list:
    """The blocks, a Gemini signature as its bytes: google-genai holds it as bytes and
    writes base64url, the REST API base64 (the API takes both, test_responses.py)."""
    out = []
    for b in read.content:
        if isinstance(b, ThinkingBlock) and b.vendor == "gemini" and b.signature:
            sig = b.signature.replace("+", "-").replace("/", "_")
            b = msgspec.structs.replace(b, signature=base64.urlsafe_b64decode(sig + "==").hex())
        out.append(b)
    return out


def _same(a, b) -> None:
    assert _blocks(a) == _blocks(b)
    assert a.usage == b.usage
    assert (a.model, a.stop_reason) == (b.model, b.stop_reason)


def _data(events: list[tuple[str, Any]]) -> list[Any]:
    return [d for _, d in events if not isinstance(d, str)]


# -- each SDK, against the loopback server ------------------------------------------------


@pytest.mark.parametrize("rel", CASSETTES["anthropic"])
def test_anthropic_sdk_stream_events_are_the_answer(rel):
    answer = _answer("anthropic", rel)
    events = anthropic_events(answer)
    provider = get_provider("anthropic")
    with Loopback() as server:
        server.reply(Reply(events=events), Reply(events=events))
        client = anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0)
        raw = list(client.messages.create(model="m", max_tokens=5, messages=[], stream=True))
        with client.messages.stream(model="m", max_tokens=5, messages=[]) as stream:
            helped = list(stream)  # the helper adds its own text / input_json events
            final = stream.get_final_message()
    oracle = provider.read_response(final)
    _same(provider.read_response(raw), oracle)
    _same(provider.read_response(helped), oracle)
    _same(oracle, provider.read_response(answer))  # the SDK put back what we streamed
    acc = StreamAccumulator("anthropic")
    for e in raw[:-1]:
        acc.add(e)
        assert not acc.done
    acc.add(raw[-1])
    _same(provider.read_response(acc.response()), oracle)
    sse = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events)
    _same(provider.read_response(sse), oracle)


def test_openai_chat_sdk_stream_chunks_are_the_answer():
    answer = _answer("openai-chat")
    chunks = chat_chunks(answer)
    provider = get_provider("openai-chat")
    with Loopback() as server:
        server.reply(Reply(events=chunks), Reply(events=chunks))
        client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        kwargs: dict[str, Any] = {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "stream_options": {"include_usage": True},
        }
        raw = list(client.chat.completions.create(stream=True, **kwargs))
        with client.chat.completions.stream(**kwargs) as stream:
            helped = list(stream)
            final = stream.get_final_completion()
    oracle = provider.read_response(final)
    _same(provider.read_response(raw), oracle)
    _same(provider.read_response(helped), oracle)
    _same(oracle, provider.read_response(answer))
    assert (
        oracle.usage is not None and oracle.usage.prompt_tokens == answer["usage"]["prompt_tokens"]
    )


def test_openai_responses_sdk_stream_events_are_the_answer():
    events = responses_events(RESPONSES_ANSWER)
    provider = get_provider("openai-responses")
    with Loopback() as server:
        server.reply(Reply(events=events), Reply(events=events))
        client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        raw = list(client.responses.create(model="m", input="x", stream=True))
        with client.responses.stream(model="m", input="x") as stream:
            helped = list(stream)
            final = stream.get_final_response()
    oracle = provider.read_response(final)
    _same(provider.read_response(raw), oracle)
    _same(provider.read_response(helped), oracle)
    _same(oracle, provider.read_response(RESPONSES_ANSWER))
    assert [b.name for b in oracle.content if hasattr(b, "name")] == ["ls"]


def test_gemini_sdk_stream_chunks_are_the_answer():
    answer = _answer("gemini")
    chunks = gemini_chunks(answer)
    provider = get_provider("gemini")
    with Loopback() as server:
        server.reply(Reply(events=chunks))
        client = genai.Client(
            api_key="k", http_options=genai.types.HttpOptions(base_url=server.url)
        )
        raw = list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="x"))
    assert len(raw) == len(chunks) > 1
    _same(provider.read_response(raw), provider.read_response(answer))
    # Usage is cumulative on every chunk: the last is kept, never the sum.
    assert provider.read_response(raw).usage == provider.parse_usage(answer)


def test_gemini_text_split_over_chunks_is_joined_per_kind():
    def chunk(*parts: dict, finish: str | None = None) -> dict:
        cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
        if finish:
            cand["finishReason"] = finish
        return {"candidates": [cand], "usageMetadata": {"promptTokenCount": 9}}

    read = get_provider("gemini").read_response(
        [
            chunk({"text": "Let me ", "thought": True}),
            chunk({"text": "think.", "thought": True}),
            chunk({"text": "The answer", "thoughtSignature": "c2ln"}),
            chunk({"text": " is 4."}, finish="STOP"),
        ]
    )
    assert [
        (type(b).__name__, getattr(b, "text", getattr(b, "thinking", ""))) for b in read.content
    ] == [
        ("ThinkingBlock", "Let me think."),
        ("ThinkingBlock", ""),  # the signature, on the part that carried it
        ("TextBlock", "The answer is 4."),
    ]


# -- what is refused ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "events"),
    [
        ("anthropic", _data(anthropic_events(_answer("anthropic")))),
        ("openai-chat", _data(chat_chunks(_answer("openai-chat")))),
        ("openai-responses", _data(responses_events(RESPONSES_ANSWER))),
        ("gemini", _data(gemini_chunks(_answer("gemini")))),
    ],
)
def test_a_stream_cut_short_or_one_event_is_refused(kind, events):
    provider = get_provider(kind)
    provider.read_response(events)  # whole: read
    cut = events[:-2] if kind == "openai-chat" else events[:-1]  # chat: usage chunk last
    with pytest.raises(StreamError, match="not finished") as exc:
        provider.read_response(cut)
    assert "missing" in str(exc.value)
    with pytest.raises(StreamError, match="stream"):
        provider.read_response(events[0])
    with pytest.raises(StreamError, match="not finished"):
        provider.read_response([])
    acc = StreamAccumulator(kind)
    acc.extend(cut)
    assert not acc.done
    with pytest.raises(StreamError):
        acc.response()


def test_an_sdk_stream_object_is_refused_with_how_to_hand_it_over():
    events = anthropic_events(_answer("anthropic"))
    with Loopback() as server:
        server.reply(Reply(events=events))
        client = anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0)
        stream = client.messages.create(model="m", max_tokens=5, messages=[], stream=True)
        with pytest.raises(StreamError, match="get_final_message"):
            get_provider("anthropic").read_response(stream)
        stream.close()


def test_error_events_are_the_vendors_errors():
    msg = dict(_answer("anthropic"), content=[], stop_reason=None)
    overloaded = [
        {"type": "message_start", "message": msg},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    with pytest.raises(VendorError, match="Overloaded") as exc:
        get_provider("anthropic").read_response(overloaded)
    assert exc.value.type == "overloaded_error"
    too_long = {
        "code": "context_length_exceeded",
        "message": "Your input exceeds the context window of this model. Please adjust "
        "your input and try again.",
    }
    created = {"type": "response.created", "response": dict(RESPONSES_ANSWER, status="in_progress")}
    failed = {
        "type": "response.failed",
        "response": dict(RESPONSES_ANSWER, status="failed", error=too_long),
    }
    with pytest.raises(PromptTooLongError):
        get_provider("openai-responses").read_response([created, failed])
    with pytest.raises(PromptTooLongError):
        get_provider("openai-responses").read_response(
            [created, {"type": "error", "param": "input", **too_long}]
        )
    chunk = {"error": {"message": "The server had an error", "type": "server_error"}}
    with pytest.raises(VendorError, match="server had an error"):
        get_provider("openai-chat").read_response([chunk])


def test_a_responses_stream_raw_from_the_sdk_keeps_the_refusal_code():
    """The SDK's raw stream does not raise on ``response.failed`` (and its helper turns it
    into a bare RuntimeError): the events handed to ``record`` keep the code."""
    created = {
        "type": "response.created",
        "sequence_number": 0,
        "response": dict(RESPONSES_ANSWER, status="in_progress", output=[], usage=None),
    }
    failed = copy.deepcopy(created)
    failed.update(type="response.failed", sequence_number=1)
    failed["response"].update(
        status="failed",
        error={
            "code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model.",
        },
    )
    with Loopback() as server:
        server.reply(Reply(events=[("response.created", created), ("response.failed", failed)]))
        client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        raw = list(client.responses.create(model="m", input="x", stream=True))
    with pytest.raises(PromptTooLongError):
        get_provider("openai-responses").read_response(raw)
