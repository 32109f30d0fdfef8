"""Per-model estimator rules: each current model's profile states its rules with their
basis, and the rules change the count the way the vendor bills that model."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import msgspec
import pytest
from tests.corpus import CORPUS, files
from tests.importers import corpus_oracle as oracle

from ctxrules import count
from ctxrules.calibration import estimate_observation, read_observations
from ctxrules.errors import ValidationError
from ctxrules.model import ContextCommit, ContextItem
from ctxrules.plugins import reset
from ctxrules.providers import get_provider, load_profile, resolve_model
from ctxrules.providers.gemini import gemini_call_profile
from ctxrules.providers.images import image_range, image_tokens
from ctxrules.providers.openai_chat import openai_tool_namespace
from ctxrules.render import render

CURRENT = [
    "anthropic:claude-haiku-4-5",
    "anthropic:claude-sonnet-4-5",
    "anthropic:claude-sonnet-4-6",
    "anthropic:claude-opus-4-5",
    "anthropic:claude-opus-4-6",
    "openai-chat:gpt-4o",
    "openai-chat:gpt-4o-mini",
    "openai-chat:gpt-4.1",
    "openai-chat:gpt-4.1-mini",
    "openai-chat:gpt-5",
    "openai-chat:gpt-5-mini",
    "openai-responses:gpt-5.4",
    "openai-chat:o3",
    "openai-chat:o4-mini",
    "gemini:gemini-2.5-flash",
    "gemini:gemini-2.5-pro",
    "gemini:gemini-3-flash-preview",
]


@pytest.mark.parametrize("spec", CURRENT)
def test_every_current_model_states_its_rules_and_where_they_are_from(spec):
    p = resolve_model(spec)
    assert "image" in p.estimator and p.estimator["image"]["kind"]
    for key in p.estimator:
        assert p.sources[f"estimator.{key}"], key
    # Tokenizer and tool prompt: a doc or a fit named for each.
    assert p.basis["tokenizer"].split(":")[0] in ("doc", "fit")
    if spec.startswith("anthropic"):
        assert p.basis["tool_prompt_tokens"].startswith("doc")
        assert p.basis["thinking"].startswith("doc")
        assert p.basis["tool_block"].startswith("fit")


def _png(w: int, h: int) -> str:
    head = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", w, h)
    return base64.b64encode(head + b"\0" * 16).decode()


def _gemini(model: str, body: dict):
    return get_provider("gemini").estimate_prompt(body, resolve_model(f"gemini:{model}"))


SIGNED = {
    "contents": [
        {"role": "user", "parts": [{"text": "weather in Paris?"}]},
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "w", "args": {"city": "Paris"}},
                    "thoughtSignature": "A" * 800,
                }
            ],
        },
        {"role": "user", "parts": [{"functionResponse": {"name": "w", "response": {"t": 20}}}]},
    ]
}


def test_gemini_3_bills_a_thought_signature_and_2_5_pro_does_not():
    """The issue's first cause: Gemini 3's signature rule applied to 2.5 (2.5 Flash has
    its own line, below)."""
    unsigned = {
        "contents": [
            SIGNED["contents"][0],
            {
                "role": "model",
                "parts": [{"functionCall": {"name": "w", "args": {"city": "Paris"}}}],
            },
            SIGNED["contents"][2],
        ]
    }
    g3 = _gemini("gemini-3-flash-preview", SIGNED).input_tokens
    g3_bare = _gemini("gemini-3-flash-preview", unsigned).input_tokens
    g25 = _gemini("gemini-2.5-pro", SIGNED).input_tokens
    g25_bare = _gemini("gemini-2.5-pro", unsigned).input_tokens
    assert g3 - g3_bare == round(0.225 * 800 - 29)
    assert g25 == g25_bare
    flash = resolve_model("gemini:gemini-2.5-flash")
    bare = _gemini("gemini-2.5-flash", unsigned).input_tokens
    for streamed, billed in ((True, round(0.119 * 800)), (None, round(0.119 * 800)), (False, 0)):
        profile = gemini_call_profile(flash, streamed=streamed)
        signed = get_provider("gemini").estimate_prompt(SIGNED, profile).input_tokens
        assert signed - bare == billed, streamed
    # Only the 2.5 Flash rule depends on the call: Gemini 3 bills its signatures either way.
    g3_profile = gemini_call_profile(resolve_model("gemini:gemini-3-flash-preview"), streamed=False)
    assert get_provider("gemini").estimate_prompt(SIGNED, g3_profile).input_tokens == g3


def _thoughts(response: Any) -> int | None:
    """The ``thoughtsTokenCount`` a recorded Gemini response reports (a stream's last)."""
    text = oracle.text_of(response["response"], response["response_headers"]) or ""
    chunks = [json.loads(text)] if text.lstrip().startswith(("{", "[")) else []
    chunks = chunks[0] if chunks and isinstance(chunks[0], list) else chunks
    found = None
    for c in [*chunks, *oracle.sse_data(text)]:
        u = c.get("usageMetadata") if isinstance(c, dict) else None
        if isinstance(u, dict) and "thoughtsTokenCount" in u:
            found = u["thoughtsTokenCount"]
    return found


def _signed_now(body: dict[str, Any]) -> list[int]:
    """The contents of a Gemini body's current turn (after its last user text) that send
    a thought signature back."""
    contents = body["contents"]
    asked = [i for i, c in enumerate(contents) if "text" in c["parts"][0]]
    turn = max((i for i in asked if contents[i]["role"] == "user"), default=0)
    return [
        i
        for i, c in enumerate(contents)
        if i > turn and any("thoughtSignature" in p for p in c["parts"])
    ]


def test_gemini_2_5_flash_bills_a_streamed_calls_signature_as_its_thinking():
    """Fit set (chatlas' Gemini tool tests, recorded 2026-04 with 2.5 Flash, streamed):
    a signature sent back in the current turn is billed as the thinking of the response
    that made it.  The estimated tokens of each such signature are within 20 % of that
    response's ``thoughtsTokenCount`` (none counted before), and those requests are
    estimated within 8 % on average (37 … 45 % under when 2.5 billed none)."""
    model = resolve_model("gemini:gemini-2.5-flash")
    assert model.rule("signature_slope") == 0.119
    assert model.rule("signature_calls") == "streamed"
    assert resolve_model("gemini:gemini-2.5-pro").rule("signature_slope") == 0
    paths = sorted((CORPUS / "vcr-cassettes-yaml" / "gemini").glob("chatlas-7d9a421e__*"))
    assert len(paths) == 4
    pairs, errors = [], []
    for path in paths:
        exchanges = oracle.exchanges(path)
        for o in read_observations([path]):
            assert o.streamed
            signed = _signed_now(o.body)
            if not signed:
                continue
            bare = json.loads(json.dumps(o.body))
            for i in signed:
                for p in bare["contents"][i]["parts"]:
                    p.pop("thoughtSignature", None)
            est = estimate_observation(o).input_tokens
            share = est - get_provider("gemini").estimate_prompt(bare, model).input_tokens
            # Each signature was made by an earlier response of the same conversation:
            # the one answered just before the request that first sends it.
            made_by = [_thoughts(exchanges[k]) for k in range(o.index) if _thoughts(exchanges[k])]
            pairs.append((share, sum(made_by[-len(signed) :])))
            errors.append(abs(est / o.billed - 1))
    assert len(pairs) == 6
    for share, thoughts in pairs:
        assert abs(share - thoughts) <= 0.2 * thoughts, (share, thoughts)
    assert sum(errors) / len(errors) <= 0.08, errors


def test_gemini_2_5_flash_bills_no_signature_on_a_call_not_streamed():
    """Fit set: the 2.5 Flash calls to generateContent that send a signature back in the
    current turn (Google ADK under openinference, 2025-12, and langsmith, 2026-04) bill
    none — each is estimated without it, within 5 % of its bill (counting the signature
    put them 15 … 49 % over)."""
    paths = [
        CORPUS / "vcr-cassettes-yaml" / "gemini" / name
        for name in (
            "openinference__test_google_adk_instrumentor_multi_tool_call.yaml",
            "langsmith__test_google_adk_test_runner_run_async.yaml",
            "langsmith__test_google_adk_test_runner_run_sync_with_tool.yaml",
        )
    ]
    calls = [o for o in read_observations(paths) if _signed_now(o.body)]
    assert len(calls) == 6 and not any(o.streamed for o in calls)
    for o in calls:
        est = estimate_observation(o).input_tokens
        assert abs(est / o.billed - 1) <= 0.05, (o.index, est, o.billed)


def test_gemini_3_bills_no_signature_of_an_earlier_turn():
    later = {
        "contents": [
            *SIGNED["contents"],
            {"role": "model", "parts": [{"text": "20 degrees"}]},
            {"role": "user", "parts": [{"text": "and Rome?"}]},
        ]
    }
    model = "gemini-3-flash-preview"
    unsigned = [dict(c) for c in later["contents"]]
    unsigned[1] = {
        "role": "model",
        "parts": [{"functionCall": {"name": "w", "args": {"city": "Paris"}}}],
    }
    assert _gemini(model, later).input_tokens == _gemini(model, {"contents": unsigned}).input_tokens


def test_gemini_text_file_inline_counts_as_its_text():
    body = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {
                        "inlineData": {
                            "mimeType": "text/plain",
                            "data": base64.b64encode(b"hello world").decode(),
                        }
                    }
                ],
            }
        ]
    }
    e = _gemini("gemini-2.5-flash", body)
    assert e.rules["image_tokens"] == 0 and e.input_tokens == count("hello world")


