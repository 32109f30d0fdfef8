"""The estimator's rules one by one, with expected counts worked out from the rules."""

from __future__ import annotations

import base64
import struct
from typing import Any

import pytest

from ctxrules import count
from ctxrules.errors import ValidationError
from ctxrules.providers import get_provider, resolve_model
from ctxrules.providers.anthropic import (
    ANTHROPIC_MESSAGE_TOKENS,
    ANTHROPIC_REQUEST_TOKENS,
    ANTHROPIC_TOOL_BLOCK_TOKENS,
)
from ctxrules.providers.images import image_size
from ctxrules.providers.openai_chat import OPENAI_TOOL_CALL_TOKENS, openai_tool_namespace


def _estimate(provider: str, model: str, body: dict):
    prov = get_provider(provider)
    return prov.estimate_prompt(body, resolve_model(f"{prov.family}:{model}"))


def test_openai_message_framing_is_the_cookbooks():
    # tiktoken's cookbook: 3 per message + the role + the content, 1 more for a name,
    # and 3 that prime the reply.
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "hello there", "name": "ann"},
        ],
    }
    expected = (
        (3 + count("system") + count("You are terse."))
        + (3 + count("user") + count("hello there") + 1 + count("ann"))
        + 3
    )
    e = _estimate("openai-chat", "gpt-4o", body)
    assert e.input_tokens == expected
    assert e.rules["framing_tokens"] == 3 + 4 + 3 and e.rules["tool_prompt_tokens"] == 0


def test_openai_tools_are_read_as_a_typescript_namespace():
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["c", "f"]},
                    "days": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["city"],
            },
        },
    }
    assert openai_tool_namespace([tool]) == (
        "namespace functions {\n\n"
        "// Weather for a city.\n"
        "type get_weather = (_: {\n"
        "// City name\n"
        "city: string,\n"
        'unit?: "c" | "f",\n'
        "days?: number[],\n"
        "}) => any;\n\n"
        "} // namespace functions"
    )
    body = {"model": "gpt-5-mini", "messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    e = _estimate("openai-chat", "gpt-5-mini", body)
    profile = resolve_model("openai:gpt-5-mini")
    expected = (
        profile.tool_prompt_tokens
        + count(openai_tool_namespace([tool]))
        + (3 + count("user") + count("hi"))
        + profile.rule("reply")  # 2 on the gpt-5 models (fitted), 3 by the cookbook
    )
    assert e.input_tokens == expected


def test_openai_tool_calls_and_results():
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a":1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ],
    }

    def expected(per_call: int) -> int:
        return (
            (3 + count("user") + count("q"))
            + (3 + count("assistant") + count('f{"a":1}') + per_call)
            + (3 + count("tool") + count("42"))
            + 3
        )

    # On Chat, gpt-4o's call with its result costs 16 when the request declares no
    # tools (fitted); the default model's costs OPENAI_TOOL_CALL_TOKENS either way.
    assert _estimate("openai-chat", "gpt-4o", body).input_tokens == expected(16)
    assert (
        _estimate("openai-chat", "gpt-5", body).input_tokens
        == expected(OPENAI_TOOL_CALL_TOKENS) - 1
    )  # gpt-5 primes the reply with 2
    # The Responses API form of the same conversation counts the cookbook's call.
    responses = {
        "model": "gpt-4o",
        "input": [
            {"type": "message", "role": "user", "content": "q"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a":1}'},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ],
    }
    assert _estimate("openai-responses", "gpt-4o", responses).input_tokens == expected(
        OPENAI_TOOL_CALL_TOKENS
    )


def test_anthropic_tool_prompt_follows_tool_choice():
    """The tool-use page's current table: 496 (auto / none) and 588 (any / tool) for
    the 4.5 models; the forced choice costs more, as it does there."""
    tool = {"name": "t", "description": "d", "input_schema": {"type": "object"}}
    base = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
    auto = _estimate("anthropic", "claude-sonnet-4-5", {**base, "tools": [tool]})
    forced = _estimate(
        "anthropic",
        "claude-sonnet-4-5",
        {**base, "tools": [tool], "tool_choice": {"type": "any"}},
    )
    none = _estimate("anthropic", "claude-sonnet-4-5", base)
    assert auto.rules["tool_prompt_tokens"] == 496 and forced.rules["tool_prompt_tokens"] == 588
    assert none.rules["tool_prompt_tokens"] == 0
    assert auto.input_tokens - forced.input_tokens == 496 - 588


def test_anthropic_counts_thinking_of_the_last_turn_only():
    thinking = {"type": "thinking", "thinking": "step " * 50, "signature": "sig"}
    turn = {"role": "assistant", "content": [thinking, {"type": "text", "text": "done"}]}
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "a"},
            turn,
            {"role": "user", "content": "b"},
            turn,
            {"role": "user", "content": "c"},
        ],
    }
    e = _estimate("anthropic", "claude-sonnet-4-5", body)
    without = _estimate(
        "anthropic",
        "claude-sonnet-4-5",
        {
            **body,
            "messages": [
                {**m, "content": m["content"][1:]} if m is turn else m for m in body["messages"]
            ],
        },
    )
    assert e.input_tokens - without.input_tokens == count("step " * 50)


