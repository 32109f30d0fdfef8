"""Provider-side compaction passes through: read from the vendor's response, kept in the
DAG, sent back to its own vendor in the shape the vendor's SDK declares (and to no
other vendor), and counted as the vendor counts it.

Oracles: the official SDKs' types (the response models read the responses, the request
parameter types say which fields a block sent back may have), the vendors' documented
rules (Anthropic ignores every block before the latest compaction block; OpenAI reads
and bills the items before a compaction item) and the usage example of Anthropic's
compaction documentation.
"""

from __future__ import annotations

import json
import typing

import msgspec
import pytest
from anthropic.types.beta import BetaMessage
from anthropic.types.beta.beta_compaction_block_param import BetaCompactionBlockParam
from openai.types.responses.response_compaction_item import ResponseCompactionItem
from openai.types.responses.response_compaction_item_param_param import (
    ResponseCompactionItemParamParam,
)

from ctxrules import count
from ctxrules.commit import Pipeline, derive_commit
from ctxrules.errors import ValidationError
from ctxrules.model import (
    CONTENT_BLOCK_TYPES,
    CompactionBlock,
    ContentBlock,
    ContextItem,
    Node,
    TextBlock,
    provider_compaction_start,
)
from ctxrules.providers import get_provider, resolve_model
from ctxrules.providers.openai_responses import compaction_item_tokens
from ctxrules.render import render, render_context

from .conftest import conversation

WIRES = ["anthropic", "openai-chat", "openai-responses", "gemini"]

#: An Anthropic answer of a request that compacted: the usage figures are those of the
#: example in Anthropic's compaction documentation (the summarising step read 180,000
#: tokens and wrote 3,500; the answer read the compacted 23,000 and wrote 1,000).
ANTHROPIC_RESPONSE = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-opus-4-6",
    "content": [
        {
            "type": "compaction",
            "content": "Summary: the user builds a website; the nav bar is done.",
            "encrypted_content": "Eo8BCkYIBhgCKkD",
            "signature": "c2lnbmF0dXJl",
            "tool_changes": [
                {"type": "tool_removal", "tool": {"type": "tool_reference", "name": "old_tool"}}
            ],
        },
        {"type": "text", "text": "Based on our conversation, the footer is next."},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 23000,
        "output_tokens": 1000,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "iterations": [
            {
                "type": "compaction",
                "input_tokens": 180000,
                "output_tokens": 3500,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
            {
                "type": "message",
                "model": "claude-opus-4-6",
                "input_tokens": 23000,
                "output_tokens": 1000,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        ],
    },
}

OPENAI_COMPACTION_ITEM = {
    "id": "cmp_0123",
    "type": "compaction",
    "encrypted_content": "gAAAAABpM0Yj" + "x" * 3000,
    "created_by": "server",
}
OPENAI_RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "model": "gpt-5",
    "status": "completed",
    "output": [
        OPENAI_COMPACTION_ITEM,
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "The footer is next.", "annotations": []}],
        },
    ],
    "usage": {
        "input_tokens": 4000,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 4020,
    },
}


def _session(answer: list[ContentBlock]) -> list[Node]:
    """An old exchange, a new question, ``answer`` as the assistant node, a follow-up."""
    return conversation(
        [
            ("user", "old question about the header"),
            ("assistant", "old answer about the header"),
            ("user", "go on"),
            ("assistant", answer),
            ("user", "next step"),
        ]
    )


def _commit(answer: list[ContentBlock], *rules):
    calls = _session(answer)
    return derive_commit(
        None,
        calls,
        session_id="s",
        head_node_id=calls[-1].id,
        pipeline=Pipeline.of(rules),
        now=10.0,
    ).commit


def _body(commit, wire: str) -> dict:
    return json.loads(render(commit, wire, "m").body)


def _read(wire: str, response) -> list[ContentBlock]:
    return list(get_provider(wire).read_response(response).content)


# -- the model ----------------------------------------------------------------------