def test_gemini_3_images_cost_a_flat_1120_and_2_5_by_tiles():
    body = {
        "contents": [
            {
                "role": "user",
                "parts": [{"inlineData": {"mimeType": "image/png", "data": _png(1000, 1000)}}],
            }
        ]
    }
    assert _gemini("gemini-3-flash-preview", body).rules["image_tokens"] == 1120
    assert _gemini("gemini-2.5-flash", body).rules["image_tokens"] == 258 * 2 * 2


def _chat(model: str, body: dict):
    return get_provider("openai-chat").estimate_prompt(body, resolve_model(f"openai-chat:{model}"))


def _image_message(url: str, detail: str = "auto") -> dict:
    return {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": url, "detail": detail}}],
            }
        ],
    }


def test_openai_images_by_the_models_rule():
    url = "data:image/png;base64," + _png(1024, 1024)
    # The guide's examples: 1024 x 1024 high is 765 on the tile models (4 tiles),
    # 1024 patches on the patch models.
    assert _chat("gpt-4o", _image_message(url)).rules["image_tokens"] == 765
    assert _chat("gpt-4o-mini", _image_message(url)).rules["image_tokens"] == 2833 + 4 * 5667
    assert _chat("gpt-5", _image_message(url)).rules["image_tokens"] == 70 + 4 * 140
    assert _chat("gpt-4.1-mini", _image_message(url)).rules["image_tokens"] == round(
        1024 * 1.62 + 0.5
    )
    assert _chat("gpt-5-mini", _image_message(url)).rules["image_tokens"] == round(1024 * 1.2 + 0.4)
    assert _chat("o4-mini", _image_message(url)).rules["image_tokens"] == 1762


