"""The OpenAI Agents SDK adapter, run offline with the SDK's own ``ScriptedModel`` and,
for the wire, its ``OpenAIResponsesModel`` against a loopback server: the session
returns exactly what the SDK's own ``SQLiteSession`` returns for the same run (the
oracle), pops and clears as branches (nothing is deleted), and the input filter sends
the rules' view while the history keeps every item."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

agents = pytest.importorskip("agents")

from agents import (  # noqa: E402
    Agent,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402

from ctxrules.engine import Engine, EngineConfig  # noqa: E402
from ctxrules.integrations.openai_agents import CtxrulesSession, shaped_input  # noqa: E402
from fake_vendors import responder  # noqa: E402
from integrations.conftest import AGING, FOLDING  # noqa: E402
from integrations.replay import (  # noqa: E402
    OLD_TURNS,
    RESPONSES,
    RESPONSES_STREAM,
    old_outputs,
    old_response_items,
    recorded_text,
    replies,
)
from loopback import Loopback  # noqa: E402

set_tracing_disabled(True)

BODY = "".join(f"def f{j}(x):\n    return x * {j}\n" for j in range(60))


@function_tool
def read(path: str) -> str:
    """Read a file."""
    return f"# {path}\n{BODY}"


def _model(turns: int) -> ScriptedModel:
    steps = []
    for i in range(turns):
        steps.append(
            ModelStep(output=[function_call("read", {"path": f"m{i}.py"}, call_id=f"c{i}")])
        )
        steps.append(ModelStep(output=[assistant_message(f"Module {i} defines sixty functions.")]))
    return ScriptedModel(steps)


async def _run(session, turns: int, run_config=None) -> ScriptedModel:
    model = _model(turns)
    agent = Agent(name="reader", instructions="Be brief.", model=model, tools=[read])
    for i in range(turns):
        await Runner.run(agent, f"Read m{i}.py.", session=session, run_config=run_config)
    return model


def test_the_session_holds_what_the_sdks_own_session_holds(store):
    ours, theirs = CtxrulesSession(store), SQLiteSession("oracle")

    async def main():
        await _run(ours, 3)
        await _run(theirs, 3)
        assert await ours.get_items() == await theirs.get_items()
        assert await ours.get_items(limit=4) == await theirs.get_items(limit=4)
        for _ in range(3):  # a message, a tool output, a call: each as the oracle pops it
            assert await ours.pop_item() == await theirs.pop_item()
            assert await ours.get_items() == await theirs.get_items()

    asyncio.run(main())
    nodes = store.nodes(ours.session_id)
    roles = [n.role for n in nodes]
    assert roles.count("tool") >= 3 and roles.count("assistant") >= 6  # nothing deleted
    # The graph is a session like any other: stats reads it.
    stats = Engine(store, EngineConfig(provider="openai-responses", model="gpt-4o")).stats(
        ours.session_id, now=10.0
    )
    assert stats.usage.total_used > 0


def test_clear_starts_a_new_branch_and_keeps_the_old(store):
    session = CtxrulesSession(store)

    async def main():
        await _run(session, 2)
        before = len(store.nodes(session.session_id))
        await session.clear_session()
        assert await session.get_items() == []
        assert len(store.nodes(session.session_id)) == before + 1  # the new root only
        await _run(session, 1)
        items = await session.get_items()
        assert [i.get("type", "message") for i in items][:1] == ["message"]
        assert "Read m0.py." in json.dumps(items) and len(items) == 4

    asyncio.run(main())


def test_the_filter_sends_the_rules_view_and_the_history_keeps_everything(store):
    session = CtxrulesSession(store)

    async def main():
        return await _run(session, 6, RunConfig(call_model_input_filter=shaped_input(AGING)))

    model = asyncio.run(main())
    sent = model.calls[-1].input
    outputs = [i for i in sent if i.get("type") == "function_call_output"]
    calls = [i for i in sent if i.get("type") == "function_call"]
    assert {o["call_id"] for o in outputs} == {c["call_id"] for c in calls}  # all paired
    assert len(outputs[0]["output"]) < len(BODY) / 4  # an old output, aged
    assert BODY in outputs[-1]["output"]  # the current turn's, whole
    kept = [i for i in asyncio.run(session.get_items()) if i.get("type") == "function_call_output"]
    assert all(BODY in o["output"] for o in kept)  # the session's history is untouched


def test_a_long_past_goes_as_one_summary_and_the_current_turn_whole(store):
    session = CtxrulesSession(store)

    async def main():
        return await _run(session, 6, RunConfig(call_model_input_filter=shaped_input(FOLDING)))

    sent = asyncio.run(main()).calls[-1].input
    summaries = [i for i in sent if str(i.get("content", "")).startswith("Summary of earlier")]
    assert len(summaries) == 1 and summaries[0]["role"] == "user"
    assert "m0.py" in summaries[0]["content"] and "m4.py" in summaries[0]["content"]
    assert sent[0] == {"content": "Read m0.py.", "role": "user"}  # the task, kept
    calls = [i["call_id"] for i in sent if i.get("type") == "function_call"]
    outputs = [i for i in sent if i.get("type") == "function_call_output"]
    assert calls == [o["call_id"] for o in outputs] == ["c5"]  # paired, the current turn's
    assert BODY in outputs[0]["output"]
    assert len(asyncio.run(session.get_items())) == 6 * 4  # the session: every item


def test_the_responses_wire_through_a_loopback_server(store):
    openai = pytest.importorskip("openai")
    session = CtxrulesSession(store)
    with Loopback() as server:
        server.responder = responder
        client = openai.AsyncOpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        agent = Agent(
            name="reader",
            instructions="Be brief.",
            model=OpenAIResponsesModel(model="gpt-4o", openai_client=client),
            tools=[function_tool(lambda path: "a.py\nb.py", name_override="ls")],
        )
        result = asyncio.run(
            Runner.run(
                agent,
                "What is in the directory?",
                session=session,
                run_config=RunConfig(call_model_input_filter=shaped_input()),
            )
        )
    assert result.final_output.startswith("There are two files")
    _, second = (s.body for s in server.seen)
    assert second["input"][-1]["type"] == "function_call_output"
    assert "a.py" in second["input"][-1]["output"]
    items = asyncio.run(session.get_items())
    assert [i.get("type", "message") for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_recorded_answers_replayed_the_session_kept_and_old_outputs_aged(store, streamed):
    """The runner over the Responses wire against recorded answers (a tool call, then
    the answer; streamed as the server sent it), on a session holding earlier turns:
    every request carries the old outputs aged and each call with its output, the
    session keeps every item whole, and a second ``CtxrulesSession`` on the same ctxrules
    session reads it back."""
    openai = pytest.importorskip("openai")

    def get_weather(location: str) -> str:
        return "The weather in San Francisco is sunny and 72°F"

    def fail_tool() -> str:
        return "Tool call failed with error: 'intentional test error'"

    cassette, fn = (RESPONSES_STREAM, fail_tool) if streamed else (RESPONSES, get_weather)
    session = CtxrulesSession(store)
    asyncio.run(session.add_items(old_response_items()))
    with Loopback() as server:
        server.reply(*replies(cassette))
        client = openai.AsyncOpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        agent = Agent(
            name="weather",
            instructions="Use the tool.",
            model=OpenAIResponsesModel(model="gpt-4o-mini", openai_client=client),
            tools=[function_tool(fn)],
        )
        config = RunConfig(call_model_input_filter=shaped_input(AGING))

        async def main():
            if not streamed:
                return await Runner.run(agent, "The weather?", session=session, run_config=config)
            result = Runner.run_streamed(agent, "The weather?", session=session, run_config=config)
            async for _ in result.stream_events():
                pass
            return result

        result = asyncio.run(main())
    assert result.final_output == recorded_text(cassette)
    assert [s.body.get("stream", False) for s in server.seen] == [streamed, streamed]
    for seen in server.seen:
        items = seen.body["input"]
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
        assert calls == [o["call_id"] for o in outputs]  # every call with its output
        assert old_outputs([o["output"] for o in outputs]) == (0, OLD_TURNS)  # aged
    kept = asyncio.run(CtxrulesSession(store, session.session_id).get_items())
    assert len(kept) == 4 * OLD_TURNS + 4  # + the question, the call, its output, the answer
    assert old_outputs([i["output"] for i in kept if "output" in i]) == (OLD_TURNS, 0)


def test_many_sessions_of_one_store_from_one_event_loop(any_store):
    """Eight agents, each on its own session of one store, run side by side: each
    session holds exactly what the SDK's own session holds for the same run."""
    ours = [CtxrulesSession(any_store) for _ in range(8)]
    theirs = SQLiteSession("oracle-many")

    async def main():
        await asyncio.gather(*(_run(s, 2) for s in ours))
        await _run(theirs, 2)
        expected = await theirs.get_items()
        for s in ours:
            assert await s.get_items() == expected

    asyncio.run(main())


