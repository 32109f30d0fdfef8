"""``record`` takes a finished stream: the SDK's events as a list, the server-sent-event
text, or what ``StreamAccumulator`` collected — each recorded as the same answer node as
the whole response — and refuses a stream cut short with nothing stored."""

from __future__ import annotations

import json

import pytest

from ctxrules import dag
from ctxrules.engine import Engine, EngineConfig, StreamAccumulator
from ctxrules.errors import StreamError
from fake_vendors import anthropic_events, chat_chunks
from providers.conftest import CASSETTES, CORPUS_CASSETTES, load_cassette

from .conftest import QUIET

ANSWERS = {
    "anthropic": (CASSETTES["anthropic"][0], anthropic_events, "claude-sonnet-4-5"),
    "openai-chat": (CASSETTES["openai-chat"][0], chat_chunks, "gpt-4o"),
}


def _recorded(store, provider: str, response):
    engine = Engine(
        store, EngineConfig(provider=provider, model=ANSWERS[provider][2], sources=QUIET)
    )
    session = dag.create_session(store).id
    prep = engine.prepare(session, "hello", now=10.0)
    return engine, prep, engine.record(prep, response, now=11.0)


def _node(recorded):
    n = recorded.node
    return (n.output, n.name, n.metadata["usage"], n.metadata["stop_reason"], recorded.tool_calls)


@pytest.mark.parametrize("provider", list(ANSWERS))
def test_a_stream_is_recorded_as_the_whole_answer(store, provider):
    rel, to_events, _ = ANSWERS[provider]
    _, answer, _ = load_cassette(CORPUS_CASSETTES / rel, -1)
    events = to_events(answer)
    data = [d for _, d in events if not isinstance(d, str)]
    sse = "".join(
        (f"event: {n}\n" if n else "") + f"data: {d if isinstance(d, str) else json.dumps(d)}\n\n"
        for n, d in events
    )
    whole = _node(_recorded(store, provider, answer)[2])
    assert _node(_recorded(store, provider, data)[2]) == whole
    assert _node(_recorded(store, provider, sse)[2]) == whole
    acc = StreamAccumulator(provider).extend(data)
    assert _node(_recorded(store, provider, acc.response())[2]) == whole


def test_a_stream_cut_short_stores_nothing(store):
    rel, to_events, model = ANSWERS["anthropic"]
    _, answer, _ = load_cassette(CORPUS_CASSETTES / rel, -1)
    data = [d for _, d in to_events(answer)]
    engine = Engine(store, EngineConfig(model=model, sources=QUIET))
    session = dag.create_session(store).id
    prep = engine.prepare(session, "hello", now=10.0)
    before = [n.id for n in store.nodes(session)], store.get_session(session).head
    with pytest.raises(StreamError, match="message_stop"):
        engine.record(prep, data[:-1], now=11.0)
    with pytest.raises(StreamError, match="one 'message_start' event"):
        engine.record(prep, data[0], now=11.0)
    assert ([n.id for n in store.nodes(session)], store.get_session(session).head) == before


#: A recorded stream per wire (tests/data/corpus): a tool call, streamed as the vendor
#: sent it.  The Gemini one ends, as Gemini streams do, with a chunk holding only the
#: finish reason and an empty text part.
RECORDED_STREAMS = {
    "anthropic": "anthropic/chatlas__test_anthropic_tool_variations.yaml",
    "openai-chat": "openai-chat/magentic__test_prompt_chain.yaml",
    "openai-responses": "openai-responses/chatlas__test_tool_error_recorded.yaml",
    "gemini": "gemini/openinference__test_streaming_reasoning_with_multiple_tool_calls.yaml",
}


def _recorded_events(provider: str) -> list[dict]:
    """The first interaction's streamed answer, event by event (``[DONE]`` left out)."""
    import yaml

    doc = yaml.safe_load((CORPUS_CASSETTES / RECORDED_STREAMS[provider]).read_text())
    text = doc["interactions"][0]["response"]["body"]["string"]
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")
        )
        if data and data != "[DONE]":
            events.append(json.loads(data))
    return events


@pytest.mark.parametrize("provider", list(RECORDED_STREAMS))
def test_one_event_of_a_recorded_stream_is_refused_and_nothing_stored(store, provider):
    # Before: Gemini's last chunk alone ({"text": ""} and a finish reason) was recorded
    # as an empty answer without the stream's tool calls.
    events = _recorded_events(provider)
    engine = Engine(store, EngineConfig(provider=provider, sources=QUIET))
    session = dag.create_session(store).id
    prep = engine.prepare(session, "hello", now=10.0)
    before = [n.id for n in store.nodes(session)], store.get_session(session).head
    for i in sorted({0, len(events) // 2, len(events) - 1}):
        with pytest.raises(StreamError, match="stream"):
            engine.record(prep, events[i], now=11.0)
        assert ([n.id for n in store.nodes(session)], store.get_session(session).head) == before
    whole = engine.record(prep, events, now=11.0)
    assert whole.tool_calls  # the stream's answer: its calls