def test_openai_patch_rule_matches_the_guides_worked_example():
    rule = resolve_model("openai-chat:gpt-4.1-mini").rule("image")
    # 1800 x 2400: scaled into the 1,536-patch budget, 1,452 patches.
    assert image_tokens({**rule, "multiplier": 1}, (1800, 2400))[0] == 1452


def test_an_image_of_unknown_size_is_flagged_with_its_range():
    e = _chat("gpt-4o", _image_message("https://example.com/cat.png"))
    assert e.rules["unknown_image_sizes"] == 1
    low, high = e.rules["input_tokens_range"]
    rule = resolve_model("openai-chat:gpt-4o").rule("image")
    lo, hi = image_range(rule)
    assert low == e.input_tokens and high - low == hi - lo and hi > lo
    # An image whose size is known is not flagged.
    known = _chat("gpt-4o", _image_message("data:image/png;base64," + _png(10, 10)))
    assert "unknown_image_sizes" not in known.rules


def test_an_anthropic_image_by_url_is_flagged_not_counted_at_the_cap():
    body = {
        "model": "m",
        "max_tokens": 1,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}],
            }
        ],
    }
    e = get_provider("anthropic").estimate_prompt(body, resolve_model("anthropic:claude-haiku-4-5"))
    assert e.rules["unknown_image_sizes"] == 1
    assert e.rules["image_tokens"] == 54  # a 200-pixel square, the range's low end
    assert e.rules["input_tokens_range"][1] - e.input_tokens == 1534 - 54


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


def test_structured_output_schemas_are_counted_on_every_openai_api():
    plain = {"model": "m", "messages": [{"role": "user", "content": "Bob, 30"}]}
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "person", "schema": SCHEMA, "strict": True},
    }
    with_schema = _chat("gpt-4o", {**plain, "response_format": fmt}).input_tokens
    # The schema as its compact JSON, ``additionalProperties`` left out (fitted).
    strict = {**SCHEMA, "additionalProperties": False}
    fmt["json_schema"]["schema"] = strict
    with_strict = _chat("gpt-4o", {**plain, "response_format": fmt}).input_tokens
    assert with_strict == with_schema
    # On the Chat API 6 tokens more (``chat_response_format``, fitted).
    assert with_schema - _chat("gpt-4o", plain).input_tokens == 6 + count(
        json.dumps(SCHEMA, separators=(",", ":"))
    )
    responses = get_provider("openai-responses")
    profile = resolve_model("openai-responses:gpt-4o")
    r_plain = {"model": "m", "input": "Bob, 30"}
    r_fmt = {
        **r_plain,
        "text": {"format": {"type": "json_schema", "name": "person", "schema": SCHEMA}},
    }
    assert (
        responses.estimate_prompt(r_fmt, profile).input_tokens
        - responses.estimate_prompt(r_plain, profile).input_tokens
        == with_schema - _chat("gpt-4o", plain).input_tokens - 6
    )


def test_anthropic_output_format_is_counted():
    body = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "Bob, 30"}]}
    fmt = {**body, "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}}
    beta = {**body, "output_format": {"type": "json_schema", "schema": SCHEMA}}
    a = get_provider("anthropic")
    p = resolve_model("anthropic:claude-sonnet-4-5")
    base = a.estimate_prompt(body, p).input_tokens
    assert a.estimate_prompt(fmt, p).input_tokens - base >= 140
    assert a.estimate_prompt(beta, p).input_tokens == a.estimate_prompt(fmt, p).input_tokens


def test_anthropic_thinking_of_earlier_turns_counts_on_the_models_that_keep_it():
    thinking = {"type": "thinking", "thinking": "step " * 50, "signature": "sig"}
    turn = {"role": "assistant", "content": [thinking, {"type": "text", "text": "done"}]}
    body = {
        "model": "m",
        "max_tokens": 1,
        "messages": [
            {"role": "user", "content": "a"},
            turn,
            {"role": "user", "content": "b"},
            turn,
            {"role": "user", "content": "c"},
        ],
    }
    a = get_provider("anthropic")
    keeps = a.estimate_prompt(body, resolve_model("anthropic:claude-opus-4-5")).input_tokens
    drops = a.estimate_prompt(body, resolve_model("anthropic:claude-sonnet-4-5")).input_tokens
    tool_free = resolve_model("anthropic:claude-opus-4-5").tool_prompt_tokens  # no tools: unused
    assert tool_free > 0
    assert keeps - drops == count("step " * 50)


def test_responses_tool_prompt_of_the_gpt_5_models_is_their_own():
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    body = {"model": "m", "input": "hi", "tools": [tool]}
    e = get_provider("openai-responses").estimate_prompt(
        body, resolve_model("openai-responses:gpt-5.4")
    )
    assert e.rules["tool_prompt_tokens"] == 9
    chat = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    assert _chat("gpt-5.4", chat).rules["tool_prompt_tokens"] == 90


def test_a_stored_conversation_is_flagged():
    body = {"model": "m", "input": "and then?", "previous_response_id": "resp_1"}
    e = get_provider("openai-responses").estimate_prompt(
        body, resolve_model("openai-responses:gpt-4o")
    )
    assert e.rules["unknown_content"] == {"stored_conversation": 1}
    assert e.rules["input_tokens_range"][1] > e.input_tokens


def test_a_tool_schemas_refs_read_as_the_types_they_name():
    """A ``$ref`` into ``$defs`` (what pydantic writes for a nested model) reads as that
    type, not ``any``."""
    step = {"type": "object", "properties": {"explanation": {"type": "string"}}}
    ref = {
        "type": "object",
        "properties": {"steps": {"type": "array", "items": {"$ref": "#/$defs/Step"}}},
        "$defs": {"Step": step},
    }
    inline = {"type": "object", "properties": {"steps": {"type": "array", "items": step}}}

    def tools(params):
        tool = {"type": "function", "function": {"name": "f", "parameters": params}}
        return {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [tool]}

    assert _chat("gpt-4o", tools(ref)).input_tokens == _chat("gpt-4o", tools(inline)).input_tokens


def test_the_reasoning_models_prime_the_reply_with_one_token_less():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for model in ("gpt-5", "gpt-5-nano", "o3-mini"):
        assert _chat(model, body).input_tokens == _chat("gpt-4o", body).input_tokens - 1, model


def test_gemini_2_0_reads_declarations_as_their_words():
    decl = {
        "name": "get_weather",
        "description": "Weather of a city.",
        "parameters": {
            "type": "OBJECT",
            "properties": {"city": {"type": "STRING", "description": "The city"}},
            "required": ["city"],
        },
    }
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [{"functionDeclarations": [decl]}],
    }
    bare = {"contents": body["contents"]}
    words = "get_weather Weather of a city. object city string The city"
    # The words and the tool section beyond them (fitted, below).
    assert (
        _gemini("gemini-2.0-flash", body).input_tokens
        - _gemini("gemini-2.0-flash", bare).input_tokens
        == count(words) + resolve_model("gemini:gemini-2.0-flash").tool_prompt_tokens
    )
    assert _gemini("gemini-2.5-flash", body).input_tokens - _gemini(
        "gemini-2.5-flash", bare
    ).input_tokens == count(json.dumps(decl, separators=(",", ":")))


