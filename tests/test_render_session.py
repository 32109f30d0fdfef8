"""Incremental rendering (``render_sessions``): every request of every corpus session.

The oracle is the full render: each request rendered alone by ``render`` with the
options ``render --for`` sends (``render_defaults``: the recorded or inferred tools,
system text, model and parameters; Anthropic's cache breakpoints), under the default
rules and the aggressive ones (which age, clear and fold items inside the prefix).  A
second option set adds what changes between requests on purpose: a situation text of
each request's own, breakpoints with a TTL.  A spy on the core checks that the bodies
really were built from their predecessors, not rendered whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxrules import _core
from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.render import render, render_sessions
from ctxrules.replay import Request, render_defaults, request_for, session_tool_names
from ctxrules.store import CommitStore, open_store

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]


def corpus_requests(
    corpus: Path, where: Path, preset: str, *, situation: bool = False
) -> tuple[CommitStore, list[list[Request]]]:
    """The request of every answer of every corpus session, in order, under ``preset``."""
    files = sorted(str(p) for p in corpus.rglob("*") if p.is_file() and p.name != "SOURCES.md")
    store = open_store(where)
    pipeline = Pipeline.from_config(PipelineConfig.preset(preset))
    sessions = []
    for res in import_paths(store, files):
        answers = [
            n
            for n in store.nodes(res.id)
            if n.role == "assistant" and n.caller is None and n.predecessor is not None
        ]
        requests = [
            request_for(store, res.id, a.id, config=pipeline, situation=situation) for a in answers
        ]
        if requests:
            sessions.append(requests)
    return store, sessions


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
    corpus, tmp_path, monkeypatch, preset, variant
):
    situation = variant != "recorded"
    store, sessions = corpus_requests(corpus, tmp_path / "s", preset, situation=situation)
    assert len(sessions) >= 200 and sum(map(len, sessions)) > 2000
    spy = Spy()
    monkeypatch.setattr(_core, "render_sessions", spy)
    for provider in PROVIDERS:
        options = []
        for requests in sessions:
            used = session_tool_names(store, requests[0].session_id)
            options.append(
                [
                    {
                        **render_defaults(store, r, provider, used_tools=used).options,
                        **(
                            {"situation": r.situation or None, "cache_ttl": "1h"}
                            if situation
                            else {}
                        ),
                    }
                    for r in requests
                ]
            )
        got = render_sessions(
            [[r.commit for r in s] for s in sessions], [provider], options=options
        )
        total = 0
        for requests, kws, (rendered,) in zip(sessions, options, got):
            assert len(rendered) == len(requests)
            for r, kw, inc in zip(requests, kws, rendered):
                full = render(r.commit, provider, **kw)
                assert inc == full, f"{provider}: session {r.session_id}, answer {r.answer}"
                total += len(full.body)
        # Most bytes come from the previous body (measured: 60-75 % on this corpus).
        assert spy.reused > total // 2, (provider, spy.reused, total)
        spy.reused = 0
    assert spy.calls == len(PROVIDERS)
