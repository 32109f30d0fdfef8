"""The structural validators catch what each vendor refuses (so a clean result means something)."""

from __future__ import annotations

import copy
import json

import pytest

from ctxrules.model import ContextCommit, ContextItem
from ctxrules.providers import get_provider
from ctxrules.render import render_body

from .conftest import CASSETTES, load_cassette


def _commit() -> ContextCommit:
    items = (
        ContextItem(source_node_id="u1", role="user", rendered="go"),
        ContextItem(source_node_id="a1", role="assistant", rendered="on it"),
        ContextItem(
            source_node_id="t1",
            role="tool",
            name="ls",
            caller="a1",
            tool_use_id="call_1",
            tool_input='{"p": "."}',
            rendered="a.txt",
        ),
        ContextItem(source_node_id="a2", role="assistant", rendered="one file"),
    )
    return ContextCommit(id="c", session_id="s", head_node_id="a2", rules_version="r", items=items)


LS = {"name": "ls", "input_schema": {"type": "object"}}


def _body(name: str) -> dict:
    return json.loads(render_body(_commit(), name, tools=[LS]))


def test_rendered_and_recorded_bodies_are_clean():
    for name in ("anthropic", "openai-chat", "openai-responses", "gemini"):
        assert get_provider(name).validate(_body(name)) == []
    for kind, rels in CASSETTES.items():
        for rel in rels:
            from .conftest import CORPUS_CASSETTES

            request, _, _ = load_cassette(CORPUS_CASSETTES / rel)
            assert get_provider(kind).validate(request) == [], rel


def _mark_every_block(body: dict) -> None:
    for m in body["messages"]:  # 4 messages, 5 blocks: one breakpoint too many
        for block in m["content"]:
            block["cache_control"] = {"type": "ephemeral"}


MUTATIONS = {
    "anthropic": {
        "orphan result": lambda b: b["messages"][1]["content"].pop(),  # drop the tool_use
        "unanswered call": lambda b: b["messages"].pop(2),
        "assistant first": lambda b: b["messages"].pop(0),
        "repeated role": lambda b: b["messages"].insert(1, copy.deepcopy(b["messages"][0])),
        "result after text": lambda b: b["messages"][2]["content"].insert(
            0, {"type": "text", "text": "x"}
        ),
        "unsigned thinking": lambda b: b["messages"][1]["content"].insert(
            0, {"type": "thinking", "thinking": "t"}
        ),
        "five breakpoints": lambda b: _mark_every_block(b),
        "prefill ends with whitespace": lambda b: b["messages"][-1]["content"][-1].update(
            text="one file \n"
        ),
        # The Messages API answers 400 to tool blocks in a request that declares no tools.
        "tool blocks without tools": lambda b: b.pop("tools"),
        "tool blocks with an empty tools list": lambda b: b.update(tools=[]),
    },
    "openai-chat": {
        "orphan result": lambda b: b["messages"][1].pop("tool_calls"),
        "unanswered call": lambda b: b["messages"].pop(2),
        "call answered late": lambda b: b["messages"].insert(
            2, {"role": "user", "content": "interrupt"}
        ),
        "arguments not a string": lambda b: b["messages"][1]["tool_calls"][0]["function"].update(
            arguments={"p": "."}
        ),
    },
    "openai-responses": {
        "orphan output": lambda b: b["input"].pop(2),
        "unanswered call": lambda b: b["input"].pop(3),
        "output before call": lambda b: b["input"].insert(1, b["input"].pop(3)),
    },
    "gemini": {
        "orphan response": lambda b: b["contents"][1]["parts"].pop(),
        "unanswered call": lambda b: b["contents"].pop(2),
        "model first": lambda b: b["contents"].pop(0),
        "wrong role": lambda b: b["contents"][1].update(role="assistant"),
    },
}


def test_server_tool_blocks_need_no_declaration():
    """Server tools (web search, tool search) run on the API's side: their blocks are
    accepted without a ``tools`` entry, while a client tool_use is not."""
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "news?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
                    {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []},
                    {"type": "text", "text": "nothing new"},
                ],
            },
            {"role": "user", "content": "thanks"},
        ],
    }
    assert get_provider("anthropic").validate(body) == []
    body["messages"][1]["content"].append(
        {"type": "tool_use", "id": "c", "name": "ls", "input": {}}
    )
    body["messages"][2]["content"] = [{"type": "tool_result", "tool_use_id": "c", "content": "x"}]
    problems = get_provider("anthropic").validate(body)
    assert problems == ["2 tool_use / tool_result blocks but no tools declared"]


@pytest.mark.parametrize(("name", "mutation"), [(n, m) for n, ms in MUTATIONS.items() for m in ms])
def test_validator_catches(name, mutation):
    body = _body(name)
    MUTATIONS[name][mutation](body)
    assert get_provider(name).validate(body) != [], mutation
