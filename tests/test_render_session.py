"""Incremental rendering: every request of every corpus session is its full render.

``ctxrules.replay.session_requests`` gives the request of every answer of a session and
``render_requests`` renders them all incrementally (``ctxrules.render.render_sessions``).
The oracle is ``render --for``: each request rendered alone by ``render`` with its
``render_defaults`` options (the recorded or inferred tools, system text, model and
parameters; Anthropic's cache breakpoints) and its situation text.  Under the default
rules and the aggressive ones (which age, clear and fold items inside the prefix); and
with what changes between requests on purpose: a situation text of each request's
own, breakpoints with a TTL.  A spy on the core checks that the bodies really were
built from their predecessors, not rendered whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxrules import _core
from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.render import render
from ctxrules.replay import (
    Request,
    render_defaults,
    render_requests,
    session_requests,
    session_tool_names,
)
from ctxrules.store import CommitStore, open_store
from ctxrules.store.memory import forget

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]


def corpus_requests(
    corpus: Path, where: Path, preset: str, *, situation: bool = False
) -> tuple[CommitStore, list[list[Request]]]:
    """The request of every answer of every corpus session, in order, under ``preset``."""
    files = sorted(str(p) for p in corpus.rglob("*") if p.is_file() and p.name != "SOURCES.md")
    store = open_store(f"memory:{where}")
    pipeline = Pipeline.from_config(PipelineConfig.preset(preset))
    sessions = [
        session_requests(store, res.id, config=pipeline, situation=situation)
        for res in import_paths(store, files)
    ]
    return store, [s for s in sessions if s]


class Spy:
    """Records what the core reports it reused, around the real call."""

    def __init__(self) -> None:
        self.reused = 0
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        out = self.real(*args, **kwargs)
        self.reused += sum(sum(reused) for _, _, reused in out)
        return out

    real = staticmethod(_core.render_sessions)


@pytest.mark.parametrize(
    ("preset", "variant"),
    [("default", "recorded"), ("aggressive", "recorded"), ("default", "situation+ttl")],
)
def test_every_request_of_the_corpus_is_its_full_render(
    corpus, tmp_path, monkeypatch, request, preset, variant
):
    situation = variant != "recorded"
    store, sessions = corpus_requests(corpus, tmp_path / "s", preset, situation=situation)
    request.addfinalizer(lambda: forget(f"memory:{tmp_path / 's'}"))
    assert len(sessions) >= 200 and sum(map(len, sessions)) > 2000
    assert situation == any(r.situation for s in sessions for r in s)
    ttl = "1h" if situation else None
    spy = Spy()
    monkeypatch.setattr(_core, "render_sessions", spy)
    for provider in PROVIDERS:
        got = render_requests(store, sessions, provider, cache_ttl=ttl)
        total = 0
        for requests, rendered in zip(sessions, got):
            assert len(rendered) == len(requests)
            used = session_tool_names(store, requests[0].session_id)
            for r, inc in zip(requests, rendered):
                defaults = render_defaults(store, r, provider, used_tools=used).options
                full = render(
                    r.commit, provider, situation=r.situation or None, cache_ttl=ttl, **defaults
                )
                assert inc == full, f"{provider}: session {r.session_id}, answer {r.answer}"
                total += len(full.body)
        # Most bytes come from the previous body (measured: 60-90 % on this corpus).
        assert spy.reused > total // 2, (provider, spy.reused, total)
        spy.reused = 0
    assert spy.calls == len(PROVIDERS)
