"""Traffic as a graph (``importers.traffic``): requests that extend one another continue
one session, a divergence branches at its point and copies nothing, a session header
groups, and a streamed answer (read back from its events) is the very message the
next request sends back."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from ctxrules.importers import import_paths
from ctxrules.importers._streams import decode_body, read_response
from ctxrules.importers.traffic import TrafficGraph, cassette_exchanges, exchange_of

STREAMED = [
    "vcr-cassettes-yaml/anthropic/chatlas__test_anthropic_tool_variations.yaml",
    "vcr-cassettes-yaml/openai-chat/chatlas__test_openai_tool_variations.yaml",
    "vcr-cassettes-yaml/gemini/chatlas__test_tools_simple.yaml",
]
#: A client that sends a Responses function call back under its item id (``fc_…``)
#: instead of the ``call_id`` it was given: what was sent differs, so it branches.
REWRITTEN_IDS = "vcr-cassettes-yaml/openai-responses/chatlas__test_openai_tool_variations.yaml"


def call(messages, answer="ok", headers=None, status=200):
    body = {"model": "gpt-x", "messages": messages}
    resp = {
        "id": "c1",
        "model": "gpt-x",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
    return exchange_of(
        "/v1/chat/completions",
        json.dumps(body).encode(),
        headers or {},
        status,
        json.dumps(resp).encode(),
        {"content-type": "application/json"},
    )


def u(text):
    return {"role": "user", "content": text}


def a(text):
    return {"role": "assistant", "content": text}


def test_a_continuation_extends_the_session_and_a_divergence_branches_without_copies():
    g = TrafficGraph()
    first = g.plan(call([u("plan the trip")], "day one"))
    second = g.plan(call([u("plan the trip"), a("day one"), u("and day two?")], "day two"))
    retry = g.plan(call([u("plan the trip"), a("day one"), u("and day two?")], "day two, again"))
    edit = g.plan(call([u("plan the trip"), a("day one"), u("what about day three?")], "day three"))
    assert first.created and not (second.created or retry.created or edit.created)
    assert len({s.session_id for s in (first, second, retry, edit)}) == 1
    assert [n.role for n in first.nodes] == ["user", "assistant"]
    # The continuation adds its new message and the answer; the prefix is found stored.
    assert [n.role for n in second.nodes] == ["user", "assistant"]
    assert second.nodes[0].predecessor == first.answer
    # A retry adds only its new answer, a sibling of the first one.
    assert [n.role for n in retry.nodes] == ["assistant"]
    assert retry.nodes[0].predecessor == second.nodes[0].id != retry.answer
    # An edited message branches at the answer before it.
    assert [n.role for n in edit.nodes] == ["user", "assistant"]
    assert edit.nodes[0].predecessor == first.answer
    assert edit.head == edit.answer and edit.nodes[1].metadata["usage"]["prompt_tokens"] == 5


def test_cache_marks_and_string_or_block_content_name_the_same_node():
    g = TrafficGraph()
    plain = g.plan(call([u("hi")], "hello"))
    marked = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        u("next"),
    ]
    step = g.plan(call(marked, "fine"))
    assert step.session_id == plain.session_id
    assert [n.role for n in step.nodes] == ["user", "assistant"]
    assert step.nodes[0].predecessor == plain.answer


def test_a_session_header_groups_conversations_and_a_new_opening_without_one_is_a_new_session():
    g = TrafficGraph()
    h = {"x-claude-code-session-id": "c0ffee"}
    main = g.plan(call([u("fix the bug")], headers=h))
    side = g.plan(call([u("write a title for: fix the bug")], headers=h))
    other = g.plan(call([u("fix the bug")]))
    unrelated = g.plan(call([u("something else")]))
    assert main.session_id == side.session_id and side.nodes[0].predecessor is None
    assert len({main.session_id, other.session_id, unrelated.session_id}) == 3


def test_a_failed_call_records_its_request_and_no_answer():
    g = TrafficGraph()
    step = g.plan(call([u("hi")], status=529))
    assert step.error == "HTTP 529" and step.answer is None
    assert [n.role for n in step.nodes] == ["user"] and step.head == step.nodes[0].id


@pytest.mark.parametrize("cassette", STREAMED, ids=lambda c: c.split("/")[1])
def test_a_streamed_answer_is_the_message_the_next_request_sends_back(cassette, corpus, store):
    """Every request of these cassettes sends back the earlier answers of its
    conversation (text, tool calls with their JSON input, signatures).  Read as
    traffic, each conversation is a session of one branch ending at its last answer —
    so every answer read from its stream equals what the agent sent back, or the
    session would branch there."""
    calls = cassette_exchanges(str(corpus / cassette))
    assert calls and all(ex.response.streamed and ex.response.complete for _, ex in calls)
    results = import_paths(store, [str(corpus / cassette)], format="traffic")
    answers = 0
    for result in results:
        conversation = [n for n in store.nodes(result.id) if n.caller is None]
        heads = {n.id for n in conversation} - {n.predecessor for n in conversation}
        assert len(heads) == 1, result.id  # one branch
        answered = [n for n in conversation if "usage" in n.metadata]
        assert store.get_session(result.id).head == answered[-1].id == next(iter(heads))
        answers += len(answered)
    assert answers == len(calls)


def test_a_call_sent_back_under_another_id_is_a_branch_at_that_call(corpus, store):
    calls = cassette_exchanges(str(corpus / REWRITTEN_IDS))
    assert all(ex.response.streamed and ex.response.complete for _, ex in calls)
    branched = 0
    for result in import_paths(store, [str(corpus / REWRITTEN_IDS)], format="traffic"):
        nodes = store.nodes(result.id)
        conversation = [n for n in nodes if n.caller is None]
        for parent in {n.predecessor for n in conversation}:
            twins = [n for n in conversation if n.predecessor == parent]
            if len(twins) < 2:
                continue
            branched += 1
            # The answer as received and as sent back: the same call but for its id.
            answer, echo = sorted(twins, key=lambda n: "usage" not in n.metadata)
            got, sent = answer.output, echo.output
            assert [(b.name, b.input) for b in got] == [(b.name, b.input) for b in sent]
            assert all(b.id.startswith("call_") for b in got)
            assert all(b.id.startswith("fc_") for b in sent)
    assert branched >= 1


def test_bodies_are_decoded_as_they_travel():
    raw = b'{"a": 1}'
    assert decode_body(gzip.compress(raw), "gzip") == raw
    assert decode_body(zlib.compress(raw), "deflate") == raw
    assert decode_body(zlib.compress(raw)[2:-4], "deflate") == raw  # raw deflate
    assert decode_body(b"garbage", "gzip") is None
    assert decode_body(raw, "br-from-the-future") is None
    read = read_response(
        "openai-chat",
        gzip.compress(b'{"id": "x", "choices": []}'),
        content_type="application/json",
        encoding="gzip",
    )
    assert read.body == {"id": "x", "choices": []} and read.complete and not read.streamed


def test_stream_events_assemble_like_the_sdks_do():
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "role": "assistant",
                "content": [],
                "usage": {"input_tokens": 7, "output_tokens": 1, "cache_read_input_tokens": 3},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "let me "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "see"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "SIG"},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"pa'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": 'th": "/"}'},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 20},
        },
        {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 25}},
        {"type": "message_stop"},
    ]
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    read = read_response("anthropic", raw, content_type="text/event-stream")
    assert read.streamed and read.complete and read.error is None
    assert read.body["content"] == [
        {"type": "thinking", "thinking": "let me see", "signature": "SIG"},
        {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "/"}},
    ]
    # Cumulative counts are assigned, never added; message_start's other counts stay.
    assert read.body["usage"] == {
        "input_tokens": 7,
        "output_tokens": 25,
        "cache_read_input_tokens": 3,
    }
    assert read.body["stop_reason"] == "tool_use"
    cut = read_response(
        "anthropic", raw[: raw.index(b"event: message_delta")], content_type="text/event-stream"
    )
    assert not cut.complete