def test_gemini_3_5_bills_the_signatures_of_earlier_turns_too():
    later = {
        "contents": [
            *SIGNED["contents"],
            {"role": "model", "parts": [{"text": "20 degrees"}]},
            {"role": "user", "parts": [{"text": "and Rome?"}]},
        ]
    }
    unsigned = [dict(c) for c in later["contents"]]
    unsigned[1] = {
        "role": "model",
        "parts": [{"functionCall": {"name": "w", "args": {"city": "Paris"}}}],
    }
    signed = _gemini("gemini-3.5-flash", later).input_tokens
    assert signed - _gemini("gemini-3.5-flash", {"contents": unsigned}).input_tokens == round(
        0.225 * 800 - 29
    )


def _recorded(rel: str, *, after_a_call: bool = False) -> list[tuple[int, int]]:
    """(estimate, billed) of every recorded call of a corpus cassette (``after_a_call``:
    only those whose body sends a tool result back, Anthropic)."""
    obs = read_observations([CORPUS / "vcr-cassettes-yaml" / rel])
    if after_a_call:
        obs = [
            o
            for o in obs
            if any(
                isinstance(b, dict) and b.get("type") == "tool_result"
                for m in o.body["messages"]
                for b in (m["content"] if isinstance(m["content"], list) else [])
            )
        ]
    return [(estimate_observation(o).input_tokens, o.billed) for o in obs]


def test_gemini_3_frames_each_content():
    """Gemini 3 bills each content 1.6 tokens beyond its parts (fitted on the fit set's
    Gemini 3 / 3.5 conversations); Gemini 2.5 bills none."""
    turns = [
        {"role": "user" if i % 2 == 0 else "model", "parts": [{"text": f"turn {i}"}]}
        for i in range(5)
    ]
    body = {"contents": turns}
    assert _gemini("gemini-3-flash-preview", body).input_tokens - _gemini(
        "gemini-2.5-flash", body
    ).input_tokens == round(5 * 1.6)
    assert resolve_model("gemini:gemini-3.5-flash").rule("message") == 1.6
    assert resolve_model("gemini:gemini-2.5-flash").rule("message", 0) == 0


def test_gemini_3_conversations_bill_as_recorded():
    """Fit-set recordings: a Gemini 3.5 text conversation of 1 … 7 contents (chatlas'
    data extraction: without the content framing 2 … 10 tokens under) is estimated
    within a token, and a Gemini 3 preview tool loop (pydantic-ai: 1 … 14 under) within
    1.5 %."""
    text = _recorded("gemini/chatlas__test_data_extraction.yaml")
    assert len(text) == 4
    for est, billed in text:
        assert abs(est - billed) <= 1, (est, billed)
    tools = _recorded("gemini/test_google_instructions_only_with_tool_calls.yaml")
    assert len(tools) == 5
    for est, billed in tools:
        assert abs(est - billed) <= 0.015 * billed, (est, billed)


def test_haiku_4_5_frames_a_tool_block_with_fewer_tokens():
    """Haiku 4.5 bills 21 tokens around a tool_use / tool_result block (fitted on its
    fit-set requests), not the 33 of the Claude Code models: chatlas' tool variations
    (fit set), each request after a tool call within 1 % of its bill (3.7 … 5.9 % over
    with 33)."""
    assert resolve_model("anthropic:claude-haiku-4-5").rule("tool_block") == 21
    assert resolve_model("anthropic:claude-sonnet-4-5").rule("tool_block") == 33
    rows = _recorded("anthropic/chatlas__test_anthropic_tool_variations.yaml", after_a_call=True)
    assert len(rows) == 5
    for est, billed in rows:
        assert abs(est - billed) <= 0.01 * billed, (est, billed)