def test_the_block_round_trips_and_keeps_tool_changes_as_immutable_json():
    assert "compaction" in CONTENT_BLOCK_TYPES
    raw = ANTHROPIC_RESPONSE["content"][0]
    block = msgspec.convert(raw, ContentBlock)
    assert isinstance(block, CompactionBlock) and block.vendor == "" and block.effective
    assert json.loads(block.tool_changes) == raw["tool_changes"]  # type: ignore[arg-type]
    for codec in (msgspec.json, msgspec.msgpack):
        assert codec.decode(codec.encode(block), type=ContentBlock) == block
    with pytest.raises(ValidationError, match="JSON array"):
        CompactionBlock(content="s", tool_changes='{"not": "a list"}')


@pytest.mark.parametrize(
    ("block", "effective"),
    [
        (CompactionBlock(content="summary"), True),
        (CompactionBlock(content=None, encrypted_content="meta"), False),
        (CompactionBlock(content=""), False),
        (CompactionBlock(vendor="openai", encrypted_content="ENC"), True),
        (CompactionBlock(vendor="openai", id="cmp_1"), False),
    ],
)
def test_effective_is_the_vendors_rule(block, effective):
    assert block.effective is effective


# -- reading ------------------------------------------------------------------------


def test_anthropic_compaction_block_is_read_from_the_sdk_response():
    sdk = BetaMessage.model_validate(ANTHROPIC_RESPONSE)
    content = _read("anthropic", sdk)
    block = content[0]
    assert isinstance(block, CompactionBlock) and block.vendor == ""
    sent = sdk.content[0].model_dump(exclude_none=True)
    assert block.content == sent["content"] and block.signature == sent["signature"]
    assert block.encrypted_content == sent["encrypted_content"]
    assert json.loads(block.tool_changes) == sent["tool_changes"]  # type: ignore[arg-type]
    assert content[1] == TextBlock(text=ANTHROPIC_RESPONSE["content"][1]["text"])


def test_a_failed_anthropic_compaction_is_kept_as_it_came():
    failed = {**ANTHROPIC_RESPONSE, "content": [{"type": "compaction", "content": None}]}
    parsed = get_provider("anthropic").read_response(BetaMessage.model_validate(failed))
    (block,) = parsed.content
    assert isinstance(block, CompactionBlock) and block.content is None
    assert not block.effective and not parsed.unknown


def test_openai_compaction_item_is_read_with_its_state_unchanged():
    ResponseCompactionItem.model_validate(OPENAI_COMPACTION_ITEM)  # the SDK's shape
    parsed = get_provider("openai-responses").read_response(OPENAI_RESPONSE)
    block, text = parsed.content
    assert block == CompactionBlock(
        encrypted_content=OPENAI_COMPACTION_ITEM["encrypted_content"],
        id="cmp_0123",
        vendor="openai",
    )
    assert text == TextBlock(text="The footer is next.")
    assert not parsed.unknown


def test_anthropic_usage_keeps_the_compaction_iteration_apart():
    usage = get_provider("anthropic").parse_usage(ANTHROPIC_RESPONSE)
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (23000, 1000)
    assert usage.prompt_tokens == 23000  # the answer's own (compacted) prompt
    assert usage.compaction is not None
    assert (usage.compaction.prompt_tokens, usage.compaction.output_tokens) == (180000, 3500)
    plain = {**ANTHROPIC_RESPONSE, "usage": {"input_tokens": 5, "output_tokens": 1}}
    assert get_provider("anthropic").parse_usage(plain).compaction is None  # type: ignore[union-attr]


# -- kept in the DAG, rendered to its own vendor ------------------------------------


