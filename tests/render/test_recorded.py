"""The request ctxrules renders for a recorded session is the one the agent sent.

Tools, model and request parameters come from what the session recorded
(``ctxrules.render.session_defaults``, ``ctxrules.requests.render_defaults``); nothing the
agent did not send is added unless asked for.  Expected values are read from the
recordings with plain JSON / YAML parsing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ctxrules.cli import main
from ctxrules.errors import RenderError
from ctxrules.importers import import_paths
from ctxrules.providers import get_provider
from ctxrules.render import explain, render, session_defaults
from ctxrules.requests import explain_request, next_request, render_defaults, request_for
from ctxrules.store import open_store

CLAUDE_CODE = {
    # The README tour's session (Claude Code 1.0.x) and a 2.x one.
    "ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl": "claude-sonnet-4-20250514",
    "reliability_coverage-test-fix.jsonl": "claude-opus-4-5-20251101",
}
THINKING = "vcr-cassettes-yaml/anthropic/test_anthropic_tool_with_thinking.yaml"
GEMINI = "vcr-cassettes-yaml/gemini/test_google_instructions_only_with_tool_calls.yaml"
OPENAI = "vcr-cassettes-yaml/openai-chat/test_tool_search_eval_openai-chat.yaml"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _tool_names(path: Path) -> list[str]:
    """Every tool the transcript's assistant lines call, sorted (plain JSON)."""
    return sorted(
        {
            b["name"]
            for e in _lines(path)
            if isinstance((e.get("message") or {}).get("content"), list)
            for b in e["message"]["content"]
            if b.get("type") == "tool_use"
        }
    )


@pytest.fixture
def claude_code(corpus: Path, tmp_path: Path):
    """Each Claude Code transcript imported: (store dir, {file name: session id})."""
    store_dir = tmp_path / "store"
    store = open_store(store_dir)
    ids = {}
    for name in CLAUDE_CODE:
        (res,) = import_paths(store, [str(corpus / "claude-code-jsonl" / name)])
        ids[name] = res.id
    store.close()
    return str(store_dir), ids


def _answers(store, sid: str) -> list[str]:
    return [n.id for n in store.nodes(sid) if n.role == "assistant" and n.caller is None]


def _render_json(store_dir: str, sid: str, *extra: str) -> dict:
    return _cli_json(["render", sid, "--store", store_dir, "--json", *extra])


def _cli_json(argv: list[str]) -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


@pytest.mark.parametrize("name", sorted(CLAUDE_CODE))
def test_claude_code_tools_are_declared_from_their_calls(claude_code, corpus, name):
    """Regression: Claude Code records tool calls but no declarations, and the Anthropic
    body carried tool_use blocks with no ``tools`` (the Messages API answers 400).  Every
    tool the session called is declared with an open schema, the same list for every
    request of the session (the L0 prefix stays constant)."""
    store_dir, ids = claude_code
    sid = ids[name]
    names = _tool_names(corpus / "claude-code-jsonl" / name)
    assert len(names) >= 3
    store = open_store(store_dir)
    answers = _answers(store, sid)
    seen = []
    for node in (answers[1], answers[-1]):
        doc = _render_json(store_dir, sid, "--provider", "anthropic", "--for", node, "--explain")
        body = doc["body"]
        assert get_provider("anthropic").validate(body) == []
        tools = [{k: v for k, v in t.items() if k != "cache_control"} for t in body["tools"]]
        assert tools == [
            {"name": n, "description": "", "input_schema": {"type": "object"}} for n in names
        ]
        assert doc["explain"]["tools"] == {
            "declared": len(names),
            "inferred": names,
            "source": "inferred from the session's tool calls",
        }
        seen.append(tools)
    assert seen[0] == seen[1]
    # Every other provider gets the same declarations in its own shape.
    for provider in ("openai-chat", "openai-responses", "gemini"):
        body = _render_json(store_dir, sid, "--provider", provider, "--for", answers[-1])["body"]
        assert get_provider(provider).validate(body) == []
        assert json.dumps(body).count('"object"') >= len(names)


