"""Prompt-too-long refusals as the official SDKs and raw HTTP clients raise them.

A loopback server answers with each vendor's real refusal body (the wording quoted in
the vendors' issue trackers) and the SDK raises its own exception object; that object —
not a stand-in — must be recognised, and the SDK's other errors must not be.  The SDKs
keep the body in different places (anthropic: the whole envelope; openai: the inner
error object; google-genai: ``details`` and ``code``, no ``status_code``), which is what
went wrong before for all but Anthropic.
"""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from ctxrules.compaction import is_prompt_too_long
from ctxrules.providers import error_parts, prompt_too_long_of
from loopback import Loopback, Reply

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")
httpx = pytest.importorskip("httpx")
httpx2 = pytest.importorskip("httpx2")
requests = pytest.importorskip("requests")

ANTHROPIC = {
    "too long": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208656 tokens > 200000 maximum",
        },
        "request_id": "req_011",
    },
    "with max_tokens": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 189136 + 20000 > "
            "204648, decrease input length or `max_tokens` and try again",
        },
    },
    "other": {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "messages: roles must alternate"},
    },
}
OPENAI_CHAT_TOO_LONG = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 173172 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
OPENAI_RESPONSES_TOO_LONG = {
    "error": {
        "message": "Your input exceeds the context window of this model. Please adjust your "
        "input and try again.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
}
OPENAI_OTHER = {
    "error": {
        "message": "Invalid value for 'temperature'.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "invalid_value",
    }
}
GEMINI_TOO_LONG = {
    "error": {
        "code": 400,
        "message": "The input token count (1094897) exceeds the maximum number of tokens "
        "allowed (1000000).",
        "status": "INVALID_ARGUMENT",
    }
}
GEMINI_OLDER = {
    "error": {
        "code": 400,
        "message": "Input request contains (35490) tokens, which is more than the max tokens "
        "limit allowed: (30720)",
        "status": "INVALID_ARGUMENT",
    }
}
GEMINI_OTHER = {
    "error": {
        "code": 400,
        "message": "Invalid JSON payload received.",
        "status": "INVALID_ARGUMENT",
    }
}


def _raised(call) -> BaseException:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("the SDK did not raise")


@pytest.mark.parametrize(
    ("body", "too_long", "numbers"),
    [
        (ANTHROPIC["too long"], True, (208656, 200000)),
        (ANTHROPIC["with max_tokens"], True, (189136, 204648)),
        (ANTHROPIC["other"], False, None),
    ],
)
def test_anthropic_sdk_errors(body, too_long, numbers):
    with Loopback() as server:
        server.reply(Reply(body, status=400))
        client = anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0)
        exc = _raised(lambda: client.messages.create(model="m", max_tokens=5, messages=[]))
    assert isinstance(exc, anthropic.BadRequestError)
    assert is_prompt_too_long(exc, "anthropic") is too_long
    if numbers:
        found = prompt_too_long_of(exc, "anthropic")
        assert (found.tokens, found.limit) == numbers


def test_an_anthropic_mid_stream_error_is_not_a_refusal():
    msg = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "c",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events = [
        ("message_start", {"type": "message_start", "message": msg}),
        (
            "error",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
    ]
    with Loopback() as server:
        server.reply(Reply(events=events))
        client = anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0)

        def stream() -> None:
            with client.messages.stream(model="m", max_tokens=5, messages=[]) as s:
                s.until_done()

        exc = _raised(stream)
    assert getattr(exc, "status_code", None) == 200  # the SDK's way: status 200, error body
    assert not is_prompt_too_long(exc, "anthropic")
    assert error_parts(exc)[1]["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize(
    ("api", "body", "too_long"),
    [
        ("chat", OPENAI_CHAT_TOO_LONG, True),
        ("responses", OPENAI_RESPONSES_TOO_LONG, True),
        ("chat", OPENAI_OTHER, False),
    ],
)
def test_openai_sdk_errors(api, body, too_long):
    with Loopback() as server:
        server.reply(Reply(body, status=400))
        client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        if api == "chat":
            exc = _raised(
                lambda: client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}]
                )
            )
        else:
            exc = _raised(lambda: client.responses.create(model="m", input="x"))
    assert isinstance(exc, openai.BadRequestError)
    assert exc.body == body["error"]  # the SDK keeps only the inner object
    provider = "openai-chat" if api == "chat" else "openai-responses"
    assert is_prompt_too_long(exc, provider) is too_long


