"""A unit's cache identity ignores its cache markers wherever they are, and nothing else."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxrules.providers.estimate import cache_key, strip_cache_control

MARKERS = st.sampled_from([{"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}])
KEYS = st.sampled_from(["type", "text", "content", "id", "input", "cache_control", "x"])
TEXT = st.one_of(
    st.text(max_size=20),
    st.just('"cache_control":{"type":"ephemeral"}'),  # marker-shaped text is content
)
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(KEYS, inner, max_size=4),
    ),
    max_leaves=20,
)


def _mark(obj, draw_marker):
    """``obj`` with a cache marker put on every object that has a ``cache_control`` key."""
    if isinstance(obj, dict):
        return {
            k: (draw_marker if k == "cache_control" else _mark(v, draw_marker))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_mark(v, draw_marker) for v in obj]
    return obj


@given(JSON, MARKERS)
def test_markers_anywhere_do_not_change_the_key(obj, marker):
    marked = _mark(obj, marker)
    assert cache_key(marked) == cache_key(strip_cache_control(marked))


@given(JSON, JSON)
def test_different_content_gives_different_keys(a, b):
    if strip_cache_control(a) != strip_cache_control(b):
        assert cache_key(strip_cache_control(a)) != cache_key(strip_cache_control(b))


def test_marker_shaped_text_is_content():
    plain = {"type": "text", "text": "x"}
    tricky = {"type": "text", "text": 'x","cache_control":{"type":"ephemeral"}'}
    assert cache_key(plain) != cache_key(tricky)
    assert cache_key({**plain, "cache_control": {"type": "ephemeral"}}) == cache_key(plain)
    assert cache_key({"cache_control": {"type": "ephemeral", "ttl": "1h"}, **plain}) == cache_key(
        plain
    )