def test_gpt_5_bills_an_assistant_message_with_text_two_tokens_more():
    """On the gpt-5 models an assistant message with text costs 2 tokens beyond the
    cookbook's framing (fitted: the channel of its final answer), on both APIs; one
    with only tool calls does not; gpt-4o as before.  Fit-set recordings: gpt-5-mini
    Responses conversations with an earlier answer bill exactly that (2 under without)."""
    user = {"role": "user", "content": "What is 5 + 3?"}
    answer = {"role": "assistant", "content": "8"}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }

    chat = get_provider("openai-chat")

    def grows(model: str, reply: dict, **rules: Any) -> int:
        profile = resolve_model(f"openai-chat:{model}")
        profile = msgspec.structs.replace(profile, estimator={**profile.estimator, **rules})
        one = chat.estimate_prompt({"messages": [user]}, profile).input_tokens
        return chat.estimate_prompt({"messages": [user, reply, user]}, profile).input_tokens - one

    assert grows("gpt-5", answer) == grows("gpt-4o", answer) + 2
    assert grows("gpt-5-nano", answer) == grows("gpt-4o", answer) + 2
    assert grows("gpt-5", answer) == grows("gpt-5", answer, assistant_text=0) + 2
    assert grows("gpt-5", call) == grows("gpt-5", call, assistant_text=0)
    responses = get_provider("openai-responses")
    items = [
        {"type": "message", "role": "user", "content": "What is 5 + 3?"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "8"}]},
    ]
    for model, more in (("gpt-5", 2), ("gpt-4o", 0)):
        profile = resolve_model(f"openai-responses:{model}")
        one = responses.estimate_prompt({"input": items[:1]}, profile).input_tokens
        two = responses.estimate_prompt({"input": items}, profile).input_tokens
        assert two - one == 3 + count("assistant") + count("8") + more, model
    for rel in (
        "openai-responses/ddtrace__response_reasoning_tokens.yaml",
        "openai-responses/openinference__test_responses_input_typed_reasoning_item.yaml",
    ):
        est, billed = _recorded(rel)[-1]
        assert est == billed, rel


def test_extended_thinking_adds_its_prompt():
    """Enabling extended thinking adds 29 tokens (refitted on the fit set's requests with
    thinking): ddtrace's Sonnet 4 request (14 % under with 25), openinference's Sonnet
    4.5 one (8 % under) and pydantic-ai's first Sonnet 4 request with tools are within
    6 % of their bills."""
    body = {"model": "m", "max_tokens": 2048, "messages": [{"role": "user", "content": "hi"}]}
    thinking = {**body, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    anthropic = get_provider("anthropic")
    profile = resolve_model("anthropic:claude-sonnet-4-5")
    on = anthropic.estimate_prompt(thinking, profile).input_tokens
    assert on - anthropic.estimate_prompt(body, profile).input_tokens == 29
    for rel in (
        "anthropic/ddtrace__anthropic_completion_thinking.yaml",
        "anthropic/openinference__test_completion_streaming_with_extended_thinking_anthropic.yaml",
    ):
        ((est, billed),) = _recorded(rel)
        assert abs(est - billed) <= 0.06 * billed, (rel, est, billed)
    est, billed = _recorded("anthropic/test_anthropic_tool_with_thinking.yaml")[0]
    assert abs(est - billed) <= 0.06 * billed, (est, billed)


def _profile_with(tmp_path, model: str, estimator: str):
    """Load a profile whose entry for ``gemini:model`` sets ``estimator`` (TOML)."""
    path = tmp_path / "p.toml"
    path.write_text(f'[[model]]\npattern = "gemini:{model}"\nestimator = {estimator}\n')
    load_profile(path)
    return resolve_model(f"gemini:{model}")


def test_gemini_counts_a_response_schema_only_where_the_profile_says_so(tmp_path):
    plain = {"contents": [{"role": "user", "parts": [{"text": "Bob, 30"}]}]}
    body = {**plain, "generationConfig": {"responseSchema": SCHEMA}}
    g = get_provider("gemini")
    base = g.estimate_prompt(plain, resolve_model("gemini:gemini-2.5-flash")).input_tokens
    assert _gemini("gemini-2.5-flash", body).input_tokens == base  # not billed (fitted)
    try:
        # An amount does not switch the counting on: a fit may move it from 0.
        amount = _profile_with(tmp_path, "gemini-2.5-flash", "{ response_schema = 5 }")
        assert g.estimate_prompt(body, amount).input_tokens == base
        counted = _profile_with(
            tmp_path, "gemini-2.5-flash", '{ response_schema_text = "json", response_schema = 5 }'
        )
        schema = json.dumps(SCHEMA, separators=(",", ":"))
        assert g.estimate_prompt(body, counted).input_tokens == base + count(schema) + 5
        wrong = _profile_with(tmp_path, "gemini-2.5-flash", '{ response_schema_text = "yes" }')
        with pytest.raises(ValidationError, match="response_schema_text"):
            g.estimate_prompt(body, wrong)
    finally:
        reset()


def test_a_counted_gemini_schema_is_estimated_by_the_core_as_by_the_specification(tmp_path):
    commit = ContextCommit(
        id="c",
        session_id="s",
        head_node_id="h",
        rules_version="r",
        items=(ContextItem(source_node_id="u", role="user", rendered="Bob is 30."),),
    )
    extra = {"generationConfig": {"responseSchema": SCHEMA}}
    g = get_provider("gemini")
    sizes = []
    try:
        for words in ("{ response_schema = 5 }", '{ response_schema_text = "json" }'):
            profile = _profile_with(tmp_path, "gemini-2.5-flash", words)
            r = render(commit, "gemini", estimate=True, model="gemini-2.5-flash", extra=extra)
            spec = g.estimate_prompt(msgspec.json.decode(r.body), profile)
            assert r.estimate is not None and r.estimate.input_tokens == spec.input_tokens
            sizes.append(spec.input_tokens)
    finally:
        reset()
    assert sizes[1] > sizes[0]


def test_responses_reads_gpt_4o_and_4_1_parameter_titles_as_comment_lines():
    """On the Responses API the GPT-4o / 4.1 models read a tool's parameter titles (and
    the parameters object's title and description) as ``// …`` lines, beyond a 2-token
    tool section; Chat Completions does not."""
    tool = {
        "type": "function",
        "name": "get_weather",
        "description": "Get the weather.",
        "parameters": {
            "title": "get_weather_args",
            "type": "object",
            "properties": {"city": {"title": "City", "type": "string"}},
            "required": ["city"],
        },
    }
    namespace = openai_tool_namespace([tool], titles=True)
    assert "// get_weather_args\n" in namespace and "// City\ncity: string," in namespace
    assert "City" not in openai_tool_namespace([tool])
    body = {"model": "gpt-4.1", "input": "weather in Paris?", "tools": [tool]}
    untitled = {**body, "tools": [{**tool, "parameters": _untitled(tool["parameters"])}]}
    responses = get_provider("openai-responses")
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1"):
        profile = resolve_model(f"openai-responses:{model}")
        assert profile.rule("responses_tool_prompt") == 2
        extra = responses.estimate_prompt(body, profile).input_tokens
        extra -= responses.estimate_prompt(untitled, profile).input_tokens
        titled_text = openai_tool_namespace([tool], titles=True)
        plain_text = openai_tool_namespace(untitled["tools"], titles=True)
        assert extra == count(titled_text, "o200k_base") - count(plain_text, "o200k_base") > 0
    gpt5 = resolve_model("openai-responses:gpt-5")
    assert responses.estimate_prompt(body, gpt5).input_tokens == (
        responses.estimate_prompt(untitled, gpt5).input_tokens
    )
    chat = resolve_model("openai-chat:gpt-4o")
    chat_body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}

    def chat_tools(t: dict) -> list[dict]:
        return [{"type": "function", "function": {k: v for k, v in t.items() if k != "type"}}]

    provider = get_provider("openai-chat")
    titled = provider.estimate_prompt({**chat_body, "tools": chat_tools(tool)}, chat)
    bare = provider.estimate_prompt({**chat_body, "tools": chat_tools(untitled["tools"][0])}, chat)
    assert titled.input_tokens == bare.input_tokens


