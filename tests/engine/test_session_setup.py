"""Sessions the engine serves remember their setup — provider, model, system prompt,
tools, parameters — and every command reads it back: ``ctxrules stats`` measures the
window of the model the session used, ``ctxrules render --for`` gives the request the
engine sent, byte for byte.  The engine never reads its own parameters back as a
recording's, and an imported session keeps its recording's setup."""

from __future__ import annotations

import json

from ctxrules import dag
from ctxrules.cli import main
from ctxrules.engine import Engine, EngineConfig, ToolResult
from ctxrules.model import ToolSpec
from ctxrules.providers import resolve_model
from ctxrules.render import recorded_request
from ctxrules.store import open_store

from .conftest import QUIET

NOW = 1_767_225_600.0
LS = ToolSpec(
    name="ls",
    description="List a directory.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)


def _chat_answer(*, call: bool, prompt: int) -> dict:
    message: dict = {"role": "assistant", "content": None if call else "Two files."}
    if call:
        message["tool_calls"] = [
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 9, "total_tokens": prompt + 9},
    }


def _served(tmp_path):
    location = str(tmp_path / "store")
    store = open_store(location, create=True)
    engine = Engine(
        store,
        EngineConfig(
            provider="openai-chat",
            model="gpt-4o",
            system="You are a careful coding agent.",
            tools=(LS,),
            sources=QUIET,
            extra={"temperature": 0.2},
        ),
    )
    sid = dag.create_session(store).id
    first = engine.prepare(sid, "What is in src?", now=NOW)
    done = engine.record(first, _chat_answer(call=True, prompt=120), now=NOW + 1)
    second = engine.prepare(sid, tool_results=[ToolResult("call_1", "a.py")], now=NOW + 2)
    answer = engine.record(second, _chat_answer(call=False, prompt=150), now=NOW + 3)
    return location, store, sid, first, done, second, answer


def _cli(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_stats_measures_the_model_the_session_used(tmp_path, capsys):
    location, store, sid, *_ = _served(tmp_path)
    store.close()
    out = json.loads(_cli(capsys, "stats", sid, "--store", location, "--json"))
    assert (out["provider"], out["model"]) == ("openai-chat", "gpt-4o")
    assert out["usage"]["window"] == resolve_model("openai:gpt-4o").context_window
    assert out["usage"]["basis"] == "measured" and out["usage"]["total_used"] == 150


def test_render_for_gives_the_request_the_engine_sent(tmp_path, capsys):
    location, store, sid, first, done, second, answer = _served(tmp_path)
    store.close()
    for prep, node in ((first, done.node.id), (second, answer.node.id)):
        out = json.loads(
            _cli(
                capsys,
                "render",
                sid,
                "--provider",
                "openai-chat",
                "--for",
                node,
                "--store",
                location,
                "--json",
            )
        )
        assert out["body"] == prep.body
    assert prep.body["messages"][0] == {
        "role": "system",
        "content": "You are a careful coding agent.",
    }
    assert prep.body["temperature"] == 0.2 and prep.body["tools"][0]["function"]["name"] == "ls"


def test_the_setup_is_the_sessions_metadata(tmp_path):
    _, store, sid, first, *_ = _served(tmp_path)
    rec = recorded_request(store.get_session(sid).metadata)
    assert (rec.provider, rec.model) == ("openai-chat", "gpt-4o")
    assert rec.system_sent == ("You are a careful coding agent.",)
    assert [t.name for t in rec.tools or ()] == ["ls"]
    assert (
        rec.params["temperature"] == 0.2
        and rec.params["max_completion_tokens"] == (first.body["max_completion_tokens"])
    )


def test_the_engine_does_not_read_its_own_parameters_back(tmp_path):
    _, store, sid, *_ = _served(tmp_path)
    # The service restarts without the temperature and with a smaller output reserve.
    engine = Engine(
        store,
        EngineConfig(
            provider="openai-chat", model="gpt-4o", tools=(LS,), sources=QUIET, output_reserve=2048
        ),
    )
    prep = engine.prepare(sid, "And in tests?", now=NOW + 10)
    assert "temperature" not in prep.body and prep.body["max_completion_tokens"] == 2048
    rec = recorded_request(store.get_session(sid).metadata)
    assert "temperature" not in rec.params and rec.system_sent == ()  # no system now


def test_an_imported_session_keeps_its_recordings_setup(store, corpus):
    from ctxrules.importers import import_paths

    cc = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    (res,) = import_paths(store, [str(corpus / cc)])
    before = dict(store.get_session(res.id).metadata)
    engine = Engine(store, EngineConfig(provider="openai-chat", model="gpt-4o", sources=QUIET))
    engine.prepare(res.id, "Go on.", now=NOW)
    assert store.get_session(res.id).metadata == before