@pytest.mark.parametrize("name", sorted(CLAUDE_CODE))
def test_the_answer_model_is_rendered(claude_code, corpus, name):
    """Regression: a session recorded with claude-sonnet-4-20250514 rendered
    claude-sonnet-4-5 (the provider's default)."""
    store_dir, ids = claude_code
    sid = ids[name]
    store = open_store(store_dir)
    last = _answers(store, sid)[-1]
    uuid = store.get_node(last).metadata["claude_code"]["uuid"]
    (line,) = [e for e in _lines(corpus / "claude-code-jsonl" / name) if e.get("uuid") == uuid]
    assert line["message"]["model"] == CLAUDE_CODE[name]
    doc = _render_json(store_dir, sid, "--provider", "anthropic", "--for", last, "--explain")
    assert doc["model"] == doc["body"]["model"] == CLAUDE_CODE[name]
    assert doc["explain"]["model_choice"]["source"] == "answer node"
    # No output limit was recorded: the vendor requires one, so the default is added
    # (the model's output limit, at most 16,384), and explain says so.
    assert doc["body"]["max_tokens"] == 16_384
    assert doc["explain"]["params"]["added"] == {"max_tokens": 16_384}
    # The next request after a user turn uses the model of the answer before it.
    users = [n for n in store.nodes(sid) if n.role == "user" and n.caller is None]
    nxt = _render_json(
        store_dir, sid, "--provider", "anthropic", "--head", users[-1].id, "--now", "0"
    )
    assert nxt["body"]["model"] == CLAUDE_CODE[name]
    # Another family's provider does not get the Claude model: its default, said so.
    doc = _render_json(store_dir, sid, "--provider", "openai-chat", "--for", last, "--explain")
    assert doc["body"]["model"] == "gpt-4o"
    choice = doc["explain"]["model_choice"]
    assert choice["source"] == "provider default" and CLAUDE_CODE[name] in choice["note"]


