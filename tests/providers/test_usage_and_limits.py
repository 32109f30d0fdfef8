"""Usage parsing on every recorded response, prompt-too-long recognition, plugin providers."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import yaml

from ctxrules.errors import PromptTooLongError
from ctxrules.model import Context, ContextCommit, ContextItem
from ctxrules.providers import ModelInfo, Provider, Usage, get_provider, resolve_model

from .conftest import CASSETTES, CORPUS_CASSETTES


def _responses(kind: str) -> list[dict[str, Any]]:
    out = []
    for rel in CASSETTES[kind]:
        doc = yaml.safe_load((CORPUS_CASSETTES / rel).read_text(encoding="utf-8"))
        out += [it["response"]["parsed_body"] for it in doc["interactions"]]
    return out


def test_anthropic_usage_of_every_recorded_response():
    prov = get_provider("anthropic")
    responses = _responses("anthropic")
    assert len(responses) == 6
    for r in responses:
        u = r["usage"]
        got = prov.parse_usage(r)
        assert got == Usage(
            input_tokens=u["input_tokens"],
            cache_read_tokens=u["cache_read_input_tokens"],
            cache_write_tokens=u["cache_creation_input_tokens"],
            output_tokens=u["output_tokens"],
        )
        assert got.prompt_tokens == (
            u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        )
    # The cache cassette really exercises the cache fields.
    assert any(prov.parse_usage(r).cache_read_tokens > 0 for r in responses)


def test_openai_chat_usage_of_every_recorded_response():
    prov = get_provider("openai-chat")
    for r in _responses("openai-chat"):
        u = r["usage"]
        got = prov.parse_usage(r)
        assert got.prompt_tokens == u["prompt_tokens"]
        assert got.cache_read_tokens == u["prompt_tokens_details"]["cached_tokens"]
        assert got.output_tokens == u["completion_tokens"]


def test_gemini_usage_of_every_recorded_response():
    prov = get_provider("gemini")
    for r in _responses("gemini"):
        u = r["usageMetadata"]
        got = prov.parse_usage(r)
        assert got.prompt_tokens == u["promptTokenCount"]
        assert got.output_tokens + got.prompt_tokens == u["totalTokenCount"]


def test_no_usage_is_none():
    for name in ("anthropic", "openai-chat", "openai-responses", "gemini"):
        assert get_provider(name).parse_usage({"id": "x"}) is None


# Error bodies as each vendor documents them.
TOO_LONG = {
    "anthropic": (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 208310 tokens > 200000 maximum",
            },
        },
        (208310, 200000),
    ),
    "openai-chat": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, "
                "your messages resulted in 130512 tokens. Please reduce the length.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        (130512, 128000),
    ),
    "openai-responses": (
        400,
        {
            "error": {
                "message": "Your input exceeds the context window of this model. "
                "Please adjust your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
        (None, None),
    ),
    "gemini": (
        400,
        {
            "error": {
                "code": 400,
                "message": "The input token count (1200000) exceeds the maximum number of "
                "tokens allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
        (1200000, 1048576),
    ),
}


@pytest.mark.parametrize("name", sorted(TOO_LONG))
def test_prompt_too_long_recognised(name):
    status, body, (tokens, limit) = TOO_LONG[name]
    err = get_provider(name).prompt_too_long(status, body)
    assert isinstance(err, PromptTooLongError)
    assert (err.tokens, err.limit) == (tokens, limit)
    assert "compact" in str(err)
    # Other errors of the same vendor are not mistaken for it.
    other = {"error": {"type": "invalid_request_error", "message": "messages: field required"}}
    assert get_provider(name).prompt_too_long(400, other) is None
    assert get_provider(name).prompt_too_long(500, body) is None


class _EchoProvider(Provider):
    """A plugin-style provider: no Rust wire, builds its body from the neutral context."""

    name = "echo"
    family = "echo"
    default_model = "echo-1"

    def endpoint(self, model: str) -> str:
        return "/echo"

    def build_body(self, context: Context, options) -> dict[str, Any]:
        return {"model": options.model, "turns": msgspec.to_builtins(context.messages)}


def test_plugins_extend_providers_and_models(fresh_plugins):
    import types

    from ctxrules import plugins
    from ctxrules.hookspecs import hookimpl
    from ctxrules.render import render

    module = types.ModuleType("echo_plugin")

    @hookimpl
    def register_providers(register):
        register(_EchoProvider())

    @hookimpl
    def register_models(register):
        register(
            ModelInfo(
                name="echo-all",
                pattern="echo:*",
                context_window=1000,
                max_output_tokens=100,
                tokenizer="o200k_base",
            )
        )
        register(
            ModelInfo(
                name="bigger-sonnet",
                pattern="anthropic:claude-sonnet-4-5*",
                context_window=1_000_000,
            )
        )

    module.register_providers = register_providers  # type: ignore[attr-defined]
    module.register_models = register_models  # type: ignore[attr-defined]
    plugins.get_plugin_manager().register(module, name="echo_plugin")
    assert resolve_model("echo:echo-1").context_window == 1000
    assert resolve_model("anthropic:claude-sonnet-4-5").context_window == 1_000_000
    c = ContextCommit(
        id="c",
        session_id="s",
        head_node_id="h",
        rules_version="r",
        items=(ContextItem(source_node_id="u", role="user", rendered="hello"),),
    )
    r = render(c, "echo")
    assert r.endpoint == "/echo"
    assert msgspec.json.decode(r.body) == {
        "model": "echo-1",
        "turns": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
    }