def test_anthropic_tool_blocks_carry_their_framing():
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "1", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "1", "content": "ok"}],
            },
        ],
    }
    e = _estimate("anthropic", "claude-sonnet-4-5", body)
    # Two tool blocks, three turn markers and the request's own framing.
    assert e.rules["framing_tokens"] == (
        2 * ANTHROPIC_TOOL_BLOCK_TOKENS + 3 * ANTHROPIC_MESSAGE_TOKENS + ANTHROPIC_REQUEST_TOKENS
    )


def _png(w: int, h: int) -> bytes:
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + b"IHDR"
        + struct.pack(">II", w, h)
        + b"\x08\x02\x00\x00\x00"
    )


def _jpeg(w: int, h: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    sof = b"\xff\xc0" + struct.pack(">HBHH", 17, 8, h, w) + b"\x03" + b"\x00" * 9
    return b"\xff\xd8" + app0 + sof


def test_image_sizes_from_headers():
    assert image_size(_png(800, 600)) == (800, 600)
    assert image_size(_jpeg(1024, 768)) == (1024, 768)
    assert image_size(b"GIF89a" + struct.pack("<HH", 32, 16)) == (32, 16)
    assert image_size(b"not an image") is None


@pytest.mark.parametrize(
    "provider,model,size,tokens",
    [
        # Anthropic: width x height / 750 → 800 x 600 = 640.
        ("anthropic", "claude-sonnet-4-5", (800, 600), 640),
        # OpenAI high detail: 1024 x 1024 → short side to 768 → 2 x 2 tiles → 85 + 4 x 170.
        ("openai-chat", "gpt-4o", (1024, 1024), 765),
        # Gemini: 800 x 600 → 2 x 1 tiles of 768 → 2 x 258.
        ("gemini", "gemini-2.5-flash", (800, 600), 516),
    ],
)
def test_image_tokens_per_vendor(provider, model, size, tokens):
    data = base64.b64encode(_png(*size)).decode()
    if provider == "anthropic":
        block = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }
        body = {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": [block]}]}
    elif provider == "openai-chat":
        part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
        body = {"model": model, "messages": [{"role": "user", "content": [part]}]}
    else:
        part = {"inlineData": {"mimeType": "image/png", "data": data}}
        body = {"contents": [{"role": "user", "parts": [part]}]}
    assert _estimate(provider, model, body).rules["image_tokens"] == tokens


def test_gemini_thought_signatures_are_billed_as_thinking():
    call = {"functionCall": {"name": "f", "args": {}}}
    plain = {"contents": [{"role": "model", "parts": [call]}]}
    signed = {"contents": [{"role": "model", "parts": [{**call, "thoughtSignature": "A" * 1000}]}]}
    a = _estimate("gemini", "gemini-3-flash-preview", plain)
    b = _estimate("gemini", "gemini-3-flash-preview", signed)
    # 0.225 tokens per base64 character, less 29: 196 for 1,000 characters.
    assert b.input_tokens - a.input_tokens == 196


def test_unrecorded_prefix_leads_the_segments():
    body = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}
    prov = get_provider("anthropic")
    profile = resolve_model("anthropic:claude-sonnet-4-5")
    plain = prov.estimate_prompt(body, profile)
    e = prov.estimate_prompt(body, profile, prefix_tokens=5000)
    assert e.input_tokens == plain.input_tokens + 5000
    assert e.segments[0].tokens == 5000 and e.rules["unrecorded_prefix_tokens"] == 5000
    with pytest.raises(ValidationError, match="prefix_tokens must be >= 0"):
        prov.estimate_prompt(body, profile, prefix_tokens=-1)


