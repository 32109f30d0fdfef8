"""Invariants 1-8 and every rule's promise over every session imported from
tests/data/corpus, turn by turn, for the built-in rules in every shipped configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.corpus import FIRST
from tests.presets import EVERY_RULE

from ctxrules.commit import Pipeline
from ctxrules.config import PRESETS, PipelineConfig
from ctxrules.dag import branch_path
from ctxrules.importers import import_paths
from ctxrules.store import open_store
from ctxrules.testing import check_commits, drive_branch

PIPELINES = {name: Pipeline.from_config(PipelineConfig.preset(name)) for name in PRESETS}
#: aggressive's budgets without the cache ledger: every rule fires (tests/presets.py).
EVERY = Pipeline.from_config(EVERY_RULE)


@pytest.fixture(scope="module")
def corpus_store(corpus: Path, tmp_path_factory):
    files = [str(corpus / f) for f in FIRST]
    store = open_store(tmp_path_factory.mktemp("corpus-store"))
    results = import_paths(store, files)
    yield store, results
    store.close()


def _replay(store, session_id, pipeline):
    path = branch_path(store, session_id)
    return path, drive_branch(path, pipeline, session_id=session_id, delay=3600.0)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_corpus_session_keeps_the_invariants(corpus_store, preset):
    store, results = corpus_store
    pipeline = PIPELINES[preset]
    assert len(results) >= 200  # the tau-bench file alone holds 200 conversations
    checked = 0
    for res in results:
        path, runs = _replay(store, res.id, pipeline)
        checked += check_commits(runs, pipeline)
        if runs:
            last = runs[-1][1].commit
            # every node of the branch is in the final commit, exactly once
            ids = [
                it.source_node_id for it in last.items if not it.source_node_id.startswith("sm_")
            ]
            assert sorted(ids) == sorted(c.id for c in path)
    assert checked > 1000


def test_aggressive_rules_really_fire_on_the_corpus(corpus_store):
    store, results = corpus_store
    states: dict[str, int] = {}
    for res in results:
        _, runs = _replay(store, res.id, EVERY)
        if runs:
            for it in runs[-1][1].commit.items:
                states[it.state] = states.get(it.state, 0) + 1
    # (Summaries that name their results' identifiers are longer, so folds take more of
    # the aged results: fewer stay aged at the end.)
    assert states.get("aged", 0) + states.get("cleared", 0) > 50
    assert states.get("summary", 0) > 0 and states.get("summarized", 0) > 0


def test_store_path_turn_by_turn_follows_branch_path(corpus_store):
    """make_commit at every conversation node of the Claude Code and SWE-agent
    sessions (tool calls, sub-agent sidechains): each commit lists that head's branch."""
    import ctxrules

    store, results = corpus_store
    pipeline = EVERY
    picked = [r for r in results if r.format in ("claude-code", "swe-agent", "openhands")]
    assert len(picked) >= 5
    for res in picked:
        path = branch_path(store, res.id)
        for head in [c for c in path if c.caller is None]:
            commit = ctxrules.make_commit(
                res.id, head.id, now=head.created_at, store=store, config=pipeline
            )
            ids = [
                it.source_node_id
                for it in commit.items
                if not it.source_node_id.startswith("sm_") and it.attached_from is None
            ]
            assert ids == [c.id for c in branch_path(store, res.id, head.id)]
