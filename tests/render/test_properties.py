"""Property: every request we render is structurally sound for its vendor.

Every corpus session × every shipped rule configuration × every provider, at random cut
points of the history (hypothesis draws one cut per session per example) and at random
clock offsets (so idle clearing fires or not): the provider's validator must find no
orphan tool result, no unanswered tool call and no broken role order — nothing at all.
Examples are bounded to keep the run short; each example covers every session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.corpus import FIRST
from tests.presets import EVERY_RULE

from ctxrules.commit import Pipeline, make_commit
from ctxrules.config import PRESETS, PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.model import Node
from ctxrules.providers import get_provider
from ctxrules.render import render, render_messages
from ctxrules.requests import Request, render_defaults
from ctxrules.store import Store, open_store

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]


@dataclass
class Corpus:
    store: Store
    sessions: list[tuple[str, dict, list[Node]]]  # (id, metadata, nodes)


@pytest.fixture(scope="module")
def corpus_sessions(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """Every file of the corpus imported (format detected) into one fresh store."""
    files = [str(corpus / f) for f in FIRST]
    store = open_store(tmp_path_factory.mktemp("corpus-store"))
    results = import_paths(store, files)
    sessions = [(r.id, dict(store.get_session(r.id).metadata), store.nodes(r.id)) for r in results]
    assert len(files) == 12 and len(sessions) >= 200  # tau-bench alone holds 200
    return Corpus(store, sessions)


def _check(commit, store, where: str) -> None:
    # Rendered as the session recorded its requests (tools inferred where the format
    # records none: Anthropic refuses tool blocks without declarations).
    request = Request(session_id=commit.session_id, commit=commit, situation="", sent_at=0)
    for name in PROVIDERS:
        defaults = render_defaults(store, request, name).options
        body = json.loads(render(commit, name, **defaults).body)
        problems = get_provider(name).validate(body)
        assert problems == [], f"{where} {name}: {problems[:3]}"
    # Neutral level: every tool_use has exactly one result, right after it.
    msgs = render_messages(commit)
    for i, m in enumerate(msgs):
        uses = [b.id for b in m.content if b.__class__.__name__ == "ToolUseBlock"]
        if uses:
            nxt = msgs[i + 1].content if i + 1 < len(msgs) else ()
            results = [b.tool_use_id for b in nxt if b.__class__.__name__ == "ToolResultBlock"]
            assert results[: len(uses)] == uses, where


@pytest.mark.parametrize("preset", sorted(PRESETS))
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), idle_hours=st.sampled_from([0.0, 0.5, 3.0, 48.0]))
def test_every_rendered_request_is_valid(corpus_sessions, preset, data, idle_hours):
    pipeline = Pipeline.from_config(PipelineConfig.preset(preset))
    for sid, _metadata, nodes in corpus_sessions.sessions:
        cut = data.draw(st.sampled_from(nodes), label=sid)
        commit = make_commit(
            sid,
            head=cut.id,
            store=corpus_sessions.store,
            now=cut.created_at + idle_hours * 3600,
            config=pipeline,
        )
        _check(commit, corpus_sessions.store, f"{sid}@{cut.id} ({preset})")


def test_rules_really_fire_and_stay_valid(corpus_sessions):
    """aggressive's budgets without the cache ledger (every rule fires: tests/presets.py)
    at every session's HEAD: rules change items, requests stay valid."""
    pipeline = Pipeline.from_config(EVERY_RULE)
    states: set[str] = set()
    for sid, _metadata, nodes in corpus_sessions.sessions:
        last = max(n.created_at for n in nodes)
        store = corpus_sessions.store
        # At the last turn's time (aging, summarize), then a day later (idle clearing).
        at_turn = make_commit(sid, store=store, now=last, config=pipeline)
        day_later = make_commit(sid, store=store, now=last + 86400, config=pipeline, rerun=True)
        for commit in (at_turn, day_later):
            states |= {it.state for it in commit.items}
            _check(commit, store, f"{sid} (aggressive, HEAD)")
    assert {"aged", "cleared", "summarized", "summary"} <= states
