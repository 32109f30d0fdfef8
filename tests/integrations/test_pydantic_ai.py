"""The Pydantic AI v2 capability, run offline with the framework's ``FunctionModel``
(which sees exactly what the model would) and over the wire with ``OpenAIChatModel``
against a loopback server: the model gets the rules' view, the run's history keeps
every part, every tool call stays paired, and each request's usage is recorded beside
our estimate of it."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from ctxrules.integrations.pydantic_ai import CtxrulesCapability, to_chat_messages
from ctxrules.providers import get_provider
from fake_vendors import FINAL, USAGE, responder
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


def _agent(capability: CtxrulesCapability, seen: list) -> Agent:
    def model(messages, info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(
                parts=[TextPart("Read it.")], usage=RequestUsage(input_tokens=900, output_tokens=4)
            )
        n = len(seen)
        return ModelResponse(
            parts=[ToolCallPart("read", {"path": f"m{n}.py"}, tool_call_id=f"c{n}")],
            usage=RequestUsage(input_tokens=800, output_tokens=12),
        )

    agent = Agent(FunctionModel(model), instructions="Be brief.", capabilities=[capability])

    @agent.tool_plain
    def read(path: str) -> str:
        return f"# {path}\n{BODY}"

    return agent


def _runs(agent: Agent, n: int) -> list:
    history = None
    for i in range(n):
        history = agent.run_sync(f"Read module {i}.", message_history=history).all_messages()
    return history


def test_the_model_gets_the_rules_view_and_the_history_keeps_everything():
    seen: list = []
    capability = CtxrulesCapability(rules=AGING)
    history = _runs(_agent(capability, seen), 5)
    sent = seen[-1]
    returns = [p for m in sent for p in m.parts if isinstance(p, ToolReturnPart)]
    calls = [p for m in sent for p in m.parts if isinstance(p, ToolCallPart)]
    assert {r.tool_call_id for r in returns} == {c.tool_call_id for c in calls}
    assert len(str(returns[0].content)) < len(BODY) / 4  # an old return, aged
    assert all(  # the run's history: untouched
        BODY in p.content for m in history for p in m.parts if isinstance(p, ToolReturnPart)
    )
    chat, _ = to_chat_messages(sent)  # what was sent is a request the vendor accepts
    assert get_provider("openai-chat").validate({"model": "m", "messages": chat}) == []


def test_a_long_past_goes_as_one_summary_and_the_current_turn_whole():
    seen: list = []
    history = _runs(_agent(CtxrulesCapability(rules=FOLDING), seen), 6)
    sent = seen[-1]
    prompts = [p for m in sent for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts[0].content == "Read module 0."  # the task
    summaries = [p for p in prompts if str(p.content).startswith("Summary of earlier")]
    assert len(summaries) == 1
    returns = [p for m in sent for p in m.parts if isinstance(p, ToolReturnPart)]
    calls = [p for m in sent for p in m.parts if isinstance(p, ToolCallPart)]
    assert [c.tool_call_id for c in calls] == [r.tool_call_id for r in returns] == ["c11"]
    assert BODY in returns[0].content
    assert sum(isinstance(p, ToolReturnPart) for m in history for p in m.parts) == 6


def test_without_rules_the_request_is_the_agents_own():
    seen: list = []
    plain: list = []
    _runs(_agent(CtxrulesCapability(rules="off"), seen), 3)
    _runs(_agent(CtxrulesCapability(rules="off"), plain), 3)
    assert [[type(p).__name__ for p in m.parts] for m in seen[-1]] == [
        [type(p).__name__ for p in m.parts] for m in plain[-1]
    ]
    returns = [p for m in seen[-1] for p in m.parts if isinstance(p, ToolReturnPart)]
    assert all(BODY in p.content for p in returns)


def test_each_requests_usage_is_recorded_beside_our_estimate():
    seen: list = []
    capability = CtxrulesCapability(rules="default")
    _runs(_agent(capability, seen), 2)
    assert [m.input_tokens for m in capability.measurements] == [800, 900, 800, 900]
    assert all(m.estimate > 0 for m in capability.measurements)
    usage = capability.usage
    assert usage is not None and usage.basis == "measured" and usage.total_used == 900


def test_over_the_wire_with_the_openai_chat_model():
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    capability = CtxrulesCapability(rules="aggressive")
    with Loopback() as server:
        server.responder = responder
        model = OpenAIChatModel(
            "gpt-4o", provider=OpenAIProvider(base_url=server.url + "/v1", api_key="k")
        )
        agent = Agent(model, instructions="Be brief.", capabilities=[capability])

        @agent.tool_plain
        def ls(path: str) -> str:
            return "a.py\nb.py"

        result = agent.run_sync("What is in the directory?")
    assert result.output == FINAL
    for seen in server.seen:
        assert get_provider("openai-chat").validate(seen.body) == []
    assert [m.input_tokens for m in capability.measurements] == [USAGE["prompt"]] * 2


def _old_history() -> list:
    """The earlier turns as Pydantic AI messages (``replay.old_chat_turns``)."""
    out: list = []
    turns = old_chat_turns()
    for i in range(0, len(turns), 4):
        user, call, result, answer = turns[i : i + 4]
        tc = call["tool_calls"][0]
        out.append(ModelRequest(parts=[UserPromptPart(user["content"])]))
        out.append(
            ModelResponse(
                parts=[ToolCallPart("read", tc["function"]["arguments"], tool_call_id=tc["id"])]
            )
        )
        out.append(
            ModelRequest(parts=[ToolReturnPart("read", result["content"], tool_call_id=tc["id"])])
        )
        out.append(ModelResponse(parts=[TextPart(answer["content"])]))
    return out


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_stream"])
def test_recorded_answers_replayed_with_the_history_given(streamed):
    """The agent over the OpenAI Chat wire against recorded answers (tool calls, then
    the answer; streamed as the server sent it), with earlier turns as its
    ``message_history``: every request carries the old results aged and each call with
    its result, the run's messages keep them whole, and each request's usage is
    recorded."""
    import asyncio

    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    cassette = CHAT_STREAM if streamed else CHAT
    capability = CtxrulesCapability(rules=AGING)
    with Loopback() as server:
        server.reply(*replies(cassette))
        model = OpenAIChatModel(
            "gpt-4o", provider=OpenAIProvider(base_url=server.url + "/v1", api_key="k")
        )
        agent = Agent(model, instructions="Be brief.", capabilities=[capability])

        @agent.tool_plain
        def get_current_weather(location: str, unit: str = "fahrenheit") -> str:
            return '{"temperature":"72","forecast":["sunny","windy"]}'

        async def main():
            if not streamed:
                result = await agent.run("The weather?", message_history=_old_history())
                return result.output, result.all_messages()
            async with agent.run_stream("The weather?", message_history=_old_history()) as run:
                output = await run.get_output()
            return output, run.all_messages()

        output, messages = asyncio.run(main())
    assert output == recorded_text(cassette)
    check_chat_requests(server.seen, streamed=streamed)
    returns = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert old_outputs(returns) == (OLD_TURNS, 0)  # the run's history: whole
    assert len(capability.measurements) == 2
    assert all(m.input_tokens > 0 and m.estimate > 0 for m in capability.measurements)
