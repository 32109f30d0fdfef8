"""Recorded requests, imported and re-rendered, match what the vendor really accepted.

Every interaction of every corpus cassette is imported (``cassette-all``), committed with
the default rules and rendered for the provider it was recorded with.  The recorded body
(plain YAML) and ours are reduced, by code in this file, to what must agree: the message
sequence with roles, each message's block types and texts, the tool calls (id, name,
arguments) and which call each result answers.  Cache markers, parameters and key order
are not compared.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxrules.render import render, session_defaults

from .conftest import cassette_cases

WIRE = {"anthropic": "anthropic", "openai-chat": "openai-chat", "gemini": "gemini"}


def _anthropic(body: dict[str, Any]) -> list[Any]:
    out = []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = []
        for b in content:
            kind = b["type"]
            if kind == "text":
                blocks.append(("text", b["text"]))
            elif kind == "tool_use":
                blocks.append(("tool_use", b["id"], b["name"], b["input"]))
            elif kind == "tool_result":
                text = b.get("content", "")
                if isinstance(text, list):
                    text = "\n".join(x.get("text", "") for x in text)
                blocks.append(("tool_result", b["tool_use_id"], text, bool(b.get("is_error"))))
            elif kind == "thinking":
                blocks.append(("thinking", b["thinking"], b["signature"]))
            else:
                blocks.append((kind,))
        out.append((m["role"], blocks))
    return out


def _openai_chat(body: dict[str, Any]) -> list[Any]:
    out = []
    for m in body["messages"]:
        calls = [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in m.get("tool_calls") or []
        ]
        out.append((m["role"], m.get("content") or None, calls, m.get("tool_call_id")))
    return out


def _gemini(body: dict[str, Any]) -> list[Any]:
    out = []
    for c in body["contents"]:
        parts = []
        for p in c["parts"]:
            # A thought signature must come back on the very part that carried it.
            sig = p.get("thoughtSignature")
            if "functionCall" in p:
                fc = p["functionCall"]
                parts.append(("call", fc.get("id"), fc["name"], fc.get("args", {}), sig))
            elif "functionResponse" in p:
                fr = p["functionResponse"]
                parts.append(("response", fr.get("id"), fr["name"], sig))
            elif "text" in p:
                # An empty recorded text cannot be re-sent as is (our placeholder stands in).
                parts.append(("text", p["text"] or None, sig))
            else:
                parts.append((next(iter(p)), sig))
        out.append((c["role"], parts))
    return out


def _signatures(body: dict[str, Any]) -> list[str]:
    return [
        p["thoughtSignature"]
        for c in body["contents"]
        for p in c["parts"]
        if "thoughtSignature" in p
    ]


REDUCE = {"anthropic": _anthropic, "openai-chat": _openai_chat, "gemini": _gemini}


def _system_text(wire: str, body: dict[str, Any]) -> str:
    if wire == "anthropic":
        s = body.get("system") or ""
        return s if isinstance(s, str) else "\n".join(b["text"] for b in s)
    if wire == "gemini":
        return "\n".join(p["text"] for p in (body.get("systemInstruction") or {}).get("parts", []))
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")


@pytest.mark.parametrize(("kind", "rel", "interaction"), cassette_cases())
def test_rerendered_request_matches_recording(kind, rel, interaction, cassette_session):
    cs = cassette_session(rel, interaction)
    wire = WIRE[kind]
    ours = json.loads(render(cs.commit, wire, **session_defaults(cs.metadata, wire).options).body)
    recorded = cs.request
    got, want = REDUCE[wire](ours), REDUCE[wire](recorded)
    if wire == "gemini":
        # Where the recording opens with an empty user text we send a placeholder text.
        got = [
            (
                r,
                [
                    ("text", None, p[2]) if p[0] == "text" and w[:2] == ("text", None) else p
                    for p, w in zip(parts, wparts)
                ]
                + parts[len(wparts) :],
            )
            for (r, parts), (_, wparts) in zip(got, want)
        ] + got[len(want) :]
    assert got == want
    if wire == "gemini":
        # Read straight from the recording: every signature it carried is sent back.
        assert _signatures(ours) == _signatures(recorded)
        if any(c["role"] == "model" for c in recorded["contents"]):
            assert _signatures(recorded)  # this recording does exercise signatures
    assert _system_text(wire, ours).strip() == _system_text(wire, recorded).strip()
    tools_ours = [t.get("name") or t.get("function", {}).get("name") for t in ours.get("tools", [])]
    if wire == "gemini":
        tools_ours = [d["name"] for d in ours["tools"][0]["functionDeclarations"]]
        tools_rec = [d["name"] for d in recorded["tools"][0]["functionDeclarations"]]
    else:
        tools_rec = [
            t.get("name") or t.get("function", {}).get("name") for t in recorded.get("tools", [])
        ]
    assert tools_ours == tools_rec
