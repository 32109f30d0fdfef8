"""``SessionRenderer`` takes an item from the previous request by position when the new
commit holds the very same object there (``items_kept``), instead of looking every item
up again; a different object at a position (an equal copy, an aged item) is looked up,
and the bodies stay those of each request rendered alone."""

from __future__ import annotations

import msgspec
from tests.render.test_session import PROVIDERS, _growing

from ctxrules.providers import get_provider
from ctxrules.render import SessionRenderer, request_options


def _pair(provider, commit, renderer):
    prov = get_provider(provider)
    opts = request_options(prov, system="be brief")
    return (
        prov.render(commit, opts, estimate=True, renderer=renderer),
        prov.render(commit, opts, estimate=True),
    )


def _same(a, b):
    assert a.body == b.body and a.meta == b.meta
    assert a.estimate is not None and b.estimate is not None
    assert a.estimate.input_tokens == b.estimate.input_tokens


def test_a_growing_session_takes_every_earlier_item_by_position():
    commits = _growing(4)  # each commit's items: the previous ones' objects, then new ones
    for provider in PROVIDERS:
        r = SessionRenderer(provider)
        expected = 0
        for k, commit in enumerate(commits):
            _same(*_pair(provider, commit, r))
            if k:
                expected += len(commits[k - 1].items)
            assert r.items_kept == expected, provider


def test_an_equal_copy_at_a_position_is_looked_up_not_taken():
    commits = _growing(3)
    last = commits[-1]
    # The same items, the third one a new (equal) object.
    items = list(last.items)
    items[2] = msgspec.structs.replace(items[2])
    copy = msgspec.structs.replace(last, items=tuple(items))
    for provider in PROVIDERS:
        r = SessionRenderer(provider)
        _same(*_pair(provider, last, r))
        _same(*_pair(provider, copy, r))
        assert r.items_kept == len(items) - 1


def test_after_a_reset_nothing_is_taken():
    a, b = _growing(2)[-2:]
    r = SessionRenderer("anthropic")
    _pair("anthropic", a, r)
    r.reset()
    _same(*_pair("anthropic", b, r))
    assert r.items_kept == 0
