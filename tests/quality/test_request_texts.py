"""``RequestTexts``: a replay's requests read in order, each from the one before, give
``request_text`` of every body, and split only what a body adds to the previous one —
on the corpus's requests for every provider, on random sequences of bodies (entries
changed, cache markers moved, other layouts, keys repeated), and inside
``session_recalls``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.quality.test_needed import node
from tests.quality.test_text_memo import PROVIDERS, _unmemoized, corpus_bodies  # noqa: F401

from ctxrules.quality import text as text_module
from ctxrules.quality.needed import session_recall, session_recalls
from ctxrules.quality.text import RequestTexts


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_request_of_the_corpus_is_read_from_the_one_before(
    corpus_bodies: Any,  # noqa: F811
    provider: str,
):
    split = total = resumed = requests = 0
    for session in corpus_bodies[provider]:
        reader = RequestTexts()
        for rendered in session:
            assert reader.text(rendered.body) == _unmemoized(rendered.body)
            total += len(rendered.body)
        split += reader.bytes_split
        resumed += reader.resumed
        requests += len(session)
    sessions = len(corpus_bodies[provider])
    # Nearly every request after a session's first is read from its previous one (not
    # one whose first message changed: a compaction's summary) ...
    assert resumed >= 0.95 * (requests - sessions)
    # ... so most of the bytes are never split again (Gemini sends its tool declarations
    # after the conversation: those are split each time).
    assert split < total * 0.6


def _message(i: int, text: str) -> dict[str, Any]:
    return {"role": "user" if i % 2 else "assistant", "content": [{"type": "text", "text": text}]}


_texts = st.text(alphabet='ab {}[]",:\\\n', max_size=8)
_steps = st.lists(
    st.tuples(
        _texts,  # the new message
        st.sampled_from(["append", "rewrite", "marker", "spaced", "repeat", "tools", "list"]),
        st.integers(min_value=0, max_value=50),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(_steps)
def test_a_random_sequence_of_bodies_reads_as_each_body_alone(steps: list[Any]):
    reader = RequestTexts()
    messages: list[dict[str, Any]] = []
    for i, (text, how, at) in enumerate(steps):
        messages.append(_message(i, text))
        shown = [dict(m) for m in messages]
        if how == "rewrite":
            shown[at % len(shown)] = _message(at, "rewritten " + text)
        if how == "marker":  # a cache marker on the last message (moves every request)
            shown[-1]["cache_control"] = {"type": "ephemeral"}
        fields: dict[str, Any] = {"model": "m", "system": "be brief", "messages": shown}
        if how == "tools":
            fields["tools"] = [{"name": "Read", "description": text}]
        if how == "list":  # a second list after the messages
            fields["input"] = [text, {"text": text}]
        body = json.dumps(fields, separators=(",", ":")).encode()
        if how == "spaced":
            body = json.dumps(fields).encode()
        if how == "repeat":  # a key written twice: the last value counts, at the first place
            body = body[:-1] + b',"system":' + json.dumps(text).encode() + b"}"
        assert reader.text(body) == _unmemoized(body)


def test_a_key_the_previous_body_had_before_the_resume_place_is_read_whole():
    reader = RequestTexts()
    first = b'{"system":"one","messages":[{"text":"a"},{"text":"b"}]}'
    second = b'{"system":"one","messages":[{"text":"a"},{"text":"c"}],"system":"two"}'
    assert reader.text(first) == "one a b"
    assert reader.text(second) == _unmemoized(second) == "two a c"
    assert reader.resumed == 0


def test_a_body_that_is_not_an_object_is_read_whole_and_forgets_the_previous():
    reader = RequestTexts()
    assert reader.text(b'{"messages":[{"text":"a"}]}') == "a"
    assert reader.text(b'["x", {"text": "y"}]') == "x y"
    assert reader.text(b'{"messages":[{"text":"a"},{"text":"b"}]}') == "a b"
    assert reader.resumed == 0


def test_session_recalls_splits_each_body_only_where_it_differs(monkeypatch: pytest.MonkeyPatch):
    # A session of 30 answers, each request the one before plus the latest messages.
    branch = []
    for i in range(30):
        branch.append(node("user", f"check lib/mod_{i}.py and run_{i}()", id=f"u{i}"))
        branch.append(node("assistant", f"lib/mod_{i}.py calls run_{i}()", id=f"a{i}"))
    bodies: dict[str, bytes] = {}
    messages: list[dict[str, Any]] = []
    for n in branch:
        if n.role == "assistant":
            shown = [*messages[:-1], {**messages[-1], "cache_control": {"type": "ephemeral"}}]
            body = {"model": "m", "messages": shown, "max_tokens": 9}
            bodies[n.id] = json.dumps(body, separators=(",", ":")).encode()
        messages.append({"role": n.role, "content": n.output})
    split: list[int] = []
    fields = text_module._FIELDS

    class Counting:
        def decode(self, data: bytes) -> Any:
            split.append(len(data))
            return fields.decode(data)

    monkeypatch.setattr(text_module, "_FIELDS", Counting())
    report = session_recalls("s", branch, [bodies])[0]
    # Each body split once, from where it differs from the one before (the message that
    # lost its cache marker): a few messages a request, not the whole body every time.
    assert len(split) == len(bodies)
    assert max(split[1:]) < 2 * split[1] < len(bodies["a29"]) / 4
    assert sum(split) < sum(len(b) for b in bodies.values()) / 4
    monkeypatch.setattr(text_module, "_FIELDS", fields)
    assert report == session_recall("s", branch, bodies)
    assert report.needed > 0 and report.kept == report.needed
