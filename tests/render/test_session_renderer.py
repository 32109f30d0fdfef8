"""``SessionRenderer``: a session's requests rendered one call at a time, each from the
previous body, give exactly the bytes, breakdown and estimate of rendering each alone.

The oracle is ``Provider.render`` without a renderer (``_core.render_request``).  The
requests are the made-up sessions of ``test_session`` (turns added, items aged, folded,
dropped, copied, system items and vendor blocks arriving, options changing), in order
and with unrelated requests in between (a fork, another session), and every request of
the corpus under the default and the aggressive rules.  The renderer's own counters
show the bodies really were made from their predecessors.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.render.test_session import (
    OPTION_SETS,
    PROVIDERS,
    _commits,
    _growing,
    _item,
    corpus_requests,
    sessions,
)

from ctxrules.errors import ProviderError
from ctxrules.model import ContextCommit
from ctxrules.providers import get_provider
from ctxrules.providers.estimate import estimate_counts
from ctxrules.render import SessionRenderer, request_options
from ctxrules.requests import render_defaults, session_tool_names
from ctxrules.store.memory import forget


def _both(provider: str, commit: ContextCommit, renderer: SessionRenderer, **options):
    """The request rendered with the renderer and alone, each with its estimate."""
    prov = get_provider(provider)
    opts = request_options(prov, **options)
    return (
        prov.render(commit, opts, estimate=True, renderer=renderer),
        prov.render(commit, opts, estimate=True),
    )


@settings(max_examples=60, deadline=None)
@given(session=sessions(), data=st.data())
def test_any_request_after_any_other_is_its_render_alone(session, data):
    commits, options = session
    # Now and then a request of another session, or an earlier one again (a fork).
    order = list(range(len(commits)))
    for _ in range(data.draw(st.integers(0, 2))):
        order.insert(data.draw(st.integers(0, len(order))), data.draw(st.sampled_from(order)))
    other = _growing(2)[-1]
    if data.draw(st.booleans()):
        order.insert(data.draw(st.integers(0, len(order))), -1)
    for provider in PROVIDERS:
        renderer = SessionRenderer(provider)
        for k in order:
            commit, opts = (other, {}) if k < 0 else (commits[k], options[k])
            inc, full = _both(provider, commit, renderer, **opts)
            assert inc == full, (provider, k)
            assert inc.estimate == full.estimate
        assert renderer.stats[0] == len(order)


def test_a_growing_session_is_written_a_turn_at_a_time():
    commits = _growing(12)
    for provider in PROVIDERS:
        renderer = SessionRenderer(provider)
        total = 0
        for c in commits:
            inc, full = _both(provider, c, renderer, **OPTION_SETS[0])
            assert inc == full
            total += len(full.body)
        renders, reused, written = renderer.stats
        assert renders == len(commits)
        assert reused + written == total
        # Each request appends to the last one: most of every body is copied.
        assert reused > 2 * written, (provider, reused, written)


def test_a_rewritten_beginning_is_written_again():
    commits = _growing(4)
    last = commits[-1]
    first = last.items[0]
    rewritten = msgspec.structs.replace(first, state="aged", rendered="[aged]")
    changed = _commits([[rewritten, *last.items[1:]]])[0]
    renderer = SessionRenderer("anthropic")
    _both("anthropic", last, renderer)
    before = renderer.stats
    inc, full = _both("anthropic", changed, renderer)
    assert inc == full
    # Nothing after the head could be reused: the first message changed.
    reused = renderer.stats[1] - before[1]
    assert reused < len(full.body) // 4
    renderer.reset()
    inc, full = _both("anthropic", changed, renderer)
    assert inc == full
    assert renderer.stats[1] == reused + before[1]


def test_a_long_message_changed_at_its_end_is_written_and_estimated_from_there():
    # Summaries in a row make one long assistant message; each request adds one at its
    # end (as a session that folds a turn into a new summary every turn does), so the
    # message changes every time: only its new block and what follows are written and
    # worked out again for the estimate.
    summaries = [_item(i, "assistant", f"summary {i}: module {i}\nis fine") for i in range(1, 61)]
    commits = _commits(
        [
            [_item(0, "user", "task"), *summaries[: 50 + k], _item(100 + k, "user", f"go {k}")]
            for k in range(4)
        ]
    )
    for opts in ({}, {"cache": False}):
        renderer = SessionRenderer("anthropic")
        _both("anthropic", commits[0], renderer, **opts)
        prov = get_provider("anthropic")
        request = request_options(prov, **opts)
        for k, commit in enumerate(commits[1:], 1):
            _, reused, written = renderer.stats
            before = estimate_counts()["segments"]
            inc = prov.render(commit, request, estimate=True, renderer=renderer)
            incremental = estimate_counts()["segments"] - before
            full = prov.render(commit, request, estimate=True)
            whole = estimate_counts()["segments"] - before - incremental
            assert inc == full
            assert inc.body == full.body
            assert inc.estimate == full.estimate
            # Alone, every segment is worked out (the 50 + k summaries among them); from
            # the previous request, the new summary, the new user turn and the reply.
            assert whole > 50 + k
            assert incremental <= whole - (50 + k) + 1
            new = full.body.index(f"summary {50 + k}:".encode())
            assert renderer.stats[1] - reused > new - 40
            assert renderer.stats[2] - written < len(full.body) - new + 40


def test_a_renderer_of_another_wire_is_refused():
    renderer = SessionRenderer("gemini")
    assert renderer.provider == "gemini"
    with pytest.raises(ProviderError, match="gemini"):
        _both("anthropic", _growing(1)[0], renderer)
    with pytest.raises(ValueError, match="no built-in wire format"):
        SessionRenderer("nope")


def test_bad_options_leave_the_renderer_as_it_was():
    commits = _growing(3)
    renderer = SessionRenderer("anthropic")
    _both("anthropic", commits[0], renderer)
    with pytest.raises(ValueError):
        renderer.render(commits[1].items, b"{not json")
    inc, full = _both("anthropic", commits[1], renderer)
    assert inc == full
    assert renderer.stats[1] > 0


@pytest.mark.parametrize("preset", ["default", "aggressive"])
def test_every_request_of_the_corpus_is_its_render_alone(corpus, tmp_path, request, preset):
    store, requests = corpus_requests(corpus, tmp_path / "s", preset)
    request.addfinalizer(lambda: forget(f"memory:{tmp_path / 's'}"))
    assert sum(map(len, requests)) > 2000
    for provider in ("anthropic", "openai-responses"):
        reused = total = 0
        for session in requests:
            renderer = SessionRenderer(provider)
            used = session_tool_names(store, session[0].session_id)
            for r in session:
                defaults = render_defaults(store, r, provider, used_tools=used).options
                inc, full = _both(provider, r.commit, renderer, **defaults)
                assert inc == full, f"{provider}: session {r.session_id}, answer {r.answer}"
                assert inc.estimate == full.estimate
                total += len(full.body)
            reused += renderer.stats[1]
        assert reused > total // 2, (provider, reused, total)