def test_a_model_of_another_family_is_an_error(claude_code, capsys):
    """Regression: --provider anthropic --model gpt-4o rendered a body without a word."""
    store_dir, ids = claude_code
    sid = ids["ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"]
    last = _answers(open_store(store_dir), sid)[-1]
    base = ["render", sid, "--store", store_dir, "--for", last]
    assert main([*base, "--provider", "anthropic", "--model", "gpt-4o"]) == 1
    assert main([*base, "--provider", "gemini", "--model", "claude-opus-4-5"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert "'gpt-4o'" in err[0] and "openai" in err[0] and "anthropic" in err[0]
    assert "'claude-opus-4-5'" in err[1] and "anthropic" in err[1] and "gemini" in err[1]
    # The library refuses it the same way; a name no family knows (a proxy's, a
    # fine-tune's) is sent as given.
    store = open_store(store_dir)
    request = request_for(store, sid, last)
    with pytest.raises(RenderError, match="gpt-4o"):
        render(request.commit, "anthropic", "gpt-4o")
    assert render(request.commit, "anthropic", "my-proxy-model").model == "my-proxy-model"
    assert render(request.commit, "openai-chat", "ft:gpt-4o:acme").model == "ft:gpt-4o:acme"


def _cassette(corpus: Path, rel: str, interaction: int = -1) -> dict:
    doc = yaml.safe_load((corpus / rel).read_text(encoding="utf-8"))
    return doc["interactions"][interaction]["request"]


@pytest.fixture
def cassettes(corpus: Path, tmp_path: Path):
    """The last interaction of each cassette imported: store and {rel: session id}."""
    store = open_store(tmp_path / "cassettes")
    ids = {}
    for rel in (THINKING, GEMINI, OPENAI):
        (res,) = import_paths(store, [str(corpus / rel)])
        ids[rel] = res.id
    return store, ids


def _last_request(store, sid: str):
    """The recorded request: the conversation the cassette sent, up to its HEAD."""
    return next_request(store, sid, now=0)


def test_recorded_parameters_are_rendered_as_recorded(cassettes, corpus):
    """Regression: max_tokens 4,096 became 16,384 and tool_choice / thinking were
    dropped.  For the provider they were recorded for, every parameter is sent as
    recorded; to another, only the output limit (in that vendor's field)."""
    store, ids = cassettes
    recorded = _cassette(corpus, THINKING)["parsed_body"]
    request = _last_request(store, ids[THINKING])
    ours = json.loads(
        render(
            request.commit, "anthropic", **render_defaults(store, request, "anthropic").options
        ).body
    )
    for key in ("model", "max_tokens", "tool_choice", "thinking"):
        assert ours[key] == recorded[key], key
    # Streaming is how the agent's client read the answer, not part of what it asked:
    # the importer does not record it as a parameter (docs/sessions.md).
    assert "stream" in recorded and "stream" not in ours
    assert [t["name"] for t in ours["tools"]] == [t["name"] for t in recorded["tools"]]
    ex = explain_request(store, request, "anthropic")
    assert ex["params"]["recorded_from"] == "anthropic"
    assert sorted(ex["params"]["applied"]) == ["max_tokens", "thinking", "tool_choice"]
    assert ex["params"]["added"] == {} and ex["params"]["dropped"] == []
    # Rendered for Gemini: the output limit in generationConfig, Anthropic's other
    # parameters nowhere (a vendor-shaped tool_choice means nothing there).
    gem = json.loads(
        render(request.commit, "gemini", **render_defaults(store, request, "gemini").options).body
    )
    assert gem["generationConfig"] == {"maxOutputTokens": 4096}
    assert not {"tool_choice", "thinking", "stream", "max_tokens"} & set(gem)
    assert get_provider("gemini").validate(gem) == []
    ex = explain_request(store, request, "gemini")
    assert ex["params"]["applied"] == ["max_tokens"]
    assert sorted(d.split()[0] for d in ex["params"]["dropped"]) == [
        "thinking",
        "tool_choice",
    ]
    # ... and for OpenAI Chat under its own name.
    chat = json.loads(
        render(
            request.commit, "openai-chat", **render_defaults(store, request, "openai-chat").options
        ).body
    )
    assert chat["max_completion_tokens"] == 4096 and "tool_choice" not in chat


def test_gemini_and_openai_parameters_pass_through(cassettes, corpus):
    store, ids = cassettes
    for rel, provider, keys in (
        (GEMINI, "gemini", ("generationConfig", "toolConfig")),
        (OPENAI, "openai-chat", ("model", "tool_choice")),
    ):
        recorded = _cassette(corpus, rel)["parsed_body"]
        request = _last_request(store, ids[rel])
        options = render_defaults(store, request, provider).options
        body = json.loads(render(request.commit, provider, **options).body)
        for key in keys:
            assert body[key] == recorded[key], (rel, key)
        assert get_provider(provider).validate(body) == []


def test_a_cassettes_claude_model_stays_out_of_an_openai_body(cassettes):
    """Regression: the recorded claude-sonnet-4-0 was sent in an openai-chat body."""
    store, ids = cassettes
    request = _last_request(store, ids[THINKING])
    ex = explain_request(store, request, "openai-chat")
    assert ex["model"] == "gpt-4o"
    assert "claude-sonnet-4-0" in ex["model_choice"]["note"]
    # A recorded model of the same family carries over between its providers.
    request = _last_request(store, ids[OPENAI])
    assert explain_request(store, request, "openai-responses")["model"] == "gpt-5.4-mini"


# The importers' contract for session metadata: system, tools, model, provider and the
# recorded parameters in that provider's own shape.
RECORDED = {
    "system": "You are a careful coding agent.",
    "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}],
    "model": "claude-sonnet-4-20250514",
    "provider": "anthropic",
    "params": {
        "max_tokens": 4096,
        "tool_choice": {"type": "any"},
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "temperature": 0.2,
    },
}


def test_session_defaults_follow_the_metadata_contract():
    d = session_defaults(RECORDED, "anthropic")
    assert d.options["model"] == "claude-sonnet-4-20250514"
    # The recorded system prompt is in the history as a system node (the importers'
    # contract): sending it as an option as well would send it twice.
    assert "system" not in d.options and d.explain["system"]["source"] == "history"
    assert [t.name for t in d.options["tools"]] == ["read"]
    assert d.options["max_tokens"] == 4096
    assert d.options["extra"] == {k: v for k, v in RECORDED["params"].items() if k != "max_tokens"}
    assert d.explain["params"]["dropped"] == [] and d.explain["params"]["added"] == {}
    body = json.loads(render(_one_turn(), "anthropic", **d.options).body)
    assert body["context_management"] == RECORDED["params"]["context_management"]
    assert body["tool_choice"] == {"type": "any"} and body["temperature"] == 0.2
    # Options take precedence over the recording.
    d = session_defaults(
        RECORDED, "anthropic", model="claude-opus-4-5", system="", tools=[], max_tokens=99
    )
    assert d.options["model"] == "claude-opus-4-5" and d.options["max_tokens"] == 99
    assert d.options["system"] == "" and "tools" not in d.options
    assert d.explain["tools"]["source"] == "option"
    assert d.explain["params"]["dropped"] == ["max_tokens (--max-tokens given)"]
    # For Gemini: the limit nested where Gemini takes it, nothing else of Anthropic's.
    d = session_defaults(RECORDED, "gemini")
    assert d.options == {
        "tools": session_defaults(RECORDED, "anthropic").options["tools"],
        "max_tokens": 4096,
    }
    body = json.loads(render(_one_turn(), "gemini", **d.options).body)
    assert body["generationConfig"] == {"maxOutputTokens": 4096}


def test_an_older_output_limit_field_is_kept_for_its_own_provider():
    """A Chat Completions request recorded with ``max_tokens`` (the older field) is sent
    with it; another vendor gets the limit under its own field."""
    meta = {"provider": "openai-chat", "model": "gpt-4o", "params": {"max_tokens": 512}}
    chat = json.loads(
        render(_one_turn(), "openai-chat", **session_defaults(meta, "openai-chat").options).body
    )
    assert chat["max_tokens"] == 512 and "max_completion_tokens" not in chat
    anth = json.loads(
        render(_one_turn(), "anthropic", **session_defaults(meta, "anthropic").options).body
    )
    assert anth["max_tokens"] == 512 and anth["model"] == "claude-sonnet-4-5"


def test_a_recording_without_parameters_has_none(tmp_path: Path):
    """A streamed request with no other parameter: the importer records no ``params``,
    and the recorded body it keeps beside them (``request``) must not make ``stream``
    one: the replay is sent without it."""
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(body))
    store = open_store(tmp_path / "store")
    (res,) = import_paths(store, [str(path)], format="openai-chat")
    meta = store.get_session(res.id).metadata
    assert meta["request"]["stream"] is True and "params" not in meta
    d = session_defaults(meta, "openai-chat")
    assert "extra" not in d.options
    chat = json.loads(render(_one_turn(), "openai-chat", **d.options).body)
    assert "stream" not in chat and "stream_options" not in chat


def _one_turn():
    from ctxrules.model import ContextCommit, ContextItem

    return ContextCommit(
        id="c",
        session_id="s",
        head_node_id="u",
        rules_version="r",
        items=(ContextItem(source_node_id="u", role="user", rendered="hi"),),
    )


def test_explain_says_where_the_defaults_came_from(claude_code, capsys):
    store_dir, ids = claude_code
    sid = ids["ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"]
    last = _answers(open_store(store_dir), sid)[-1]
    args = ["render", sid, "--store", store_dir, "--provider", "anthropic", "--for", last]
    assert main([*args, "--explain"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "model: answer node" in out
    assert "inferred from the session's tool calls (Bash, Glob, TodoWrite, Write; open" in out
    assert "added max_tokens=16384" in out
    # The library explain of the same request agrees with the CLI's JSON.
    store = open_store(store_dir)
    ex = explain_request(store, request_for(store, sid, last), "anthropic")
    doc = _render_json(store_dir, sid, "--provider", "anthropic", "--for", last, "--explain")
    assert ex["input_tokens"] == doc["explain"]["input_tokens"]
    assert ex["tools"] == doc["explain"]["tools"]
    # Plain ``explain`` of a commit takes the options as given.
    plain = explain(request_for(store, sid, last).commit, "anthropic")
    assert plain["model"] == "claude-sonnet-4-5"
