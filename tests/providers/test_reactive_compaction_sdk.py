"""The reactive compaction path through Anthropic's official SDK: the loopback server
refuses the first request as too long (the API's wording), the SDK raises, ctxrules
recognises the refusal, compacts once, and the second request — smaller, carrying the
summary — is answered with a recorded response."""

from __future__ import annotations

import json

import pytest

from ctxrules import dag
from ctxrules.compaction import CircuitBreaker, compact, is_prompt_too_long, retry_after_compaction
from ctxrules.importers import import_paths
from ctxrules.providers import get_provider
from ctxrules.render import render
from ctxrules.requests import next_request, render_defaults
from ctxrules.store import open_store

from .conftest import CASSETTES

anthropic = pytest.importorskip("anthropic")

NOW = 2_000_000_000.0
REFUSAL = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 208363 tokens > 200000 maximum",
    },
}


def test_a_refused_request_is_compacted_and_sent_once_more(
    tmp_path, corpus, loopback, cassette_session
):
    store = open_store(str(tmp_path / "store"), create=True)
    rel = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    (res,) = import_paths(store, [str(corpus / rel)])
    sid = res.id
    dag.append(store, sid, "user", "Now add a section on testing.")
    provider = get_provider("anthropic")
    client = anthropic.Anthropic(api_key="test-key", base_url=loopback.url, max_retries=0)
    loopback.status, loopback.reply, loopback.check = 400, REFUSAL, provider.validate

    def send():
        request = next_request(store, sid, now=NOW)
        body = render(
            request.commit, provider, **render_defaults(store, request, provider).options
        ).body
        return client.messages.create(**json.loads(body))

    with pytest.raises(anthropic.BadRequestError) as refused:
        send()
    assert is_prompt_too_long(refused.value, provider)
    loopback.seen.clear()

    def compact_now():
        result = compact(store, sid, now=NOW, trigger="reactive", provider=provider)
        loopback.status = 200
        loopback.reply = cassette_session(CASSETTES["anthropic"][0]).response
        return result

    message, result = retry_after_compaction(
        send, compact_now, breaker=CircuitBreaker(), provider=provider
    )
    assert message.role == "assistant" and result.record.trigger == "reactive"
    first, second = loopback.seen
    assert loopback.problems == []
    assert len(json.dumps(second.body)) < len(json.dumps(first.body))
    sent = json.dumps(second.body, ensure_ascii=False)
    assert result.record.summary.splitlines()[0] in sent
    assert "Now add a section on testing." in sent  # the open request stayed
    store.close()
