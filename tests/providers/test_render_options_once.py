"""``Provider.render`` makes the wire options of an options object (``wire_options``
and their JSON, the estimate frame's key) once while that object is rendered with —
the engine renders a session's requests with one — and the bodies and estimates are
those of options made afresh for each render."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from ctxrules.model import ContextCommit, ContextItem
from ctxrules.providers import RequestOptions, get_provider
from ctxrules.providers.base import Provider
from ctxrules.render import SessionRenderer, request_options


def _commit(n: int) -> ContextCommit:
    items = tuple(
        ContextItem(
            source_node_id=f"n{i}",
            role="user" if i % 2 == 0 else "assistant",
            rendered=f"message {i} about lib/mod_{i}.py",
            tokens=8,
        )
        for i in range(n)
    )
    return ContextCommit(
        id=f"cc_{n}", session_id="s", head_node_id=f"n{n - 1}", rules_version="v", items=items
    )


@pytest.mark.parametrize("name", ["anthropic", "openai-chat", "openai-responses", "gemini"])
def test_one_options_object_is_made_wire_options_once(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = get_provider(name)
    options = request_options(
        provider, provider.default_model, system="be brief", max_tokens=1000, extra={"top_k": 1}
    )
    made: list[RequestOptions] = []
    wire_options = Provider.wire_options

    def counting(self: Provider, given: RequestOptions) -> RequestOptions:
        made.append(given)
        return wire_options(self, given)

    monkeypatch.setattr(type(provider), "wire_options", counting)
    renderer = SessionRenderer(provider.wire)
    kept: list[Any] = []
    for n in range(1, 6):
        kept.append(provider.render(_commit(n), options, estimate=True, renderer=renderer))
    assert made == [options]  # once for the five renders
    # An equal object made anew is another object: its own wire options, the same bodies.
    fresh = [
        provider.render(_commit(n), msgspec.structs.replace(options), estimate=True)
        for n in range(1, 6)
    ]
    assert len(made) == 6
    monkeypatch.undo()
    assert [r.body for r in kept] == [r.body for r in fresh]
    assert [r.estimate.input_tokens for r in kept] == [r.estimate.input_tokens for r in fresh]


def test_wire_options_refused_are_refused_every_time() -> None:
    provider = get_provider("anthropic")
    options = request_options(provider, provider.default_model, extra={"messages": []})
    for _ in range(2):
        with pytest.raises(Exception, match="written by the renderer"):
            provider.render(_commit(1), options)
