"""The reactive compaction with each SDK's own refusal: the exception object the SDK
raised (or, for a Responses stream, the ``response.failed`` event the raw stream
yields, handed to ``record``) makes ``retry_after_error`` compact and prepare again."""

from __future__ import annotations

import json

import pytest

from ctxrules.compaction import CompactOptions
from ctxrules.engine import Engine, EngineConfig
from ctxrules.errors import PromptTooLongError
from ctxrules.importers import import_paths
from loopback import Loopback, Reply
from providers.test_sdk_errors import GEMINI_TOO_LONG, OPENAI_CHAT_TOO_LONG

from .conftest import QUIET

openai = pytest.importorskip("openai")
genai = pytest.importorskip("google.genai")

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
NOW = 1_767_225_600.0
ASK = "Now add a section on testing."


def _engine(store, corpus, provider: str, model: str):
    (res,) = import_paths(store, [str(corpus / CC)])
    options = CompactOptions(summarizer="extractive", timeout_seconds=0)
    engine = Engine(
        store, EngineConfig(provider=provider, model=model, sources=QUIET, compaction=options)
    )
    return engine, engine.prepare(res.id, ASK, now=NOW)


def _compacted(engine, prep, error):
    retry = engine.retry_after_error(prep, error, now=NOW + 1)
    assert retry.attempt == 1 and retry.compaction is not None
    assert retry.compaction.record.trigger == "reactive"
    assert retry.tokens.estimate < prep.tokens.estimate
    assert ASK in json.dumps(retry.body, ensure_ascii=False)


def test_an_openai_sdk_refusal_compacts(store, corpus):
    engine, prep = _engine(store, corpus, "openai-chat", "gpt-4o")
    with Loopback() as server:
        server.reply(Reply(OPENAI_CHAT_TOO_LONG, status=400))
        client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(**prep.body)
    _compacted(engine, prep, refused.value)


def test_a_google_genai_refusal_compacts(store, corpus):
    engine, prep = _engine(store, corpus, "gemini", "gemini-2.5-flash")
    with Loopback() as server:
        server.reply(Reply(GEMINI_TOO_LONG, status=400))
        client = genai.Client(
            api_key="k", http_options=genai.types.HttpOptions(base_url=server.url)
        )
        with pytest.raises(genai.errors.ClientError) as refused:
            client.models.generate_content(model="gemini-2.5-flash", contents="x")
    _compacted(engine, prep, refused.value)


def test_a_responses_stream_that_failed_compacts(store, corpus):
    engine, prep = _engine(store, corpus, "openai-responses", "gpt-4o")
    base = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-4o",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    failed = dict(
        base,
        status="failed",
        error={
            "code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model.",
        },
    )
    events = [
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": dict(base, status="in_progress"),
            },
        ),
        ("response.failed", {"type": "response.failed", "sequence_number": 1, "response": failed}),
    ]
    with Loopback() as server:
        server.reply(Reply(events=events))
        client = openai.OpenAI(api_key="k", base_url=server.url + "/v1", max_retries=0)
        raw = list(client.responses.create(**prep.body, stream=True))  # does not raise
    with pytest.raises(PromptTooLongError) as refused:
        engine.record(prep, raw, now=NOW + 0.5)
    _compacted(engine, prep, refused.value)