def test_an_openai_rate_limit_is_not_a_refusal():
    with Loopback() as server:
        server.reply(
            Reply(
                {
                    "error": {
                        "message": "Rate limit reached",
                        "type": "requests",
                        "code": "rate_limit_exceeded",
                    }
                },
                status=429,
            )
        )
        client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        exc = _raised(lambda: client.chat.completions.create(model="m", messages=[]))
    assert isinstance(exc, openai.RateLimitError)
    assert not is_prompt_too_long(exc, "openai-chat")


@pytest.mark.parametrize(
    ("body", "too_long"), [(GEMINI_TOO_LONG, True), (GEMINI_OLDER, True), (GEMINI_OTHER, False)]
)
def test_google_genai_errors(body, too_long):
    with Loopback() as server:
        server.reply(Reply(body, status=400))
        client = genai.Client(
            api_key="k", http_options=genai.types.HttpOptions(base_url=server.url)
        )
        exc = _raised(
            lambda: client.models.generate_content(model="gemini-2.5-flash", contents="x")
        )
    assert isinstance(exc, genai.errors.ClientError)
    assert not hasattr(exc, "status_code")  # why the status must come from .code
    assert is_prompt_too_long(exc, "gemini") is too_long


def _raw_clients(url: str):
    def with_httpx2() -> None:
        httpx2.post(url, json={}).raise_for_status()

    def with_httpx() -> None:
        httpx.post(url, json={}).raise_for_status()

    def with_requests() -> None:
        requests.post(url, json={}, timeout=10).raise_for_status()

    def with_urllib() -> None:
        urllib.request.urlopen(urllib.request.Request(url, data=b"{}"), timeout=10)

    return {
        "httpx2": with_httpx2,
        "httpx": with_httpx,
        "requests": with_requests,
        "urllib": with_urllib,
    }


@pytest.mark.parametrize("client", ["httpx2", "httpx", "requests", "urllib"])
@pytest.mark.parametrize(
    ("provider", "body", "too_long"),
    [
        ("anthropic", ANTHROPIC["too long"], True),
        ("openai-chat", OPENAI_CHAT_TOO_LONG, True),
        ("gemini", GEMINI_TOO_LONG, True),
        ("anthropic", ANTHROPIC["other"], False),
    ],
)
def test_raw_http_errors(client, provider, body, too_long):
    with Loopback() as server:
        server.reply(Reply(body, status=400))
        exc = _raised(_raw_clients(server.url + "/v1/x")[client])
    if client == "urllib":
        assert isinstance(exc, urllib.error.HTTPError)
    assert is_prompt_too_long(exc, provider) is too_long
    assert is_prompt_too_long(exc, provider) is too_long  # asked twice: the body was kept


def test_an_error_wrapped_by_a_framework_is_found_through_its_cause():
    with Loopback() as server:
        server.reply(Reply(OPENAI_CHAT_TOO_LONG, status=400))
        client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        sdk_error = _raised(lambda: client.chat.completions.create(model="m", messages=[]))

    class FrameworkError(Exception):
        pass

    try:
        raise FrameworkError("the model call failed") from sdk_error
    except FrameworkError as wrapped:
        assert is_prompt_too_long(wrapped, "openai-chat")


def test_a_proxy_answering_in_another_vendors_dialect_is_recognised():
    # An OpenAI-compatible proxy in front of Claude answers in OpenAI's shape.
    with Loopback() as server:
        server.reply(Reply(OPENAI_CHAT_TOO_LONG, status=400))
        exc = _raised(_raw_clients(server.url)["httpx2"])
    assert is_prompt_too_long(exc, "anthropic")
