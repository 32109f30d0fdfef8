"""What a request body cannot size is flagged with the range it implies, never counted
as a silent constant: reasoning stored by the vendor, what server-side tools find
inside the request, the text Gemini extracts from a PDF, Anthropic's citation prompt,
audio.  What the body does hold is counted (search results, code the model ran)."""

from __future__ import annotations

import base64

import pytest

from ctxrules import count
from ctxrules.calibration.observe import own_model
from ctxrules.providers import get_provider, resolve_model


def _est(wire: str, model: str, body: dict):
    return get_provider(wire).estimate_prompt(body, resolve_model(f"{wire}:{model}"))


REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "x"}]}
CALL = {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "3"}


def test_a_reasoning_item_of_the_current_turn_is_flagged_and_earlier_ones_cost_nothing():
    user = {"role": "user", "content": "add"}
    current = _est("openai-responses", "gpt-5", {"input": [user, REASONING, CALL, OUTPUT]})
    assert current.rules["unknown_content"] == {"stored_reasoning": 1}
    low, high = current.rules["input_tokens_range"]
    assert low == current.input_tokens
    assert high == current.input_tokens + resolve_model("openai-responses:gpt-5").max_output_tokens
    # The same item before a later user message: dropped by the API, nothing flagged.
    later = [user, REASONING, CALL, OUTPUT, {"role": "user", "content": "again"}]
    without = [user, CALL, OUTPUT, {"role": "user", "content": "again"}]
    e = _est("openai-responses", "gpt-5", {"input": later})
    assert "unknown_content" not in e.rules
    assert e.input_tokens == _est("openai-responses", "gpt-5", {"input": without}).input_tokens


def test_a_reasoning_item_with_its_encrypted_content_counts_it():
    user = {"role": "user", "content": "add"}
    state = "A" * 8000
    item = {**REASONING, "encrypted_content": state}
    with_state = _est("openai-responses", "gpt-5", {"input": [user, item, CALL, OUTPUT]})
    bare = _est("openai-responses", "gpt-5", {"input": [user, CALL, OUTPUT]})
    assert "unknown_content" not in with_state.rules
    assert with_state.input_tokens - bare.input_tokens == (8000 * 3 // 4 - 650) // 4


@pytest.mark.parametrize(
    ("wire", "model", "body"),
    [
        ("openai-responses", "gpt-5.2", {"input": "news?", "tools": [{"type": "web_search"}]}),
        (
            "openai-responses",
            "gpt-4o",
            {"input": "find", "tools": [{"type": "file_search", "vector_store_ids": ["v"]}]},
        ),
        (
            "gemini",
            "gemini-2.5-flash",
            {
                "contents": [{"role": "user", "parts": [{"text": "run"}]}],
                "tools": [{"codeExecution": {}}, {"googleSearch": {}}],
            },
        ),
        (
            "anthropic",
            "claude-sonnet-4-6",
            {
                "messages": [{"role": "user", "content": "news?"}],
                "tools": [
                    {"type": "web_search_20250305", "name": "web_search"},
                    {"type": "web_fetch_20250910", "name": "web_fetch"},
                ],
            },
        ),
    ],
)
def test_a_server_tool_is_flagged_once_up_to_the_context_window(wire, model, body):
    e = _est(wire, model, body)
    assert e.rules["unknown_content"] == {"server_tool_results": 1}
    window = resolve_model(f"{wire}:{model}").context_window
    assert e.rules["input_tokens_range"] == [e.input_tokens, e.input_tokens + window]


def test_a_function_tool_is_not_flagged():
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    e = _est("openai-responses", "gpt-4o", {"input": "hi", "tools": [tool]})
    assert "unknown_content" not in e.rules


def test_a_web_search_call_sent_back_is_flagged():
    call = {"type": "web_search_call", "id": "ws_1", "action": {"type": "search", "query": "q"}}
    body = {"input": [{"role": "user", "content": "q?"}, call, {"role": "user", "content": "ok"}]}
    e = _est("openai-responses", "gpt-5.2", body)
    assert e.rules["unknown_content"] == {"server_tool_results": 1}


def test_anthropic_search_results_count_their_text_and_citations_are_flagged():
    text = "The Ruby programming language was created by Yukihiro Matsumoto in 1993."
    result = {
        "type": "search_result",
        "source": "https://example.com/ruby",
        "title": "Ruby Facts",
        "content": [{"type": "text", "text": text}],
    }

    def body(block):
        return {
            "messages": [
                {"role": "user", "content": "who?"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "kb", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t", "content": [block]}],
                },
            ]
        }

    empty = {**result, "content": [], "source": "", "title": ""}
    model = "claude-haiku-4-5"
    grown = _est("anthropic", model, body(result)).input_tokens
    base = _est("anthropic", model, body(empty)).input_tokens
    # Tool results are structured payloads: their calibration applies.
    calibrated = count(f"https://example.com/ruby\nRuby Facts\n{text}") * 1.19
    assert abs((grown - base) - calibrated) <= 2
    cited = _est("anthropic", model, body({**result, "citations": {"enabled": True}}))
    assert cited.rules["unknown_content"] == {"citations": 1}
    assert "unknown_content" not in _est("anthropic", model, body(result)).rules


def _pdf(pages: int) -> str:
    objs = b"".join(b"%d 0 obj << /Type /Page >> endobj\n" % i for i in range(pages))
    return base64.b64encode(b"%PDF-1.4\n<< /Type /Pages >>\n" + objs).decode()


@pytest.mark.parametrize(
    ("model", "per_page"), [("gemini-2.5-flash", 258), ("gemini-3-flash-preview", 560)]
)
def test_a_gemini_pdf_counts_its_pages_and_flags_its_text(model, per_page):
    def body(pages):
        part = {"inlineData": {"mimeType": "application/pdf", "data": _pdf(pages)}}
        return {"contents": [{"role": "user", "parts": [{"text": "sum"}, part]}]}

    one, three = _est("gemini", model, body(1)), _est("gemini", model, body(3))
    assert three.input_tokens - one.input_tokens == 2 * per_page
    assert three.rules["unknown_content"] == {"document_text": 1}
    assert three.rules["input_tokens_range"][1] == three.input_tokens + 3 * 3_000


def test_gemini_code_and_its_output_sent_back_count_their_text():
    code = "print(sum(range(10)))\n" * 5
    parts = [{"executableCode": {"language": "PYTHON", "code": code}}]
    out = [{"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "45\n" * 5}}]
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "sum"}]},
            {"role": "model", "parts": parts + out},
        ]
    }
    bare = {"contents": [body["contents"][0], {"role": "model", "parts": [{"text": ""}]}]}
    grown = _est("gemini", "gemini-2.5-flash", body).input_tokens
    assert grown - _est("gemini", "gemini-2.5-flash", bare).input_tokens >= count(code)


