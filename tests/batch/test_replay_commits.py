"""Each replay plans its commits from the nodes it appended (``batch._recording``): the
commits, requests and records are those ``make_commit`` gives planning every commit
from the store, and the no-rules replay's commits are never stored."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
import pytest

from ctxrules.batch import ReplayOptions, _recording, session
from ctxrules.batch.requests import session_data
from ctxrules.commit import derive, generate, persist
from ctxrules.config import PipelineConfig
from ctxrules.engine import Engine
from ctxrules.store import open_store

from .conftest import OPTIONS, filled_store


class _FromStore(_recording.ReplayEngine):
    """Every commit made as a live engine makes it: ``make_commit`` (planned from the
    store, stored), the no-rules replay's too."""

    def __init__(self, *args: Any, stored: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, stored=True, **kwargs)

    _commit = Engine._commit


@pytest.fixture(scope="module")
def location(subset, tmp_path_factory) -> str:
    return filled_store(str(tmp_path_factory.mktemp("replay") / "store"), subset)


#: The rules replay compacting as soon as it can: its commits after each compaction
#: are made from what the compaction stored (``make_commit``), not planned.
COMPACTING = ReplayOptions.of(
    PipelineConfig.preset("default"),
    engine={"warn_at": 0.005, "compact_at": 0.01, "critical_at": 0.95},
)


def _replays(location: str, options: ReplayOptions = OPTIONS) -> list[session.Replayed]:
    store = open_store(location, create=False)
    try:
        return [
            session.replay_detail(session_data(store, info.id), options)
            for info in store.list_sessions()
        ]
    finally:
        store.close()


def _encoded(done: list[session.Replayed]) -> list[bytes]:
    out = []
    for detail in done:
        for point, prep, prefix, output, priced in [*detail.plain, *detail.rules]:
            made = (prep.commit, prep.request.body, prep.tokens, prep.budget, prep.model)
            out.append(msgspec.json.encode([point.index, made, prefix, output, priced]))
        out.append(msgspec.json.encode(detail.record))
    return out


@pytest.mark.parametrize("options", [OPTIONS, COMPACTING], ids=["aggressive", "compacting"])
def test_every_commit_and_request_is_the_one_make_commit_gives(location, monkeypatch, options):
    done = _replays(location, options)
    planned = _encoded(done)
    if options is COMPACTING:
        assert sum(d.record["rules"].get("compactions", 0) for d in done) > 0
    monkeypatch.setattr(session, "ReplayEngine", _FromStore)
    from_store = _encoded(_replays(location, options))
    assert len(planned) > 100
    assert planned == from_store


def test_commits_are_planned_once_per_session_and_only_the_rules_stored(location, monkeypatch):
    counts: Counter[str] = Counter()

    def counting(name: str, module: Any, attr: str) -> None:
        original = getattr(module, attr)

        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, attr, counted)

    counting("plans", generate, "plan_commit")
    counting("saves", persist, "save")
    counting("derives", derive, "derive_commit")
    done = _replays(location)
    replayed = [d for d in done if d.rules]
    points = sum(len(d.rules) for d in replayed)
    compactions = sum(d.record["rules"]["compactions"] for d in replayed)
    assert points > 100
    # From the store: only each session's first commit under the rules (a compaction
    # plans its own commits and the one after it).
    assert counts["plans"] <= len(replayed) + 2 * compactions
    # The no-rules replay stores none of its commits: at most one per rules request
    # (and a compaction's), none per plain one.
    assert counts["saves"] <= points + 2 * compactions
    # One derive per request of each replay (no summary asked twice, no compaction
    # here beyond its own derives).
    assert counts["derives"] <= 2 * points + 4 * compactions