def _untitled(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _untitled(v) for k, v in schema.items() if k != "title"}
    return schema


def test_responses_gpt_4o_and_4_1_tool_requests_bill_as_recorded():
    """Fit set: every GPT-4o / 4o-mini / 4.1 Responses request with function tools and
    no call yet (chatlas, dd-trace-py, openinference, langsmith) is estimated within
    3.5 % (with the 12-token tool prompt and no titles: −11 … +16 %)."""
    folder = CORPUS / "vcr-cassettes-yaml" / "openai-responses"
    names = [
        "chatlas__test_tool_error_recorded.yaml",
        "chatlas__test_chat_tool_request_reject2.yaml",
        "ddtrace__response_function_call.yaml",
        "openinference__test_agent_with_tool_calls.yaml",
        "openinference__test_multiple_tools.yaml",
        "openinference__test_tool_with_complex_return_type.yaml",
        "langsmith__test_openai_agents_test_ls_agent_type_metadata.yaml",
        "langsmith__test_openai_agents_test_ls_agent_type_metadata_for_handoffs.yaml",
        "langsmith__test_openai_agents_test_traceable_decorator_nests_under_agent_trace.yaml",
        "langsmith__test_openai_agents_test_wrap_openai_nests_under_agent_trace.yaml",
    ]
    first = [
        o
        for o in read_observations([folder / n for n in names])
        if o.body.get("tools")
        and "previous_response_id" not in o.body
        and not any(
            isinstance(i, dict) and i.get("type") in ("function_call", "function_call_output")
            for i in (o.body["input"] if isinstance(o.body["input"], list) else [])
        )
    ]
    assert len(first) == len(names)
    for o in first:
        est = estimate_observation(o).input_tokens
        assert abs(est / o.billed - 1) <= 0.035, (o.source, est, o.billed)