def test_anthropic_gets_its_block_back_as_the_sdk_sent_it_and_nothing_before_it():
    sdk = BetaMessage.model_validate(ANTHROPIC_RESPONSE)
    commit = _commit(_read("anthropic", sdk))
    assistant = next(it for it in commit.items if it.source_node_id == "n3")
    assert isinstance(assistant.blocks[0], CompactionBlock)  # the item keeps it
    body = _body(commit, "anthropic")
    assert get_provider("anthropic").validate(body) == []
    msgs = body["messages"]
    sent_back = msgs[1]["content"][0]
    assert sent_back == sdk.content[0].model_dump(exclude_none=True)
    assert set(sent_back) <= set(typing.get_type_hints(BetaCompactionBlockParam))
    text = json.dumps(body)
    assert "old question" not in text and "go on" not in text  # ignored by the API: not sent
    assert msgs[-1]["content"][0]["text"] == "next step"


def test_openai_responses_gets_its_item_back_first_and_nothing_before_it():
    commit = _commit(_read("openai-responses", OPENAI_RESPONSE))
    body = _body(commit, "openai-responses")
    assert get_provider("openai-responses").validate(body) == []
    first = body["input"][0]
    assert first == {
        "type": "compaction",
        "encrypted_content": OPENAI_COMPACTION_ITEM["encrypted_content"],
    }
    assert set(first) <= set(typing.get_type_hints(ResponseCompactionItemParamParam))
    assert "old question" not in json.dumps(body)
    assert body["input"][1]["content"] == "The footer is next."


@pytest.mark.parametrize("source", ["anthropic", "openai-responses"])
def test_no_other_vendor_sees_a_compaction_and_each_gets_the_whole_history(source):
    response = (
        BetaMessage.model_validate(ANTHROPIC_RESPONSE)
        if source == "anthropic"
        else (OPENAI_RESPONSE)
    )
    commit = _commit(_read(source, response))
    for wire in WIRES:
        if wire == source:
            continue
        text = json.dumps(_body(commit, wire))
        assert "compaction" not in text and "gAAAAABpM0Yj" not in text, wire
        assert "Summary: the user builds" not in text and "c2lnbmF0dXJl" not in text, wire
        assert "old question about the header" in text, wire
    # The neutral context keeps the block, for plugin providers to decide.
    messages = render_context(commit).messages
    assert any(isinstance(b, CompactionBlock) for m in messages for b in m.content)


def test_a_failed_anthropic_compaction_is_never_sent_and_hides_nothing():
    commit = _commit([CompactionBlock(content=None), TextBlock(text="answer")])
    for wire in WIRES:
        text = json.dumps(_body(commit, wire))
        assert "compaction" not in text and "old question about the header" in text, wire
    assert not any(
        isinstance(b, CompactionBlock) for m in render_context(commit).messages for b in m.content
    )


def test_the_item_counts_the_anthropic_summary():
    summary = "Summary: " + "the nav bar is done. " * 20
    commit = _commit([CompactionBlock(content=summary), TextBlock(text="answer")])
    item = next(it for it in commit.items if it.source_node_id == "n3")
    assert item.rendered == "answer"  # the model's words only
    assert item.tokens == count("answer") + count(summary)
    opaque = _commit([CompactionBlock(vendor="openai", encrypted_content="E" * 900)])
    assert next(it for it in opaque.items if it.source_node_id == "n3").tokens == 0


def test_provider_compaction_start_is_the_latest_shown_effective_block():
    def item(sid, *blocks, state="full"):
        return ContextItem(source_node_id=sid, role="assistant", state=state, blocks=blocks)

    good, failed = CompactionBlock(content="s"), CompactionBlock(content=None)
    assert provider_compaction_start([item("a"), item("b")]) == -1
    assert provider_compaction_start([item("a", good), item("b", failed), item("c")]) == 0
    assert provider_compaction_start([item("a", good), item("b"), item("c", good)]) == 2
    assert provider_compaction_start([item("a", good), item("c", good, state="summarized")]) == 0


# -- counted as the provider counts it ----------------------------------------------


def _estimate(wire: str, body: dict) -> int:
    prov = get_provider(wire)
    model = "claude-sonnet-4-5" if wire == "anthropic" else "gpt-4o"
    return prov.estimate_prompt(body, resolve_model(f"{prov.family}:{model}")).input_tokens


def _anthropic_body(*messages: dict) -> dict:
    return {"model": "m", "max_tokens": 10, "system": "Be terse.", "messages": list(messages)}