def test_calls_on_one_session_take_turns(store):
    session, again = CtxrulesSession(store), None

    async def main():
        nonlocal again
        again = CtxrulesSession(store, session.session_id)  # another object, one session
        await asyncio.gather(
            *(
                (session if i % 2 else again).add_items([{"role": "user", "content": f"m{i}"}])
                for i in range(20)
            )
        )
        return await session.get_items()

    items = asyncio.run(main())
    assert sorted(i["content"] for i in items) == sorted(f"m{i}" for i in range(20))
    nodes = store.nodes(session.session_id)
    assert all(b.predecessor == a.id for a, b in itertools.pairwise(nodes))  # one chain


def test_the_event_loop_is_not_blocked(store):
    """The store's work runs off the event loop: a store call held until the loop
    releases it finishes (it would wait forever, and the test time out, on the loop)."""
    import threading

    gate = threading.Event()
    waited: list[bool] = []

    class Held:
        def __getattr__(self, name):
            attr = getattr(store, name)
            if name != "append":
                return attr

            def held(*args, **kwargs):
                waited.append(gate.wait(timeout=10))
                return attr(*args, **kwargs)

            return held

    session = CtxrulesSession(Held())  # type: ignore[arg-type]

    async def main():
        task = asyncio.create_task(session.add_items([{"role": "user", "content": "hi"}]))
        await asyncio.sleep(0.01)
        gate.set()  # runs only if add_items left the loop free
        await task
        return await session.get_items()

    assert asyncio.run(main()) == [{"role": "user", "content": "hi"}]
    assert waited == [True]


