"""The async twins: many sessions of one store served concurrently from one event loop,
calls on one session taking turns, the loop never blocked, and the documented async
loops with the official async SDK clients (plain and streaming) against a loopback
server."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading

import msgspec
import pytest

from ctxrules import dag
from ctxrules.compaction import CompactOptions
from ctxrules.engine import Engine, EngineConfig, ToolResult
from ctxrules.errors import PromptTooLongError
from ctxrules.importers import import_paths
from ctxrules.store import open_store
from fake_vendors import anthropic_events
from loopback import Loopback, Reply

from .conftest import QUIET

SESSIONS = 40


def _answer(sid: str, turn: int, *, call: bool) -> dict:
    content: list[dict] = [{"type": "text", "text": f"answer {turn} of {sid}"}]
    if call:
        content.append({"type": "tool_use", "id": f"c{turn}", "name": "ls", "input": {}})
    return {
        "id": f"msg_{sid}_{turn}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "usage": {"input_tokens": 100 + turn, "output_tokens": 5},
    }


async def _agent(engine: Engine, sid: str) -> None:
    prep = await engine.aprepare(sid, f"task of {sid}", now=10.0)
    for turn in range(3):
        assert f"task of {sid}" in json.dumps(prep.body)
        done = await engine.arecord(prep, _answer(sid, turn, call=turn < 2), now=11.0 + turn)
        await asyncio.sleep(0)  # let the other sessions interleave
        if not done.tool_calls:
            break
        results = [ToolResult(c.id, f"result {turn} of {sid}") for c in done.tool_calls]
        prep = await engine.aprepare(sid, tool_results=results, now=11.5 + turn)


@pytest.fixture(params=["sqlite", "postgresql", "memory"])
def any_store(request, tmp_path, store):
    """A store of each backend: SQLite, PostgreSQL (the run's own server), memory."""
    if request.param == "memory":
        yield store
        return
    if request.param == "sqlite":
        location = str(tmp_path / "store")
    else:
        server = request.getfixturevalue("pg_server")
        location = server.new_store()
    st = open_store(location, create=True)
    yield st
    st.close()
    if request.param == "postgresql":
        server.drop_store(location)


def test_many_sessions_of_one_store_concurrently(any_store):
    st = any_store
    engine = Engine(st, EngineConfig(model="claude-sonnet-4-5", sources=QUIET))
    sids = [dag.create_session(st).id for _ in range(SESSIONS)]

    async def main() -> None:
        await asyncio.gather(*(_agent(engine, sid) for sid in sids))

    asyncio.run(main())
    for sid in sids:
        nodes = st.nodes(sid)
        # user, 3 answers, 2 tool results: each session holds exactly its own turns
        assert [n.role for n in nodes].count("assistant") == 3
        texts = msgspec.json.encode([n.output for n in nodes]).decode()
        assert texts.count(f"of {sid}") == 6 and "of s_" not in texts.replace(f"of {sid}", "")
        head = st.get_node(st.get_session(sid).head)
        assert head.output[0].text == f"answer 2 of {sid}"
        stats = engine.stats(sid, now=20.0)
        assert stats.usage.basis == "measured" and stats.usage.total_used == 102


def test_calls_on_one_session_take_turns(store):
    engine = Engine(store, EngineConfig(model="claude-sonnet-4-5", sources=QUIET))
    sid = dag.create_session(store).id

    async def main() -> list:
        return await asyncio.gather(
            *(engine.aprepare(sid, f"message {i}", now=10.0 + i) for i in range(20))
        )

    preps = asyncio.run(main())
    nodes = store.nodes(sid)
    assert len(nodes) == 20
    # one chain: each message after the one before it, none lost or forked
    for before, after in itertools.pairwise(nodes):
        assert after.predecessor == before.id
    # each request carries every message appended before its own
    for prep in preps:
        position = next(i for i, n in enumerate(nodes) if n.id == prep.head)
        assert len(prep.body["messages"]) >= 1 and prep.head == nodes[position].id


def test_the_event_loop_is_not_blocked(store):
    engine = Engine(store, EngineConfig(model="claude-sonnet-4-5", sources=QUIET))
    sid = dag.create_session(store).id
    gate = threading.Event()
    real = engine.prepare
    waited: list[bool] = []

    def held(*args, **kwargs):
        waited.append(gate.wait(timeout=30))  # released by the loop, if the loop runs
        return real(*args, **kwargs)

    engine.prepare = held  # type: ignore[method-assign]

    async def main():
        task = asyncio.create_task(engine.aprepare(sid, "hello", now=10.0))
        await asyncio.sleep(0.01)
        gate.set()  # runs only if aprepare left the loop free
        return await task

    prep = asyncio.run(main())
    assert waited == [True] and prep.head == store.get_session(sid).head


def test_the_async_loop_with_the_async_sdk(store):
    anthropic = pytest.importorskip("anthropic")
    engine = Engine(store, EngineConfig(model="claude-sonnet-4-5", sources=QUIET))
    sid = dag.create_session(store).id
    streamed = _answer(sid, 1, call=False)

    async def main(url: str) -> None:
        client = anthropic.AsyncAnthropic(api_key="k", base_url=url, max_retries=0)
        prep = await engine.aprepare(sid, "list the files", now=10.0)
        response = await client.messages.create(**prep.body)
        done = await engine.arecord(prep, response, now=11.0)
        results = [ToolResult(c.id, "a.py") for c in done.tool_calls]
        prep = await engine.aprepare(sid, tool_results=results, now=12.0)
        async with client.messages.stream(**prep.body) as stream:
            events = [event async for event in stream]
        await engine.arecord(prep, events, now=13.0)

    with Loopback() as server:
        server.reply(_answer(sid, 0, call=True), Reply(events=anthropic_events(streamed)))
        asyncio.run(main(server.url))
        first, second = (s.body for s in server.seen)
    assert first["messages"][-1]["content"][0]["text"] == "list the files"
    assert second["messages"][-1]["content"][0]["tool_use_id"] == "c0"
    head = store.get_node(store.get_session(sid).head)
    assert head.output[0].text == f"answer 1 of {sid}"


def test_async_compaction_and_retry(store, corpus):
    cc = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    (res,) = import_paths(store, [str(corpus / cc)])
    other = dag.fork(store, res.id, store.get_session(res.id).head).id
    options = CompactOptions(summarizer="extractive", timeout_seconds=0)
    engine = Engine(
        store, EngineConfig(model="claude-sonnet-4-5", sources=QUIET, compaction=options)
    )
    now = 1_767_225_600.0

    async def main():
        prep = await engine.aprepare(res.id, "Go on.", now=now)
        retry = await engine.aretry_after_error(prep, PromptTooLongError("too long"), now=now + 1)
        with pytest.raises(ValueError):
            await engine.aretry_after_error(prep, ValueError("other"), now=now + 2)
        manual = await engine.acompact(other, now=now + 3, instructions="keep the file names")
        stats = await engine.astats(res.id, now=now + 4)
        return prep, retry, manual, stats

    _, retry, manual, stats = asyncio.run(main())
    assert retry.attempt == 1 and retry.compaction.record.trigger == "reactive"
    assert manual.record.trigger == "manual"
    assert manual.record.instructions == "keep the file names"
    assert [b["trigger"] for b in stats.boundaries] == ["reactive"]