def test_gemini_2_5_flash_bills_a_function_part_twelve_tokens():
    """Fit set: Gemini 2.5 Flash conversations with function calls (chatlas' streamed
    tool tests, Google ADK under openinference and langsmith) grow 6 … 8 tokens an
    exchange faster than their parts at Gemini 3's 6; with 12 a part their requests are
    estimated within 5 % on average and 9 % each (with 6: 3 … 16 % under, 9.5 % on
    average)."""
    assert resolve_model("gemini:gemini-2.5-flash").rule("function_part") == 12
    assert resolve_model("gemini:gemini-2.5-pro").rule("function_part") == 6
    folder = CORPUS / "vcr-cassettes-yaml" / "gemini"
    paths = [
        *sorted(folder.glob("chatlas-7d9a421e__*")),
        folder / "openinference__test_google_adk_instrumentor_multi_tool_call.yaml",
        folder / "langsmith__test_google_adk_test_runner_run_async.yaml",
        folder / "langsmith__test_google_adk_test_runner_run_sync_with_tool.yaml",
    ]
    calls = [
        o
        for o in read_observations(paths)
        if any("functionCall" in p for c in o.body["contents"] for p in c["parts"])
    ]
    assert len(calls) == 13
    errors = [abs(estimate_observation(o).input_tokens / o.billed - 1) for o in calls]
    assert sum(errors) / len(errors) <= 0.05 and max(errors) <= 0.09, errors


def test_chat_completions_bills_a_structured_output_format_six_tokens_more():
    """Fit set: the Chat Completions requests with a ``json_schema`` format (dd-trace-py
    and langchaingo on gpt-4o, chatlas on gpt-5.4) bill 6 … 13 tokens beyond the schema
    (−4 for the one with ``$defs`` and titles) where the same formats on the Responses API
    bill the schema alone: with 6 more on Chat their mean error is 3.2 % (7.3 % before),
    each within 8 %."""
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": {"type": "object", "properties": {}}},
    }
    chat, responses = get_provider("openai-chat"), get_provider("openai-responses")
    profile = resolve_model("openai-chat:gpt-4o")
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    plain = chat.estimate_prompt(body, profile).input_tokens
    with_schema = chat.estimate_prompt({**body, "response_format": fmt}, profile).input_tokens
    r_body = {"model": "gpt-4o", "input": "hi"}
    r_fmt = {"format": {"type": "json_schema", **fmt["json_schema"]}}
    r_plain = responses.estimate_prompt(r_body, profile).input_tokens
    r_schema = responses.estimate_prompt({**r_body, "text": r_fmt}, profile).input_tokens
    assert (with_schema - plain) - (r_schema - r_plain) == 6
    paths = [
        CORPUS / "vcr-cassettes-yaml" / "openai-chat" / "ddtrace__chat_completion_parse.yaml",
        CORPUS / "httprr" / "openai-chat" / "langchaingo__TestStructuredOutputObjectSchema.httprr",
        CORPUS
        / "vcr-cassettes-yaml"
        / "openai-chat"
        / "chatlas__test_provider_openai_completions__test_data_extraction.yaml",
    ]
    calls = [o for o in read_observations(paths) if "response_format" in o.body]
    assert len(calls) == 5
    errors = [abs(estimate_observation(o).input_tokens / o.billed - 1) for o in calls]
    assert sum(errors) / len(errors) <= 0.035 and max(errors) <= 0.08, errors


def _sends_calls_back(o: Any) -> bool:
    items = o.body.get("input")
    return isinstance(items, list) and any(
        isinstance(i, dict) and i.get("type") == "function_call" for i in items
    )


def test_responses_gpt_4_1_bills_a_call_sent_back_six_tokens_where_tools_are_declared():
    """Fit set: the GPT-4.1 / 4.1-mini / 4.1-nano Responses requests that send function
    calls and their outputs back with tools declared (chatlas, langsmith, ellmer) bill a
    call 6 tokens beyond its text, not ``tool_call``'s 12: with 6 their mean error is
    2.1 % and each is within 7 % (with 12: 6.4 %, up to +14.5 %).  A request declaring
    no tools keeps 12 (langsmith's handoff follow-up fits 11)."""
    responses = get_provider("openai-responses")
    call = {"type": "function_call", "call_id": "c1", "name": "now", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "noon"}
    tool = {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}}}
    asked = {"role": "user", "content": "What time is it?"}
    for model, per_call in (("gpt-4.1", 6), ("gpt-4.1-nano", 6), ("gpt-4o", 12), ("gpt-5", 12)):
        profile = resolve_model(f"openai-responses:{model}")
        for tools, expected in (([tool], per_call), ([], 12)):
            before = {"model": model, "input": [asked], "tools": tools}
            after = {**before, "input": [asked, call, output]}
            grown = responses.estimate_prompt(after, profile).input_tokens
            grown -= responses.estimate_prompt(before, profile).input_tokens
            # The call's and the output's text, a message header for each (4, with the
            # name), and the call's own tokens.
            text = count("now{}", "o200k_base") + count("noon", "o200k_base")
            assert grown == text + 4 + 4 + expected, (model, tools)
    paths = [
        *sorted((CORPUS / "ruby-vcr-cassettes-yaml" / "openai-responses").glob("ellmer-*")),
        *(
            CORPUS / "vcr-cassettes-yaml" / "openai-responses" / name
            for name in (
                "chatlas__test_chat_tool_request_reject2.yaml",
                "langsmith__test_openai_agents_test_ls_agent_type_metadata.yaml",
                "langsmith__test_openai_agents_test_ls_agent_type_metadata_for_handoffs.yaml",
                "langsmith__test_openai_agents_test_traceable_decorator_nests_under_agent_trace.yaml",
                "langsmith__test_openai_agents_test_wrap_openai_nests_under_agent_trace.yaml",
            )
        ),
    ]
    calls = [
        o
        for o in read_observations(paths)
        if o.model.startswith("gpt-4.1") and o.body.get("tools") and _sends_calls_back(o)
    ]
    assert len(calls) == 21
    errors = [abs(estimate_observation(o).input_tokens / o.billed - 1) for o in calls]
    assert sum(errors) / len(errors) <= 0.025 and max(errors) <= 0.07, errors