def test_chat_tool_section_of_the_gpt4_models():
    """GPT-4 / 4o / 3.5 on Chat: the tool section is 9 beyond the declarations, 4 fewer
    with a system message (the declarations join it), 2 more with parallel calls off
    and 9 more for a named tool choice; gpt-4.1 keeps the cookbook's 12 throughout."""
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    user = {"role": "user", "content": "weather?"}
    system = {"role": "system", "content": "be brief"}
    bare = {"model": "gpt-4o", "messages": [user]}
    tools = {**bare, "tools": [tool]}

    def tokens(body: dict, model: str = "gpt-4o") -> int:
        return _estimate("openai-chat", model, {**body, "model": model}).input_tokens

    declared = count(openai_tool_namespace([tool]))
    assert tokens(tools) - tokens(bare) == declared + 9
    with_system = {**tools, "messages": [system, user]}
    system_alone = {**bare, "messages": [system, user]}
    assert tokens(with_system) - tokens(system_alone) == declared + 9 - 4
    assert tokens({**tools, "parallel_tool_calls": False}) - tokens(tools) == 2
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert tokens({**tools, "tool_choice": named}) - tokens(tools) == 9
    assert tokens({**tools, "tool_choice": "required"}) == tokens(tools)
    assert tokens({**tools, "tool_choice": {"type": "auto"}}) == tokens(tools)
    # gpt-4.1: no rule of the GPT-4 models carries over.
    assert tokens(with_system, "gpt-4.1") - tokens(system_alone, "gpt-4.1") == declared + 12
    assert tokens({**tools, "tool_choice": named}, "gpt-4.1") == tokens(tools, "gpt-4.1")


def test_chat_tool_call_costs_less_where_tools_are_declared():
    """A call with its result: 7 on gpt-4o where the request declares tools, 16 where it
    declares none (fitted); other models keep OPENAI_TOOL_CALL_TOKENS both ways."""
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    result = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    tool = {"type": "function", "function": {"name": "f"}}
    first = [{"role": "user", "content": "q"}]
    for model, declared, undeclared in (
        ("gpt-4o", 7, 16),
        ("gpt-4.1", OPENAI_TOOL_CALL_TOKENS, OPENAI_TOOL_CALL_TOKENS),
    ):

        def tokens(messages: list, tools: list | None, model: str = model) -> int:
            body = {"model": model, "messages": messages, **({"tools": tools} if tools else {})}
            return _estimate("openai-chat", model, body).input_tokens

        call_part = 3 + count("assistant") + count("f{}") + 3 + count("tool") + count("42")
        assert tokens([*first, call, result], [tool]) - tokens(first, [tool]) == (
            call_part + declared
        ), model
        assert tokens([*first, call, result], None) - tokens(first, None) == (
            call_part + undeclared
        ), model


def test_a_default_is_read_as_a_comment_after_its_property():
    """OpenAI's TypeScript rendering of a tool writes a property's default as
    ``// default: value`` after it (strings as they are, other values as JSON)."""
    tool = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {
                    "unit": {"type": "string", "default": "celsius"},
                    "n": {"type": "integer", "default": 1},
                },
            },
        },
    }
    text = openai_tool_namespace([tool])
    assert "unit?: string, // default: celsius" in text
    assert "n?: number, // default: 1" in text


def test_claude_3_frames_a_request_one_token_less():
    """Claude 3 (Haiku, Opus, Sonnet) frames a request with one token less than the
    later models (fitted: the fit set's Claude 3 requests are 1 over at the median)."""
    body = {"max_tokens": 10, "messages": [{"role": "user", "content": "Say hello"}]}

    def tokens(model: str) -> int:
        return _estimate("anthropic", model, {**body, "model": model}).input_tokens

    later = tokens("claude-sonnet-4-5")
    for model in ("claude-3-haiku-20240307", "claude-3-opus-20240229", "claude-3-sonnet-20240229"):
        assert tokens(model) == later - 1, model
    assert tokens("claude-3-5-sonnet-20241022") == later


def test_anthropic_line_breaks_in_prose_cost_two_tokens_more():
    """Each line break of a text block or the system text adds 2 tokens beyond the
    tokenizer's count (fitted); a tool result's line breaks do not."""
    text = "first line of the note\nsecond line\nthird line"
    profile = resolve_model("anthropic:claude-sonnet-4-5")

    def tokens(**body: Any) -> int:
        return _estimate(
            "anthropic", "claude-sonnet-4-5", {"max_tokens": 9, "model": "m", **body}
        ).input_tokens

    def message(content: Any) -> list[dict]:
        return [{"role": "user", "content": content}]

    empty = tokens(messages=message("x"))
    prose = round(count(text) * profile.calibration)
    assert tokens(messages=message("x"), system=text) - empty == prose + 2 * 2
    two_blocks = [{"type": "text", "text": "x"}, {"type": "text", "text": text}]
    assert tokens(messages=message(two_blocks)) - empty == prose + 2 * 2
    assert profile.rule("line_break") == 2