def test_openai_audio_is_flagged():
    pcm = b"\0" * 32000  # one second of 16 kHz, 16-bit mono
    header = (
        b"RIFF"
        + (36 + len(pcm)).to_bytes(4, "little")
        + b"WAVEfmt "
        + (16).to_bytes(4, "little")
        + (1).to_bytes(2, "little")
        + (1).to_bytes(2, "little")
        + (16000).to_bytes(4, "little")
        + (32000).to_bytes(4, "little")
        + (2).to_bytes(2, "little")
        + (16).to_bytes(2, "little")
        + b"data"
        + len(pcm).to_bytes(4, "little")
    )
    audio = {"data": base64.b64encode(header + pcm).decode(), "format": "wav"}
    msg = {"role": "user", "content": [{"type": "input_audio", "input_audio": audio}]}
    bare = {"role": "user", "content": []}
    e = _est("openai-chat", "gpt-4o-audio-preview", {"messages": [msg]})
    assert e.rules["unknown_content"] == {"audio": 1}
    grown = (
        e.input_tokens
        - _est("openai-chat", "gpt-4o-audio-preview", {"messages": [bare]}).input_tokens
    )
    assert grown == 10  # one second at the realtime guide's 10 tokens a second


def test_open_weight_models_are_not_the_wire_vendors_own():
    assert not own_model("gpt-oss:120b", "openai-chat")
    assert own_model("gpt-4o", "openai-chat")
    assert own_model("gpt-5.4", "openai-responses")


def test_a_gemini_context_cache_is_flagged_by_the_specification_and_the_core():
    from ctxrules.model import ContextCommit, ContextItem
    from ctxrules.render import render

    body = {
        "contents": [{"role": "user", "parts": [{"text": "and the summary?"}]}],
        "cachedContent": "cachedContents/abc123",
    }
    e = _est("gemini", "gemini-2.5-flash", body)
    window = resolve_model("gemini:gemini-2.5-flash").context_window
    assert e.rules["unknown_content"] == {"stored_conversation": 1}
    assert e.rules["input_tokens_range"] == [e.input_tokens, e.input_tokens + window]
    # The core, rendering a request that names a cache, says the same.
    item = ContextItem(source_node_id="u1", role="user", rendered="and the summary?")
    commit = ContextCommit(
        id="c", session_id="s", head_node_id="u1", rules_version="r", items=(item,)
    )
    r = render(
        commit,
        "gemini",
        "gemini-2.5-flash",
        estimate=True,
        extra={"cachedContent": "cachedContents/abc123"},
    )
    assert r.estimate.rules()["unknown_content"] == {"stored_conversation": 1}
    assert r.estimate.rules()["input_tokens_range"] == [
        r.estimate.input_tokens,
        r.estimate.input_tokens + window,
    ]


def test_an_anthropic_deferred_tool_is_not_counted_until_searched():
    tool = {
        "name": "get_weather",
        "description": "Get the weather for a location " * 10,
        "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
    }
    search = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
    msgs = [{"role": "user", "content": "weather?"}]
    loaded = _est("anthropic", "claude-sonnet-4-6", {"messages": msgs, "tools": [search, tool]})
    deferred = _est(
        "anthropic",
        "claude-sonnet-4-6",
        {"messages": msgs, "tools": [search, {**tool, "defer_loading": True}]},
    )
    assert loaded.input_tokens - deferred.input_tokens >= count(tool["description"])
    assert deferred.rules["unknown_content"] == {"server_tool_results": 1}
