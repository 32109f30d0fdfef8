"""Recorded request defaults land in the session metadata (docs/sessions.md): ``system``,
``tools``, ``model``, ``provider`` and ``params``, where the format records them, and
nothing the recording does not hold.  Expected values are read from the files with
plain json / yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests.corpus import entries

from ctxrules.cli import main
from ctxrules.importers import import_paths

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
#: The pydantic-ai cassettes (their bodies are ``parsed_body`` mappings), by path.
CASSETTES = [e["path"] for e in entries(kind="cassette-yaml-pydantic-ai")]
OPENAI = "vcr-cassettes-yaml/openai-chat/test_tool_search_eval_openai-chat.yaml"
CC = [
    "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    "claude-code-jsonl/reliability_coverage-test-fix.jsonl",
]
SWE = "swe-agent-traj/function_calling_replace_marshmallow-code__marshmallow-1867.traj"
SWE_PLAIN = "swe-agent-traj/gpt4_swe-agent__test-repo-i1.traj"
OPENHANDS = "openhands-trajectory/basic_gui_mode.json"
TAU = "openai-chat-json/taubench_gpt-4o-airline.json"
#: Not request parameters: the conversation, its system prompt, tools and model, and
#: whether the answer was streamed.
NOT_PARAMS = {"model", "system", "systemInstruction", "tools", "messages", "contents", "stream"}


def requests(corpus, name):
    """Every recorded request body of a cassette, with its URI."""
    doc = yaml.safe_load((corpus / name).read_text())
    for it in doc["interactions"]:
        req = it["request"]
        body = req.get("parsed_body")
        if body is None:
            body = json.loads(
                req["body"] if isinstance(req["body"], str) else req["body"]["string"]
            )
        yield req["uri"], body


def recorded_system(body):
    system = body.get("system", body.get("systemInstruction"))
    if isinstance(system, dict):
        system = system["parts"]
    if isinstance(system, list):
        return "\n".join(part["text"] for part in system)
    return system


@pytest.mark.parametrize("name", CASSETTES)
def test_cassette_requests(corpus, store, name):
    results = import_paths(store, [str(corpus / name)], format="cassette-all")
    bodies = list(requests(corpus, name))
    assert len(results) == len(bodies)
    for res, (uri, body) in zip(results, bodies):
        meta = store.get_session(res.id).metadata
        provider = {"anthropic.com": "anthropic", "openai.com": "openai-chat"}
        want = next((p for host, p in provider.items() if host in uri), "gemini")
        assert meta["provider"] == want
        model = body.get("model") or uri.split("/models/")[1].split(":")[0]
        assert meta["model"] == model
        assert meta.get("system") == recorded_system(body)
        assert meta.get("tools") == body.get("tools")
        assert meta["params"] == {k: v for k, v in body.items() if k not in NOT_PARAMS}
        assert meta["request"] == {
            k: v for k, v in body.items() if k not in ("messages", "contents")
        }
    # What the issue names: max_tokens, tool_choice, cache_control and thinking are kept.
    kept = set().union(*(store.get_session(r.id).metadata["params"] for r in results))
    assert kept & {"max_tokens", "tool_choice", "cache_control", "thinking", "generationConfig"}


@pytest.mark.parametrize(
    ("cassette", "fmt", "provider"),
    [
        (
            "vcr-cassettes-yaml/anthropic/test_multiple_parallel_tool_calls.yaml",
            "anthropic-messages",
            "anthropic",
        ),
        (OPENAI, "openai-chat", "openai-chat"),
    ],
)
def test_request_body_dumps(corpus, store, tmp_path, cassette, fmt, provider):
    """A request body saved as JSON (what an SDK logs) keeps the same defaults."""
    _, body = list(requests(corpus, cassette))[-1]
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body))
    (res,) = import_paths(store, [str(path)])
    assert res.format == fmt
    meta = store.get_session(res.id).metadata
    assert meta["provider"] == provider and meta["model"] == body["model"]
    assert meta["tools"] == body["tools"]
    assert meta.get("system") == recorded_system(body)
    assert meta["params"] == {k: v for k, v in body.items() if k not in NOT_PARAMS}
    assert meta["request"] == {k: v for k, v in body.items() if k != "messages"}


@pytest.mark.parametrize("name", CC)
def test_claude_code_records_its_model_and_provider_only(corpus, store, name):
    (res,) = import_paths(store, [str(corpus / name)])
    meta = store.get_session(res.id).metadata
    lines = [json.loads(x) for x in (corpus / name).read_text().splitlines()]
    first = next(e["message"]["model"] for e in lines if e["type"] == "assistant")
    assert meta["model"] == first and meta["provider"] == "anthropic"
    # Claude Code records no system prompt, tool declarations or parameters.
    assert not {"system", "tools", "params"} & set(meta)


def test_a_synthetic_message_names_no_model(corpus, store, tmp_path):
    """Claude Code writes ``<synthetic>`` on messages it made itself (no request)."""
    lines = [json.loads(x) for x in (corpus / CC[0]).read_text().splitlines()]
    first = next(e for e in lines if e["type"] == "assistant")["message"]["id"]
    later = next(
        e["message"]["model"]
        for e in lines
        if e["type"] == "assistant" and e["message"]["id"] != first
    )
    for e in lines:
        if e["type"] == "assistant" and e["message"]["id"] == first:
            e["message"]["model"] = "<synthetic>"
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    (res,) = import_paths(store, [str(path)])
    assert store.get_session(res.id).metadata["model"] == later


def test_swe_agent_model_from_its_config(corpus, store):
    with_config, plain = import_paths(store, [str(corpus / SWE), str(corpus / SWE_PLAIN)])
    doc = json.loads((corpus / SWE).read_text())
    meta = store.get_session(with_config.id).metadata
    assert meta["model"] == doc["replay_config"]["agent"]["model"]["name"]
    assert not {"tools", "provider", "system", "params"} & set(meta)  # not recorded
    assert "model" not in store.get_session(plain.id).metadata


def test_openhands_and_tau_bench(corpus, store):
    hands, *runs = import_paths(store, [str(corpus / OPENHANDS), str(corpus / TAU)])
    events = json.loads((corpus / OPENHANDS).read_text())
    first = next(
        e["tool_call_metadata"]["model_response"]["model"]
        for e in events
        if "tool_call_metadata" in e
    )
    meta = store.get_session(hands.id).metadata
    assert meta["model"] == first
    assert "tools" not in meta and "provider" not in meta  # no system event; LiteLLM shapes
    tau = store.get_session(runs[0].id).metadata
    assert tau["provider"] == "openai-chat" and "model" not in tau  # tau-bench names none


def test_sessions_lists_each_recorded_model(corpus, tmp_path, capsys):
    store = str(tmp_path / "store")
    files = [CC[0], OPENHANDS, SWE, OPENAI]
    assert main(["import", *(str(corpus / f) for f in files), "--store", store, "--json"]) == 0
    ids = [s["id"] for s in json.loads(capsys.readouterr().out)["sessions"]]
    assert main(["sessions", "--store", store, "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    lines = [json.loads(x) for x in (corpus / CC[0]).read_text().splitlines()]
    events = json.loads((corpus / OPENHANDS).read_text())
    want = [
        next(e["message"]["model"] for e in lines if e["type"] == "assistant"),
        next(
            e["tool_call_metadata"]["model_response"]["model"]
            for e in events
            if "tool_call_metadata" in e
        ),
        json.loads((corpus / SWE).read_text())["replay_config"]["agent"]["model"]["name"],
        list(requests(corpus, OPENAI))[-1][1]["model"],
    ]
    assert [rows[i]["model"] for i in ids] == want


def test_gemini_system_instruction_in_the_sdks_spelling(corpus, store, tmp_path):
    """Google's SDKs log ``system_instruction``: it is the system prompt, not a parameter."""
    name = next(c for c in CASSETTES if c.startswith("vcr-cassettes-yaml/gemini/"))
    doc = yaml.safe_load((corpus / name).read_text())
    for it in doc["interactions"]:
        body = it["request"]["parsed_body"]
        if "systemInstruction" in body:
            body["system_instruction"] = body.pop("systemInstruction")
    path = tmp_path / "snake.yaml"
    path.write_text(yaml.safe_dump(doc))
    results = import_paths(store, [str(path)], format="cassette-all")
    bodies = [body for _, body in requests(tmp_path, "snake.yaml")]
    assert len(results) == len(bodies) and any("system_instruction" in b for b in bodies)
    for res, body in zip(results, bodies):
        meta = store.get_session(res.id).metadata
        if "system_instruction" in body:
            parts = body["system_instruction"]["parts"]
            assert meta["system"] == "\n".join(p["text"] for p in parts)
        assert "system_instruction" not in meta["params"]
