"""``request_text`` with a memo (what ``session_recalls`` reads a session's requests with)
is the text without one: on every request of the corpus's first files, rendered for
every provider, and on random JSON bodies; ``session_recalls`` of several replays is
``session_recall`` of each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.corpus import FIRST
from tests.quality.test_needed import _body, _session

from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.quality.needed import session_recall, session_recalls
from ctxrules.quality.text import SKIPPED_KEYS, request_strings, request_text
from ctxrules.requests import render_requests, session_requests
from ctxrules.store import open_store
from ctxrules.summarizers.facts import normalize

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]


def _unmemoized(body: bytes) -> str:
    """The specification: every string of the decoded body, joined, normalised."""
    return normalize(" ".join(request_strings(json.loads(body))))


@pytest.fixture(scope="module")
def corpus_bodies(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = open_store(tmp_path_factory.mktemp("text-memo"))
    ids = [r.id for r in import_paths(store, [str(corpus / f) for f in FIRST])]
    pipeline = Pipeline.from_config(PipelineConfig.preset("default"))
    sessions = [s for s in (session_requests(store, i, config=pipeline) for i in ids) if s]
    out = {p: render_requests(store, sessions, p, meta=False) for p in PROVIDERS}
    store.close()
    return out


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_memo_changes_no_request_text_of_the_corpus(corpus_bodies: Any, provider: str):
    entries = read = 0
    for session in corpus_bodies[provider]:
        memo: dict[bytes, str] = {}
        for rendered in session:
            assert request_text(rendered.body, memo) == _unmemoized(rendered.body)
            body = json.loads(rendered.body)
            entries += sum(len(v) for v in body.values() if isinstance(v, list))
        read += len(memo)
    # Later requests found most of their earlier messages in the memo.
    assert 0 < read < entries / 2


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=12), st.sampled_from([" ", "\n\t"])
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["text", "content", "role", "parts", "x"]), inner),
        # a string that holds JSON is read as sent and as the data it encodes
        inner.map(lambda v: json.dumps(v)),
    ),
    max_leaves=12,
)
_keys = st.sampled_from(["messages", "system", "input", "tools", "model", "contents", "extra"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(_keys, _values, max_size=5), min_size=1, max_size=4))
def test_the_memo_changes_no_text_of_random_bodies(bodies: list[dict[str, Any]]):
    memo: dict[bytes, str] = {}
    for body in bodies:
        raw = json.dumps(body).encode()
        assert request_text(raw, memo) == _unmemoized(raw)
    assert "tools" in SKIPPED_KEYS  # what is skipped at the top is skipped in both


def test_a_body_that_is_not_an_object_is_read_whole():
    memo: dict[bytes, str] = {}
    assert request_text(b'["a  b", {"text": "c"}]', memo) == "a b c"
    assert memo == {}


def test_recalls_of_several_replays_are_each_replays_recall():
    nodes = _session()
    full = _body("def parse_header(raw): connect_timeout", "conf/app.toml:7: connect_timeout = 2")
    aged = _body("[tool Read] lib/net.py output: …", "conf/app.toml:7: connect_timeout = 2")
    both = session_recalls("s", nodes, [{"a3": aged}, {"a3": full}, {}])
    assert both[0] == session_recall("s", nodes, {"a3": aged})
    assert both[1] == session_recall("s", nodes, {"a3": full})
    assert both[2].requests == () and both[0].recall != both[1].recall


def _walk(value: Any) -> Any:
    """The specification of ``request_strings``: depth first, a string as sent and then
    the data a JSON object or list in it encodes; no key of ``SKIPPED_KEYS``."""
    if isinstance(value, str):
        yield value
        if value[:1] in ("{", "[") and value[-1:] in ("}", "]"):
            try:
                inner = json.loads(value)
            except ValueError:
                return
            yield from _walk(inner)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in SKIPPED_KEYS:
                yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=5))
def test_the_strings_of_a_body_are_its_strings_depth_first(body: dict[str, Any]):
    assert list(request_strings(body)) == list(_walk(body))
    raw = json.dumps(body).encode()
    assert request_text(raw) == normalize(" ".join(_walk(body)))
