"""``Engine.record`` takes only an answer of the engine's provider (hardening, second
round): each probe below was once stored as an empty or wrong assistant answer — a node
appended, HEAD moved, the real content lost — or raised an untyped ``ValueError``.  Now
each is refused with a typed error naming what is wrong, and the store is unchanged:
no node appended, HEAD where it was, no session metadata changed.

The probes: every pairing of a provider's engine with another provider's real answer
(the recorded cassette responses, or a documented Responses body), ``{}``, the vendor's
own error body (which becomes the vendor's error), content as a string, ``None`` or
``[]``, a ``role: "user"`` body, a ``model`` that is an object, and usage of NaN,
infinity, a negative count and 10^30 tokens.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from ctxrules import dag, errors
from ctxrules.engine import Engine, EngineConfig
from ctxrules.errors import CtxrulesError
from engine.conftest import QUIET
from fake_vendors import RESPONSES_ANSWER
from providers.conftest import CASSETTES, CORPUS_CASSETTES, load_cassette

MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai-chat": "gpt-4o",
    "openai-responses": "gpt-4o",
    "gemini": "gemini-2.5-flash",
}


def _answers() -> dict[str, dict]:
    out = {"openai-responses": RESPONSES_ANSWER}
    for kind in ("anthropic", "openai-chat", "gemini"):
        _, response, _ = load_cassette(CORPUS_CASSETTES / CASSETTES[kind][0], -1)
        out[kind] = response
    return out


ANSWERS = _answers()


def _prepared(store, provider: str):
    engine = Engine(store, EngineConfig(provider=provider, model=MODELS[provider], sources=QUIET))
    session = dag.create_session(store).id
    prep = engine.prepare(session, "hello", now=1_000.0)
    return engine, session, prep


def _state(store, session: str) -> tuple:
    info = store.get_session(session)
    return info.head, [n.id for n in store.nodes(session)], info.metadata


def _refused(store, provider: str, response, kind: str) -> Any:
    """Record ``response`` and expect the typed error ``errors.<kind>`` (looked up after
    the call, so on code without that class the probe fails on what record did)."""
    engine, session, prep = _prepared(store, provider)
    before = _state(store, session)
    with pytest.raises(CtxrulesError) as caught:
        engine.record(prep, response, now=1_001.0)
    assert isinstance(caught.value, getattr(errors, kind)), repr(caught.value)
    assert _state(store, session) == before  # no node, HEAD unmoved, metadata as it was
    return caught.value


@pytest.mark.parametrize(
    ("engine_provider", "answer_of"),
    [(a, b) for a in MODELS for b in MODELS if a != b],
)
def test_another_providers_answer_is_refused(store, engine_provider, answer_of):
    # The same answer is recorded by its own provider's engine: the probe is a real answer.
    engine, _, prep = _prepared(store, answer_of)
    assert engine.record(prep, ANSWERS[answer_of], now=1_001.0).node.role == "assistant"
    err = _refused(store, engine_provider, ANSWERS[answer_of], "ResponseError")
    assert "not" in str(err) and engine_provider in str(err)


@pytest.mark.parametrize("provider", list(MODELS))
def test_an_empty_object_is_refused(store, provider):
    _refused(store, provider, {}, "ResponseError")


@pytest.mark.parametrize(
    ("provider", "body", "status"),
    [
        (
            "anthropic",
            {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
                "request_id": "req_1",
            },
            "overloaded_error",
        ),
        (
            "openai-chat",
            {"error": {"message": "Rate limit", "type": "requests", "code": "rate_limit"}},
            "requests",
        ),
        (
            "gemini",
            {"error": {"code": 503, "message": "Overloaded.", "status": "UNAVAILABLE"}},
            "UNAVAILABLE",
        ),
    ],
)
def test_a_vendor_error_body_is_the_vendors_error(store, provider, body, status):
    err = _refused(store, provider, body, "VendorError")
    assert err.type == status and err.body["error"] == body["error"]


def test_a_prompt_too_long_error_body_is_the_refusal_compaction_answers(store):
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208656 tokens > 200000 maximum",
        },
    }
    err = _refused(store, "anthropic", body, "PromptTooLongError")
    assert (err.tokens, err.limit) == (208656, 200000)


@pytest.mark.parametrize(
    "content",
    ["plain text", None, []],
    ids=["a string", "null", "an empty list without a stop reason"],
)
def test_anthropic_content_that_is_not_blocks_is_refused(store, content):
    body = {"type": "message", "role": "assistant", "model": "claude-sonnet-4-5"}
    body["content"] = content
    err = _refused(store, "anthropic", body, "ResponseError")
    assert err.field == "content"


def test_a_user_turn_is_not_the_assistants_answer(store):
    body = copy.deepcopy(ANSWERS["anthropic"])
    body["role"] = "user"
    assert _refused(store, "anthropic", body, "ResponseError").field == "role"
    chat = copy.deepcopy(ANSWERS["openai-chat"])
    chat["choices"][0]["message"]["role"] = "user"
    err = _refused(store, "openai-chat", chat, "ResponseError")
    assert err.field == "choices[0].message.role"


def test_a_model_that_is_not_a_name_is_refused(store):
    body = copy.deepcopy(ANSWERS["anthropic"])
    body["model"] = {"evil": True}
    assert _refused(store, "anthropic", body, "ResponseError").field == "model"


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -1, 10**30, 1e30],
    ids=["NaN", "infinity", "negative", "10^30", "1e30"],
)
@pytest.mark.parametrize(
    ("provider", "path"),
    [
        ("anthropic", ("usage", "input_tokens")),
        ("openai-chat", ("usage", "prompt_tokens")),
        ("openai-responses", ("usage", "input_tokens")),
        ("gemini", ("usageMetadata", "promptTokenCount")),
    ],
)
def test_usage_must_be_a_finite_count_within_bounds(store, provider, path, value):
    body = copy.deepcopy(ANSWERS[provider])
    body[path[0]][path[1]] = value
    err = _refused(store, provider, body, "ResponseError")
    assert err.field == ".".join(path)


def test_a_valid_answer_still_moves_head(store):
    # The refusals above are not a record that refuses everything.
    engine, session, prep = _prepared(store, "anthropic")
    done = engine.record(prep, ANSWERS["anthropic"], now=1_001.0)
    assert store.get_session(session).head == done.node.id
