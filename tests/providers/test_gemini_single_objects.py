"""Gemini requests that send ``tools``, a content's ``parts`` or
``systemInstruction.parts`` as one object instead of a list (the API takes it; R's
ellmer sent its 2025 requests so): read, estimated and validated as the list form, and
re-rendered with no rules as sent."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from tests.render.test_roundtrip import _body, differences

from ctxrules.importers import import_paths
from ctxrules.providers import get_provider, resolve_model
from ctxrules.providers.gemini import validate_gemini
from ctxrules.store import open_store

DECLS = {
    "functionDeclarations": [
        {
            "name": "forecast",
            "description": "Gets the weather forecast for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"],
            },
        }
    ]
}
SYSTEM_PART = {"text": "Answer tersely, using the tools."}
TURNS = [
    ("user", {"text": "What should I pack for New York this weekend?"}),
    ("model", {"functionCall": {"name": "forecast", "args": {"city": "New York"}}}),
    ("user", {"functionResponse": {"name": "forecast", "response": {"value": "rainy"}}}),
]


def body(*, single: bool) -> dict:
    """The request with every list field as a list, or (``single``) as its one object."""
    wrap = (lambda x: x) if single else (lambda x: [x])
    return {
        "contents": [{"role": r, "parts": wrap(p)} for r, p in TURNS],
        "tools": wrap(DECLS),
        "systemInstruction": {"parts": wrap(SYSTEM_PART)},
        "generationConfig": {"temperature": 0},
    }


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "gemini-2.0-flash", "gemini-3-pro-preview"])
def test_one_object_is_estimated_as_the_list_of_it(model):
    prov = get_provider("gemini")
    profile = resolve_model(f"gemini:{model}")
    single = prov.estimate_prompt(body(single=True), profile)
    listed = prov.estimate_prompt(body(single=False), profile)
    assert single.input_tokens == listed.input_tokens
    assert [s.tokens for s in single.segments] == [s.tokens for s in listed.segments]
    # and each object counts: without the declarations, the system or a turn it is less
    for drop in ("tools", "systemInstruction"):
        less = {k: v for k, v in body(single=True).items() if k != drop}
        assert prov.estimate_prompt(less, profile).input_tokens < single.input_tokens, drop
    short = {**body(single=True), "contents": body(single=True)["contents"][:1]}
    assert prov.estimate_prompt(short, profile).input_tokens < single.input_tokens


def test_one_object_passes_the_validator():
    assert validate_gemini(body(single=True)) == validate_gemini(body(single=False)) == []


def cassette(tmp_path, request: dict, name: str):
    """A Ruby VCR cassette (ellmer's layout) of one generateContent call with usage."""
    answer = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Umbrella"}]}}],
        "usageMetadata": {"promptTokenCount": 70, "candidatesTokenCount": 2},
        "modelVersion": "gemini-2.5-flash",
    }
    uri = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    text = (
        "http_interactions:\n- request:\n    method: POST\n"
        f"    uri: {uri}\n    body:\n      string: {json.dumps(json.dumps(request))}\n"
        "  response:\n    status: 200\n    body:\n"
        f"      string: {json.dumps(json.dumps(answer))}\n"
    )
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_one_object_imports_as_the_list_and_renders_as_sent(tmp_path):
    store = open_store(tmp_path / "store")
    single = cassette(tmp_path, body(single=True), "single.yml")
    listed = cassette(tmp_path, body(single=False), "listed.yml")
    (a,) = import_paths(store, [single], format="cassette-all")
    (b,) = import_paths(store, [listed], format="cassette-all")
    na, nb = store.nodes(a.id), store.nodes(b.id)
    assert Counter(n.role for n in na) == Counter(
        {"system": 1, "user": 1, "assistant": 1, "tool": 1}
    )
    assert [(n.role, n.input, n.output) for n in na] == [(n.role, n.input, n.output) for n in nb]
    ma, mb = store.get_session(a.id).metadata, store.get_session(b.id).metadata
    assert ma["tools"] == mb["tools"] == [DECLS]
    assert ma["system"] == mb["system"] == SYSTEM_PART["text"]
    for sid in (a.id, b.id):
        ours, recorded = _body(store, sid)
        assert differences(ours, recorded) == []
    assert isinstance(_body(store, a.id)[0]["tools"], dict)  # as sent, not as a list
    store.close()


def test_a_system_part_of_no_text_renders_as_sent(tmp_path):
    # ellmer sends {"parts": {"text": ""}} when a chat has no system prompt.
    store = open_store(tmp_path / "store")
    for single in (True, False):
        request = {**body(single=single), "systemInstruction": {"parts": {"text": ""}}}
        if not single:
            request["systemInstruction"] = {"parts": [{"text": ""}]}
        path = cassette(tmp_path, request, f"empty-{single}.yml")
        (res,) = import_paths(store, [path], format="cassette-all")
        ours, recorded = _body(store, res.id)
        assert differences(ours, recorded) == [], single
    store.close()
