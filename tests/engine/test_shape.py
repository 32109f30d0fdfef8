"""``ctxrules.shape``: a message list in, the same wire's list shaped by the rules out —
stateless (nothing written anywhere), the rules' promise kept, every text kept or
accounted for, the result the vendor accepts (each provider's request validator, and
the official SDK against a loopback server), the same result however the cache was
warmed, and no tool call dropped."""

from __future__ import annotations

import json
import os

import pytest
from tests.presets import EVERY_RULE

import ctxrules
from ctxrules.engine import shaping
from ctxrules.errors import ConfigError, ImportFormatError, UnansweredToolCallsError
from ctxrules.providers import get_provider
from loopback import Loopback
from providers.conftest import CASSETTES, CORPUS_CASSETTES, load_cassette

SYSTEM = "You are a careful coding agent."


def _chat(turns: int, functions: int = 60) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": SYSTEM}]
    for i in range(turns):
        msgs.append({"role": "user", "content": f"What does module {i} do?"})
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read", "arguments": json.dumps({"path": f"m{i}.py"})},
                    }
                ],
            }
        )
        body = f"# module {i}\n" + "".join(
            f"def f{j}():\n    return {j}\n" for j in range(functions)
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
        msgs.append({"role": "assistant", "content": f"Module {i} defines sixty functions."})
    return msgs


def _fresh() -> None:
    shaping._cache.clear()


def test_the_shipped_list_is_the_vendors_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    msgs = [*_chat(3), {"role": "user", "content": "Summarise."}]
    out = ctxrules.shape(msgs, provider="openai-chat", rules="off")
    assert out == msgs[:1] + [m for m in out[1:]]  # the system message leads, as given
    assert [m["role"] for m in out] == [m["role"] for m in msgs]
    for given, shaped in zip(msgs, out):  # no rule: every message as the vendor reads it
        assert shaped.get("content") == given.get("content")
        assert shaped.get("tool_call_id") == given.get("tool_call_id")
    assert os.listdir(tmp_path) == []  # no store, no file


def test_rules_age_old_tool_results_and_keep_the_last_turns(tmp_path):
    # The request after the last tool result, inside that turn; results under the cap.
    msgs = _chat(12, functions=30)[:-1]
    _fresh()
    off = ctxrules.shape(msgs, provider="openai-chat", rules="off")
    # aggressive's budgets without the cache ledger (tests/presets.py): aging at once.
    aged = ctxrules.shape(msgs, provider="openai-chat", rules=EVERY_RULE)
    assert len(aged) == len(msgs)  # nothing removed: aged and cleared items stay in place
    tools = [(a, o) for a, o in zip(aged, off) if o["role"] == "tool"]
    changed = [a for a, o in tools if a["content"] != o["content"]]
    # (aged stubs name their outputs' identifiers, so a third is kept, not a half)
    assert changed and len(json.dumps(aged)) < len(json.dumps(off)) * 2 / 3
    assert tools[-1][0]["content"] == tools[-1][1]["content"]  # the last turn stays full
    assert aged[-1] == off[-1] == msgs[-1]


@pytest.mark.parametrize("kind", ["anthropic", "openai-chat", "gemini"])
def test_a_recorded_request_shaped_is_a_request_the_vendor_accepts(kind):
    request, _, _ = load_cassette(CORPUS_CASSETTES / CASSETTES[kind][-1], -1)
    key = "contents" if kind == "gemini" else "messages"
    system = request.get("system") or request.get("systemInstruction")
    out = ctxrules.shape(request[key], provider=kind, rules="aggressive", system=system)
    body = dict(request, **{key: out})
    assert get_provider(kind).validate(body) == []
    if kind != "gemini":  # Gemini's functionResponse comes back wrapped ({"output": …})
        assert out[-1] == request[key][-1]  # the newest input is sent as it came


def test_the_openai_sdk_sends_the_shaped_list():
    openai = pytest.importorskip("openai")
    msgs = [*_chat(6), {"role": "user", "content": "Go on."}]
    out = ctxrules.shape(msgs, provider="openai-chat", rules="aggressive")
    with Loopback() as server:
        server.reply(
            {
                "id": "x",
                "object": "chat.completion",
                "model": "gpt-4o",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
            }
        )
        client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        client.chat.completions.create(model="gpt-4o", messages=out)
    (sent,) = server.seen
    assert sent.body["messages"] == out
    assert get_provider("openai-chat").validate(sent.body) == []


def test_rules_given_as_a_configuration_and_changed_between_calls():
    # A PipelineConfig holds dicts: shaping with one raised TypeError (unhashable).
    msgs = _chat(6, functions=30)[:-1]
    config = ctxrules.PipelineConfig(
        pipeline=("tool_aging",),
        rules={"tool_aging": {"tail_turns": 1, "step_turns": 1, "stub_identifier_chars": 0}},
    )
    aged = ctxrules.shape(msgs, provider="openai-chat", rules=config)
    stubs = [m for m in aged if m["role"] == "tool" and m["content"].startswith("[tool read]")]
    assert len(stubs) == 5  # every result before the last turn, aged
    config.rules["tool_aging"]["tail_turns"] = 3  # the same object, other rules
    assert ctxrules.shape(msgs, provider="openai-chat", rules=config) != aged


def test_the_result_does_not_depend_on_what_was_shaped_before():
    msgs = [*_chat(10), {"role": "user", "content": "Next."}]
    for rules in ("default", "aggressive"):
        warm = []
        _fresh()
        for n in range(5, len(msgs) + 1, 4):  # an agent's calls, one per request
            warm.append(ctxrules.shape(msgs[:n], provider="openai-chat", rules=rules))
        for n, got in zip(range(5, len(msgs) + 1, 4), warm):
            _fresh()
            assert ctxrules.shape(msgs[:n], provider="openai-chat", rules=rules) == got


def test_the_incremental_path_reads_only_what_is_new(monkeypatch):
    msgs = _chat(10)
    _fresh()
    ctxrules.shape(msgs[:-3], provider="openai-chat")  # the request before an answer
    read: list[int] = []
    real = shaping._read
    monkeypatch.setattr(
        shaping, "_read", lambda wire, m, system: read.append(len(m)) or real(wire, m, system)
    )
    ctxrules.shape(msgs[:-1], provider="openai-chat")  # the answer and its tool's result
    assert read and read[0] <= 4  # the answer before them again (its calls), and the new


@pytest.mark.parametrize(
    ("kind", "messages"),
    [
        (
            "anthropic",
            [
                {"role": "user", "content": "list"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
                        {"type": "tool_use", "id": "t2", "name": "ls", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}],
                },
            ],
        ),
        (
            "openai-chat",
            [
                {"role": "user", "content": "list"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "t1",
                            "type": "function",
                            "function": {"name": "ls", "arguments": "{}"},
                        },
                        {
                            "id": "t2",
                            "type": "function",
                            "function": {"name": "ls", "arguments": "{}"},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "t1", "content": "a.py"},
                {"role": "user", "content": "never mind"},
            ],
        ),
    ],
)
def test_no_tool_call_is_dropped(kind, messages):
    with pytest.raises(UnansweredToolCallsError, match="t2") as exc:
        ctxrules.shape(messages, provider=kind)
    assert exc.value.calls == ["t2"]
    out = ctxrules.shape(messages, provider=kind, unanswered="not_run", not_run_result="skipped")
    text = json.dumps(out)
    assert text.count('"t2"') == 2 and "skipped" in text  # the call and its result
    tools: list[dict] = (
        [{"name": "ls", "input_schema": {"type": "object"}}]
        if kind == "anthropic"
        else [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]
    )
    body = {"model": "m", "max_tokens": 5, "messages": out, "tools": tools}
    assert get_provider(kind).validate(body) == []


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ConfigError, match="rules must be"):
        ctxrules.shape([{"role": "user", "content": "x"}], provider="openai-chat", rules=3)
    with pytest.raises(ImportFormatError):
        ctxrules.shape([{"content": "no role"}], provider="openai-chat")
    with pytest.raises(ConfigError, match="unanswered"):
        ctxrules.shape([{"role": "user", "content": "x"}], provider="openai-chat", unanswered="x")