OLD = [
    {"role": "user", "content": "a long old question " * 50},
    {"role": "assistant", "content": [{"type": "text", "text": "a long old answer " * 50}]},
    {"role": "user", "content": "go on"},
]
COMPACTION = {"type": "compaction", "content": "Summary: old question and answer."}
AFTER = [
    {"role": "assistant", "content": [COMPACTION, {"type": "text", "text": "continuing"}]},
    {"role": "user", "content": "next step"},
]


def test_anthropic_estimate_ignores_what_precedes_the_compaction_block():
    # Documented: the API ignores every block before the compaction block, so the same
    # request without them is billed the same.
    with_history = _estimate("anthropic", _anthropic_body(*OLD, *AFTER))
    without = _estimate("anthropic", _anthropic_body(*AFTER))
    assert with_history == without
    # The block itself counts as its summary text.
    as_text = {"type": "text", "text": COMPACTION["content"]}
    replaced = [{"role": "assistant", "content": [as_text, {"type": "text", "text": "continuing"}]}]
    assert without == _estimate("anthropic", _anthropic_body(*replaced, AFTER[1]))


def test_a_failed_anthropic_compaction_counts_nothing_and_hides_nothing():
    failed = {"type": "compaction", "content": None}
    after = [
        {"role": "assistant", "content": [failed, {"type": "text", "text": "continuing"}]},
        AFTER[1],
    ]
    plain = [{"role": "assistant", "content": [{"type": "text", "text": "continuing"}]}, AFTER[1]]
    assert _estimate("anthropic", _anthropic_body(*OLD, *after)) == _estimate(
        "anthropic", _anthropic_body(*OLD, *plain)
    )
    assert "compaction content" in " ".join(
        get_provider("anthropic").validate(
            _anthropic_body(
                *OLD, {"role": "assistant", "content": [{"type": "compaction", "content": ""}]}
            )
        )
    )


def test_openai_estimate_counts_the_item_and_everything_before_it():
    old = [
        {"type": "message", "role": "user", "content": "a long old question " * 50},
        {"type": "message", "role": "assistant", "content": "a long old answer " * 50},
    ]
    item = {"type": "compaction", "encrypted_content": OPENAI_COMPACTION_ITEM["encrypted_content"]}
    new = [{"type": "message", "role": "user", "content": "next step"}]

    def est(*items):
        return _estimate("openai-responses", {"model": "gpt-4o", "input": list(items)})

    # OpenAI bills the items before a compaction item: they count.
    assert est(*old, item, *new) - est(item, *new) == est(*old, *new) - est(*new)
    # The item counts what its encrypted state stands for.
    state = OPENAI_COMPACTION_ITEM["encrypted_content"]
    expected = max(0, len(state) * 3 // 4 - 650) // 4
    assert compaction_item_tokens(state) == expected > 0
    assert est(item, *new) - est(*new) == expected
    assert "encrypted_content" in " ".join(
        get_provider("openai-responses").validate(
            {"model": "m", "input": [{"type": "compaction"}, *new]}
        )
    )


def test_the_rendered_request_is_estimated_as_billed():
    """What we send is what the vendor bills: the estimate of our body equals the
    estimate of the vendor's documented reading of the whole history."""
    sdk = BetaMessage.model_validate(ANTHROPIC_RESPONSE)
    commit = _commit(_read("anthropic", sdk))
    ours = json.loads(render(commit, "anthropic", "m").body)
    ours_all = json.loads(render(commit, "openai-chat", "m").body)  # the whole history
    history = [
        {"role": "user", "content": ours_all["messages"][0]["content"]},
        {"role": "assistant", "content": ours_all["messages"][1]["content"]},
        {"role": "user", "content": ours_all["messages"][2]["content"]},
    ]
    full = {**ours, "messages": history + ours["messages"][1:]}
    assert get_provider("anthropic").validate(full) == []
    assert _estimate("anthropic", ours) == _estimate("anthropic", full)
