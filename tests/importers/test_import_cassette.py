"""VCR cassettes: the recorded request's conversation, with request and response kept."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from ctxrules.importers import import_paths
from ctxrules.model import TextBlock, ThinkingBlock, ToolUseBlock

CASSETTES = [
    "vcr-cassettes-yaml/anthropic/test_multiple_parallel_tool_calls.yaml",
    "vcr-cassettes-yaml/anthropic/test_anthropic_tool_with_thinking.yaml",
    "vcr-cassettes-yaml/anthropic/test_anthropic_cache_real_api.yaml",
    "vcr-cassettes-yaml/openai-chat/test_tool_search_eval_openai-chat.yaml",
    "vcr-cassettes-yaml/gemini/test_google_instructions_only_with_tool_calls.yaml",
]


def requests(path):
    doc = yaml.safe_load(path.read_text())
    return [
        (i, it["request"]["parsed_body"], it["response"]["parsed_body"])
        for i, it in enumerate(doc["interactions"])
    ]


def expected_roles(body):
    """Node roles a request body must give, counted straight from the body."""
    roles = Counter()
    if "contents" in body:
        roles["system"] += "systemInstruction" in body
        for c in body["contents"]:
            parts = c["parts"]
            resp = sum("functionResponse" in p for p in parts)
            roles["tool"] += resp
            if len(parts) > resp:
                roles["assistant" if c["role"] == "model" else "user"] += 1
        return roles
    roles["system"] += bool(body.get("system"))
    for m in body["messages"]:
        c = m["content"]
        if m["role"] == "tool":
            roles["tool"] += 1
            continue
        if m["role"] == "system":
            roles["system"] += 1
            continue
        results = (
            sum(isinstance(b, dict) and b.get("type") == "tool_result" for b in c)
            if (isinstance(c, list))
            else 0
        )
        roles["tool"] += results
        if not isinstance(c, list) or len(c) > results:
            roles[m["role"]] += 1
    return roles


@pytest.mark.parametrize("name", CASSETTES)
def test_last_request_becomes_the_session(corpus, store, name):
    path = corpus / name
    i, body, response = requests(path)[-1]
    (res,) = import_paths(store, [str(path)])
    assert res.format == "cassette"
    nodes = store.nodes(res.id)
    assert Counter(n.role for n in nodes) == expected_roles(body)
    meta = store.get_session(res.id).metadata
    assert meta["interaction"] == i
    assert meta["response"] == response
    assert meta["usage"] == (response.get("usage") or response["usageMetadata"])
    assert meta["request"] == {k: v for k, v in body.items() if k not in ("messages", "contents")}


def test_thinking_signature_and_parallel_tool_calls_survive(corpus, store):
    path = corpus / CASSETTES[1]
    _, body, _ = requests(path)[-1]
    (res,) = import_paths(store, [str(path)])
    raw = next(
        b
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b["type"] == "thinking"
    )
    blocks = [
        b for n in store.nodes(res.id) for b in (n.output if isinstance(n.output, list) else [])
    ]
    thinking = [b for b in blocks if isinstance(b, ThinkingBlock)]
    assert [(t.thinking, t.signature) for t in thinking] == [(raw["thinking"], raw["signature"])]
    path = corpus / CASSETTES[0]
    _, body, _ = requests(path)[-1]
    (res,) = import_paths(store, [str(path)])
    nodes = store.nodes(res.id)
    uses = [
        b for n in nodes if n.role == "assistant" for b in n.output if isinstance(b, ToolUseBlock)
    ]
    tools = [n for n in nodes if n.role == "tool"]
    assert len(uses) == len(tools) == 4
    assert {t.caller for t in tools} == {n.id for n in nodes if n.role == "assistant"}
    results = {
        b["tool_use_id"]: b["content"]
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }
    assert {t.metadata["tool_use_id"]: t.output for t in tools} == results


def test_cassette_all_gives_every_request(corpus, store):
    path = corpus / CASSETTES[4]
    reqs = requests(path)
    results = import_paths(store, [str(path)], format="cassette-all")
    assert len(results) == len(reqs)
    for (_, body, _), res in zip(reqs, results):
        assert Counter(n.role for n in store.nodes(res.id)) == expected_roles(body)


def test_anthropic_request_body_file(corpus, store, tmp_path):
    _, body, _ = requests(corpus / CASSETTES[0])[-1]
    # Add an image to a user turn so images are exercised too.
    img = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
    body = json.loads(json.dumps(body))
    body["messages"][0]["content"].append(img)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body))
    (res,) = import_paths(store, [str(path)])
    assert res.format == "anthropic-messages"
    nodes = store.nodes(res.id)
    assert Counter(n.role for n in nodes) == expected_roles(body)
    system = next(n for n in nodes if n.role == "system")
    assert system.input == body["system"]
    user = next(n for n in nodes if n.role == "user")
    assert user.output[-1].source.data == "iVBO"


def test_gemini_thought_signatures_sit_before_their_part(corpus, store):
    path = corpus / CASSETTES[4]
    _, body, _ = requests(path)[-1]
    (res,) = import_paths(store, [str(path)])
    # Straight from the recording: per model content, (signature, function name) of
    # each signed part.
    want = [
        [
            (p["thoughtSignature"], p["functionCall"]["name"])
            for p in c["parts"]
            if "thoughtSignature" in p
        ]
        for c in body["contents"]
        if c["role"] == "model"
    ]
    assert sum(map(len, want)) >= 4
    got = []
    for n in sorted(store.nodes(res.id), key=lambda n: n.seq):
        if n.role != "assistant":
            continue
        out = list(n.output)
        signed = []
        for k, b in enumerate(out):
            if isinstance(b, ThinkingBlock):
                assert (b.thinking, b.vendor) == ("", "gemini")
                nxt = out[k + 1]  # the part that carried it comes right after
                assert isinstance(nxt, ToolUseBlock)
                signed.append((b.signature, nxt.name))
        got.append(signed)
    assert got == want


def test_gemini_thought_parts_are_thinking_not_text(store, tmp_path):
    from ctxrules.commit import make_commit
    from ctxrules.render import render

    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "what is 2+2"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "adding small numbers", "thought": True},
                    {"text": "4", "thoughtSignature": "c2lnLTQ="},
                ],
            },
            {"role": "user", "parts": [{"text": "and 3+3"}]},
        ]
    }
    uri = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    doc = {"interactions": [{"request": {"uri": uri, "body": json.dumps(body)}, "response": {}}]}
    path = tmp_path / "thought.yaml"
    path.write_text(yaml.safe_dump(doc))
    (res,) = import_paths(store, [str(path)])
    (model,) = [n for n in store.nodes(res.id) if n.role == "assistant"]
    assert list(model.output) == [
        ThinkingBlock(thinking="adding small numbers", vendor="gemini"),
        ThinkingBlock(thinking="", signature="c2lnLTQ=", vendor="gemini"),
        TextBlock(text="4"),
    ]
    commit = make_commit(res.id, store=store, now=0)
    sent = json.loads(render(commit, "gemini").body)
    # The thought is not re-sent as text; the signature rides on the part that had it.
    assert sent["contents"][1]["parts"] == [{"text": "4", "thoughtSignature": "c2lnLTQ="}]
    assert "adding small numbers" not in json.dumps(render(commit, "anthropic").body.decode())