def test_the_session_remembers_its_setup_and_every_command_reads_it(tmp_path, capsys):
    """``ctxrules stats`` on an Agents SDK session measured it as an Anthropic session
    of 200,000 tokens: the session remembers its provider, and through the filter the
    agent's model, instructions and function tools."""
    from ctxrules.cli import main
    from ctxrules.providers import resolve_model
    from ctxrules.render import recorded_request
    from ctxrules.store import open_store

    openai = pytest.importorskip("openai")
    location = str(tmp_path / "store")
    store = open_store(location, create=True)
    bare = CtxrulesSession(store)  # no filter: the provider alone
    session = CtxrulesSession(store)

    def get_weather(location: str) -> str:
        """Get the weather for a location."""
        return "The weather in San Francisco is sunny and 72°F"

    with Loopback() as server:
        server.reply(*replies(RESPONSES))
        client = openai.AsyncOpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        agent = Agent(
            name="weather",
            instructions="Use the tool.",
            model=OpenAIResponsesModel(model="gpt-4o-mini", openai_client=client),
            tools=[function_tool(get_weather)],
        )
        config = RunConfig(call_model_input_filter=shaped_input(session=session))
        asyncio.run(Runner.run(agent, "The weather?", session=session, run_config=config))
    rec = recorded_request(store.get_session(session.session_id).metadata)
    assert (rec.provider, rec.model, rec.system) == (
        "openai-responses",
        "gpt-4o-mini",
        "Use the tool.",
    )
    assert [t.name for t in rec.tools or ()] == ["get_weather"]
    assert recorded_request(store.get_session(bare.session_id).metadata).provider == (
        "openai-responses"
    )
    store.close()
    assert main(["stats", session.session_id, "--store", location, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["provider"], out["model"]) == ("openai-responses", "gpt-4o-mini")
    assert out["usage"]["window"] == resolve_model("openai:gpt-4o-mini").context_window
