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
