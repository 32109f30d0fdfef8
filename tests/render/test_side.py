"""render_side_request: a summary's request is the system text and one user message,
with no tools, history or cache breakpoints, for every provider."""

from __future__ import annotations

import json

import pytest

from ctxrules.providers import get_provider
from ctxrules.render import render_side_request


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses", "gemini"])
def test_system_and_one_user_message_only(provider):
    rendered = render_side_request(provider, None, "Summarise.", "the transcript", max_tokens=300)
    body = json.loads(rendered.body)
    assert get_provider(provider).validate(body) == []
    text = json.dumps(body)
    assert "Summarise." in text and "the transcript" in text
    assert "cache_control" not in text and "tools" not in body
    if provider == "anthropic":
        assert body["system"] == [{"type": "text", "text": "Summarise."}]
        assert body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "the transcript"}]}
        ]
        assert body["max_tokens"] == 300
    elif provider == "openai-chat":
        assert body["messages"] == [
            {"role": "system", "content": "Summarise."},
            {"role": "user", "content": "the transcript"},
        ]
    elif provider == "openai-responses":
        assert body["instructions"] == "Summarise." and len(body["input"]) == 1
    else:
        assert len(body["contents"]) == 1 and body["contents"][0]["role"] == "user"
