"""Fuzzing the core from Python, bounded for ``make test`` (``make fuzz`` runs longer).

- Mutated seed commits (``fuzz_core.py``: bytes and data mutations) through every entry
  point of the Python API give bodies or typed errors, nothing else.
- Any commit hypothesis can build renders, and the item tuple, its bytes and a batch
  give the same bytes, cold or from the caches.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import commit_strategies
from ctxrules import _core
from ctxrules.errors import RenderError
from ctxrules.model import (
    ContextCommit,
    ContextItem,
)
from ctxrules.render import render, render_batch, render_context
from fuzz_core import run

WIRES = ["anthropic", "openai-chat", "openai-responses", "gemini"]


def test_mutated_commits_give_bodies_or_typed_errors():
    tally = run(seed=7, start=0, count=1_500)
    assert tally["commits"] == 1_500 and tally["bodies"] > 0 and tally["errors"] > 0


_items = commit_strategies.items()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(_items, max_size=25))
def test_any_commit_renders_the_same_from_items_bytes_and_batch(items):
    commit = ContextCommit(
        id="c", session_id="s", head_node_id="h", rules_version="r", items=tuple(items)
    )
    data = msgspec.msgpack.encode(commit)
    batch = render_batch([commit, data], WIRES)
    for j, wire in enumerate(WIRES):
        first = render(commit, wire)  # cold for new items, then from the identity table
        again = render(commit, wire)
        from_bytes = render(data, wire)
        assert first.body == again.body == from_bytes.body == batch[0][j].body == batch[1][j].body
        assert first.meta == from_bytes.meta
        json.loads(first.body)
    assert render_context(commit) == render_context(data)


def test_lone_surrogates_are_a_render_error():
    item = ContextItem(source_node_id="u", role="user", rendered="bad \ud800 text")
    commit = ContextCommit(
        id="c", session_id="s", head_node_id="h", rules_version="r", items=(item,)
    )
    with pytest.raises(RenderError, match="could not be encoded"):
        render(commit, "anthropic")
    assert _core.item_cache_stats()["capacity"] > 0
