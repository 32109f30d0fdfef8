"""The LangChain v1 middleware, run offline with LangChain's own fake chat model (given
``bind_tools``, which the stock fakes lack) inside ``create_agent``, sync and async: the
model reads the rules' view while the graph's state keeps every message, and every tool
call stays paired."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import Field

from ctxrules.integrations.langchain import CtxrulesMiddleware, view_messages
from integrations.conftest import AGING, FOLDING
from integrations.replay import (
    CHAT,
    CHAT_STREAM,
    OLD_TURNS,
    check_chat_requests,
    old_chat_turns,
    old_outputs,
    recorded_text,
    replies,
)
from loopback import Loopback

BODY = "".join(f"def f{j}(x):\n    return x * {j}\n" for j in range(60))


class Recording(GenericFakeChatModel):
    """LangChain's fake model, with tools bound (a no-op) and the messages it read kept."""

    seen: list = Field(default_factory=list)

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Recording:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


@tool
def read(path: str) -> str:
    """Read a file."""
    return f"# {path}\n{BODY}"


def _script(turns: int):
    for i in range(turns):
        yield AIMessage(
            content="",
            tool_calls=[
                {"name": "read", "args": {"path": f"m{i}.py"}, "id": f"c{i}", "type": "tool_call"}
            ],
        )
        yield AIMessage(content=f"Module {i} defines sixty functions.")


def _agent(rules):
    model = Recording(messages=_script(6), seen=[])
    return model, create_agent(
        model, tools=[read], system_prompt="Be brief.", middleware=[CtxrulesMiddleware(rules)]
    )


def _run(agent, turns: int, *, use_async: bool = False) -> list:
    messages: list = []
    for i in range(turns):
        messages = [*messages, HumanMessage(f"Read m{i}.py.")]
        state = (
            asyncio.run(agent.ainvoke({"messages": messages}))
            if use_async
            else agent.invoke({"messages": messages})
        )
        messages = state["messages"]
    return messages


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_the_model_reads_the_rules_view_and_the_state_keeps_everything(use_async):
    model, agent = _agent(AGING)
    state = _run(agent, 6, use_async=use_async)
    sent = model.seen[-1]
    tools = [m for m in sent if isinstance(m, ToolMessage)]
    calls = [c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls]
    assert {t.tool_call_id for t in tools} == set(calls)  # every call paired
    assert len(tools[0].content) < len(BODY) / 4  # an old result, aged
    assert BODY in tools[-1].content  # the current one, whole
    assert all(BODY in m.content for m in state if isinstance(m, ToolMessage))  # the state


def test_a_long_past_goes_as_one_summary_and_the_current_turn_whole():
    model, agent = _agent(FOLDING)
    state = _run(agent, 6)
    system, first, *rest = model.seen[-1]
    assert system.content == "Be brief." and first.content == "Read m0.py."  # the task
    summaries = [m for m in rest if str(m.content).startswith("Summary of earlier")]
    assert len(summaries) == 1 and isinstance(summaries[0], HumanMessage)
    tools = [m for m in rest if isinstance(m, ToolMessage)]
    calls = [c["id"] for m in rest if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls == [t.tool_call_id for t in tools] == ["c5"] and BODY in tools[0].content
    assert len(state) == 6 * 4  # the state: every message


def test_without_rules_the_model_reads_the_states_own_messages():
    model, agent = _agent("off")
    state = _run(agent, 3)
    system, *sent = model.seen[-1]
    assert system.content == "Be brief."  # LangChain's own system message, as it is
    assert [type(m) for m in sent] == [type(m) for m in state[:-1]]
    assert [m.content for m in sent] == [m.content for m in state[:-1]]


def test_the_view_leaves_the_list_given_alone():
    messages = [HumanMessage("hi"), AIMessage("hello")]
    before = [m.model_copy() for m in messages]
    assert view_messages(messages, "aggressive") == messages
    assert messages == before


@pytest.mark.parametrize(
    "how", ["invoke", "ainvoke", "stream", "astream"], ids=lambda h: f"agent.{h}"
)
def test_recorded_answers_replayed_with_the_state_given(how):
    """The agent with LangChain's OpenAI chat model against recorded answers (tool
    calls, then the answer; streamed as the server sent it for ``stream`` and
    ``astream``), its state holding earlier turns: every request carries the old
    results aged and each call with its result; the state keeps them whole."""
    pytest.importorskip("langchain_openai", reason="langchain-openai is not installed")
    from langchain_openai import ChatOpenAI

    streamed = how.endswith("stream")
    cassette = CHAT_STREAM if streamed else CHAT

    @tool
    def get_current_weather(location: str, unit: str = "fahrenheit") -> str:
        """Get the current weather in a given location."""
        return '{"temperature":"72","forecast":["sunny","windy"]}'

    given = {"messages": [*old_chat_turns(), {"role": "user", "content": "The weather?"}]}
    with Loopback() as server:
        server.reply(*replies(cassette))
        model = ChatOpenAI(
            model="gpt-4o",
            base_url=server.url + "/v1",
            api_key="k",
            max_retries=0,
            streaming=streamed,
            stream_usage=streamed,
        )
        agent = create_agent(
            model,
            tools=[get_current_weather],
            system_prompt="Be brief.",
            middleware=[CtxrulesMiddleware(AGING)],
        )

        async def drain(events):
            return [e async for e in events]

        if how == "invoke":
            state = agent.invoke(given)
        elif how == "ainvoke":
            state = asyncio.run(agent.ainvoke(given))
        elif how == "stream":
            state = list(agent.stream(given, stream_mode="values"))[-1]
        else:
            state = asyncio.run(drain(agent.astream(given, stream_mode="values")))[-1]
    assert state["messages"][-1].content == recorded_text(cassette)
    check_chat_requests(server.seen, streamed=streamed)
    kept = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
    assert old_outputs(kept) == (OLD_TURNS, 0)  # the state: whole
