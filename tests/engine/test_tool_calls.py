"""Tool calls are never dropped: ``prepare`` refuses input that leaves calls of the
answer at HEAD without a result — the user's next message while four calls wait, one
result of four, no input at all — naming them, with nothing stored; or, switched to
``unanswered_calls="not_run"``, answers each call left with the configured result and
says so (``TurnPrep.not_run``, the tool node's metadata).  On each wire, every call the
model asked for is in the request with its result."""

from __future__ import annotations

import json

import pytest

from ctxrules import dag
from ctxrules.engine import NOT_RUN_RESULT, Engine, EngineConfig, ToolResult
from ctxrules.errors import ConfigError, UnansweredToolCallsError
from ctxrules.model import ToolSpec

from .conftest import QUIET

CALLS = ["c1", "c2", "c3", "c4"]
MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai-chat": "gpt-4o",
    "openai-responses": "gpt-4o",
    "gemini": "gemini-2.5-flash",
}


def _answer_with_calls() -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "tool_use", "id": c, "name": "ls", "input": {"n": c}} for c in CALLS],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 50, "output_tokens": 20},
    }


def _waiting(store, **config):
    config.setdefault("sources", QUIET)
    engine = Engine(
        store, EngineConfig(model="claude-sonnet-4-5", tools=(ToolSpec(name="ls"),), **config)
    )
    s = dag.create_session(store).id
    prep = engine.prepare(s, "list four directories", now=1.0)
    engine.record(prep, _answer_with_calls(), now=2.0)
    return engine, s


def _stored(store, s):
    return [n.id for n in store.nodes(s)], store.get_session(s).head


@pytest.mark.parametrize(
    "call",
    [
        lambda e, s: e.prepare(s, "never mind, do something else", now=3.0),
        lambda e, s: e.prepare(s, tool_results=[ToolResult("c2", "b")], now=3.0),
        lambda e, s: e.prepare(s, now=3.0),
    ],
    ids=["a user message", "one result of four", "no input"],
)
def test_input_that_leaves_calls_unanswered_is_refused(store, call):
    engine, s = _waiting(store)
    before = _stored(store, s)
    with pytest.raises(UnansweredToolCallsError, match="without a result") as exc:
        call(engine, s)
    assert set(exc.value.calls) <= set(CALLS) and len(exc.value.calls) >= 3
    assert "c1 (ls)" in str(exc.value) and "not_run" in str(exc.value)
    assert _stored(store, s) == before


def test_calls_left_are_answered_as_not_run_and_said_so(store):
    engine, s = _waiting(store, unanswered_calls="not_run")
    prep = engine.prepare(s, tool_results=[ToolResult("c2", "dir b: 3 files")], now=3.0)
    assert prep.not_run == ("c1", "c3", "c4")
    results = {
        b["tool_use_id"]: b
        for m in prep.body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    }
    assert set(results) == set(CALLS)  # every call is in the request with a result
    assert results["c2"]["content"] == "dir b: 3 files"
    for c in ("c1", "c3", "c4"):
        assert results[c]["content"] == NOT_RUN_RESULT and results[c]["is_error"] is True
    tools = store.children(store.get_session(s).head, session_id=s, edge="caller")
    assert sorted(t.metadata["tool_use_id"] for t in tools if t.metadata.get("not_run")) == [
        "c1",
        "c3",
        "c4",
    ]


def test_a_user_message_after_calls_answers_them_first_when_switched_on(store):
    engine, s = _waiting(store, unanswered_calls="not_run", not_run_result="Cancelled by the user.")
    prep = engine.prepare(s, "stop, do something else", now=3.0)
    assert prep.not_run == tuple(CALLS)
    last_two = prep.body["messages"][-2:]
    tool_results = [b for m in last_two for b in m["content"] if b.get("type") == "tool_result"]
    assert [b["tool_use_id"] for b in tool_results] == CALLS
    assert all(b["content"] == "Cancelled by the user." for b in tool_results)
    assert "stop, do something else" in json.dumps(prep.body["messages"][-1])


@pytest.mark.parametrize("provider", list(MODELS))
def test_every_wire_carries_every_call_with_its_result(store, provider):
    engine = Engine(
        store,
        EngineConfig(
            provider="anthropic",
            model="claude-sonnet-4-5",
            sources=QUIET,
            tools=(ToolSpec(name="ls"),),
            unanswered_calls="not_run",
        ),
    )
    s = dag.create_session(store).id
    engine.record(engine.prepare(s, "go", now=1.0), _answer_with_calls(), now=2.0)
    other = Engine(
        store,
        EngineConfig(
            provider=provider,
            model=MODELS[provider],
            sources=QUIET,
            tools=(ToolSpec(name="ls"),),
            unanswered_calls="not_run",
        ),
    )
    prep = other.prepare(s, "and then?", now=3.0)
    body = json.dumps(prep.body)
    for c in CALLS:
        assert body.count(f'"{c}"') >= 2 or provider == "gemini"  # the call and its result
    assert body.count("was not run") == 4


def test_the_setting_is_checked():
    with pytest.raises(ConfigError, match="unanswered_calls"):
        EngineConfig(unanswered_calls="drop")
    with pytest.raises(ConfigError, match="not_run_result"):
        EngineConfig(not_run_result=" ")
