"""Thinking signatures reach only the vendor that minted them.

A Gemini ``thoughtSignature`` (``ThinkingBlock(thinking="", vendor="gemini")``) rides on
the Gemini part after it and is never sent to Anthropic or OpenAI; an Anthropic thinking
block — with text, or with empty text as under ``display: "omitted"`` — goes back to
Anthropic only.
"""

from __future__ import annotations

import json

import pytest

from ctxrules.model import ContextCommit, ContextItem, TextBlock, ThinkingBlock
from ctxrules.providers import get_provider
from ctxrules.render import render, render_context, session_defaults

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
GEMINI_SIG = "Z2VtaW5pLXNpZw=="
ANTHROPIC_OMITTED = "YW50aHJvcGljLW9taXR0ZWQ="
ANTHROPIC_TEXT = "YW50aHJvcGljLXRleHQ="


def _commit() -> ContextCommit:
    def it(sid: str, role: str, text: str = "", **kw) -> ContextItem:
        return ContextItem(source_node_id=sid, role=role, rendered=text, **kw)  # type: ignore[arg-type]

    return ContextCommit(
        id="c_sig",
        session_id="s",
        head_node_id="u3",
        rules_version="rv",
        items=(
            it("u1", "user", "go"),
            it(
                "a1",
                "assistant",
                blocks=(ThinkingBlock(thinking="", signature=GEMINI_SIG, vendor="gemini"),),
            ),
            it("t1", "tool", "r1", name="ls", caller="a1", tool_use_id="c1"),
            it(
                "a2",
                "assistant",
                "checking",
                blocks=(
                    ThinkingBlock(thinking="", signature=ANTHROPIC_OMITTED),
                    TextBlock(text="checking"),
                ),
            ),
            it("t2", "tool", "r2", name="cat", caller="a2", tool_use_id="c2"),
            it(
                "a3",
                "assistant",
                "done",
                blocks=(
                    ThinkingBlock(thinking="why", signature=ANTHROPIC_TEXT),
                    TextBlock(text="done"),
                ),
            ),
            it("u3", "user", "thanks"),
        ),
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_signature_goes_to_its_vendor_only(provider):
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("cat", "ls")]
    raw = render(_commit(), provider, tools=tools).body
    body = json.loads(raw)
    assert get_provider(provider).validate(body) == []
    text = raw.decode()
    if provider == "gemini":
        calls = [p for c in body["contents"] for p in c["parts"] if "functionCall" in p]
        assert calls[0]["functionCall"]["name"] == "ls"
        assert calls[0]["thoughtSignature"] == GEMINI_SIG
        assert "thoughtSignature" not in calls[1]
        assert ANTHROPIC_OMITTED not in text and ANTHROPIC_TEXT not in text
    elif provider == "anthropic":
        assert GEMINI_SIG not in text
        thinking = [
            (b["thinking"], b["signature"])
            for m in body["messages"]
            for b in m["content"]
            if b["type"] == "thinking"
        ]
        assert thinking == [("", ANTHROPIC_OMITTED), ("why", ANTHROPIC_TEXT)]
    else:
        for sig in (GEMINI_SIG, ANTHROPIC_OMITTED, ANTHROPIC_TEXT):
            assert sig not in text


def test_the_neutral_context_keeps_the_vendor():
    msgs = render_context(_commit()).messages
    blocks = [b for m in msgs for b in m.content if isinstance(b, ThinkingBlock)]
    assert [(b.signature, b.vendor) for b in blocks] == [
        (GEMINI_SIG, "gemini"),
        (ANTHROPIC_OMITTED, ""),
        (ANTHROPIC_TEXT, ""),
    ]


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses"])
def test_a_gemini_recording_sends_no_signature_elsewhere(provider, cassette_session):
    cs = cassette_session("gemini/test_google_instructions_only_with_tool_calls.yaml")
    recorded = [
        p["thoughtSignature"]
        for c in cs.request["contents"]
        for p in c["parts"]
        if "thoughtSignature" in p
    ]
    assert recorded
    raw = render(cs.commit, provider, **session_defaults(cs.metadata, provider).options).body
    assert get_provider(provider).validate(json.loads(raw)) == []
    assert not [s for s in recorded if s in raw.decode()]