def test_gemini_2_0_bills_four_tokens_beyond_its_declarations():
    """Fit set: Gemini 2.0's requests with function declarations (openinference's
    google-genai and Google ADK tests, langchaingo) bill 0 … 12 tokens more than the
    declarations' words at their first request (median 5); over the fit set's 27 Gemini
    2.0 requests the mean error is least with a 4-token tool section (10.6 % with none,
    9.4 % with 4), and the simple google-genai requests are then within 2 tokens."""
    profile = resolve_model("gemini:gemini-2.0-flash")
    assert profile.tool_prompt_tokens == 4
    assert resolve_model("gemini:gemini-2.5-flash").tool_prompt_tokens == 0
    calls = [
        o
        for o in read_observations(files(kind="cassette-yaml", wire="gemini", split="fit"))
        + read_observations(files(kind="httprr", wire="gemini", split="fit"))
        if o.model.startswith("gemini-2.0")
        and "input_tokens_range" not in estimate_observation(o).rules
    ]
    assert len(calls) == 27

    def mean_error(tool_prompt: int) -> float:
        errors = []
        for o in calls:
            p = msgspec.structs.replace(resolve_model(o.spec), tool_prompt_tokens=tool_prompt)
            errors.append(abs(estimate_observation(o, p).input_tokens / o.billed - 1))
        return sum(errors) / len(errors)

    by_value = {t: mean_error(t) for t in range(9)}
    assert min(by_value, key=by_value.__getitem__) == profile.tool_prompt_tokens, by_value
    folder = CORPUS / "vcr-cassettes-yaml" / "gemini"
    simple = read_observations(
        [
            folder / f"openinference__{name}.yaml"
            for name in (
                "test_chat_session_with_tool",
                "test_generate_content_with_raw_json_tool",
                "test_generate_content_with_tool",
                "test_response_with_multiple_tool_calls_False",
                "test_streaming_content_with_tool",
            )
        ]
    )
    assert all(abs(o.billed - estimate_observation(o).input_tokens) <= 2 for o in simple)


def test_a_gemini_declaration_without_parameters_bills_an_empty_schema(monkeypatch):
    """Fit set: ellmer's google-tool.yml declares two tools without parameters; its four
    Gemini 2.5 Flash requests with them were 24 … 28 tokens under their bills counting
    none (−12 … −34 %), and are within 4 % counting each as declaring
    ``GEMINI_EMPTY_PARAMETERS``; its requests whose declarations have parameters do not
    change."""
    from ctxrules.providers import gemini

    (path,) = [p for p in files(wire="gemini", split="fit") if p.name.endswith("google-tool.yml")]
    calls = read_observations([path])
    assert len(calls) == 10
    bare = [
        o
        for o in calls
        if all("parameters" not in d for t in [o.body["tools"]] for d in t["functionDeclarations"])
    ]
    assert len(bare) == 4

    def errors(observations) -> list[float]:
        return [estimate_observation(o).input_tokens / o.billed - 1 for o in observations]

    counted, counted_all = errors(bare), errors(calls)
    assert max(abs(e) for e in counted) <= 0.04, counted
    monkeypatch.setattr(gemini, "_with_parameters", lambda d: d)
    uncounted, uncounted_all = errors(bare), errors(calls)
    assert all(e < -0.10 for e in uncounted), uncounted
    assert [a for a, o in zip(counted_all, calls) if o not in bare] == [
        b for b, o in zip(uncounted_all, calls) if o not in bare
    ]


def test_responses_gpt_4o_and_4_1_bill_a_forced_call_nine_tokens_more():
    """Fit set: activeagent's three gpt-4.1 Responses requests differ only in
    ``tool_choice``: billed 38 with "auto", 47 with "required" and 47 with the function
    named.  A forced call adds 9 to the tool section on GPT-4o / 4o-mini / 4.1
    (``responses_tool_forced``); "auto", "none", ``null`` and a request without tools
    add nothing, and the gpt-5 models state no such rule."""
    responses = get_provider("openai-responses")
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    base = {"model": "m", "input": "hi", "tools": [tool]}
    named = {"type": "function", "name": "f"}
    for model, extra in (("gpt-4o", 9), ("gpt-4o-mini", 9), ("gpt-4.1-nano", 9), ("gpt-5", 0)):
        profile = resolve_model(f"openai-responses:{model}")
        auto = responses.estimate_prompt(base, profile).input_tokens
        for choice, expected in (("required", extra), (named, extra), ("auto", 0), ("none", 0)):
            body = {**base, "tool_choice": choice}
            grown = responses.estimate_prompt(body, profile).input_tokens - auto
            assert grown == expected, (model, choice)
        toolless = {"model": "m", "input": "hi"}
        assert (
            responses.estimate_prompt({**toolless, "tool_choice": "required"}, profile).input_tokens
            == responses.estimate_prompt(toolless, profile).input_tokens
        )
    folder = CORPUS / "ruby-vcr-cassettes-yaml" / "openai-responses"
    observed = read_observations(sorted(folder.glob("activeagent__*")))
    firsts = {o.source.rsplit("_", 1)[-1]: o for o in observed if o.index == 0}
    assert {k: o.billed for k, o in firsts.items()} == {
        "auto.yml": 38,
        "required.yml": 47,
        "specific.yml": 47,
    }
    for o in observed:
        assert estimate_observation(o).input_tokens == pytest.approx(o.billed, abs=1), o.source
