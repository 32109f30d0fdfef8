"""The quality checker over every session of tests/data/corpus, compacted two ways:

- ``half``: only the summarize rule, its threshold at half the session's tokens with
  no rules (``target_ratio`` 0.8, ``keep_tail_turns`` 1), so every session that can
  fold folds to about 40 %;
- ``aggressive``: the shipped preset (every rule, small budgets).

The built-in offline summarizer writes the summaries.  The checks here are the
checker's promises on real data, and the targets the offline summarizer meets under
``half`` (every fact but the files: ≥ 95 % of identifiers and constraints, all of the
task statements and open todos); the figures (benches/README.md, "Context quality")
come from running this file as a module: ``.venv/bin/python -m tests.quality.test_corpus``.
The sessions are those of the corpus's first files (``tests.corpus.FIRST``).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.corpus import FIRST

from ctxrules.commit import make_commit
from ctxrules.config import PipelineConfig
from ctxrules.dag import branch_path
from ctxrules.importers import import_paths
from ctxrules.quality import CATEGORIES, QualityReport, check_quality, folded_node_ids
from ctxrules.quality.text import request_text
from ctxrules.render import render
from ctxrules.requests import Request, render_defaults
from ctxrules.store import CommitStore, open_store

NOW = 2_000_000_000.0  # after every recorded session: idle clearing sees them all idle
OFF = PipelineConfig.preset("off")


def half(baseline: int) -> PipelineConfig:
    """Summarize only, triggered at half the session's tokens."""
    # Every run folded as soon as it is over (no batches: min_run_share 0): this
    # configuration measures how far folding can go, not how often it pays.
    rules = {
        "threshold_tokens": max(1, baseline // 2),
        "target_ratio": 0.8,
        "keep_tail_turns": 1,
        "min_run_share": 0.0,
    }
    return PipelineConfig(pipeline=("summarize",), rules={"summarize": rules})


CONFIGS: dict[str, Callable[[int], PipelineConfig]] = {
    "half": half,
    "aggressive": lambda baseline: PipelineConfig.preset("aggressive"),
}


def corpus_files(corpus: Path) -> list[str]:
    return [str(corpus / f) for f in FIRST]


def reports(
    store: CommitStore, config_name: str, *, every_turn: bool = False
) -> Iterator[tuple[str, QualityReport]]:
    """``(source file, report)`` for every session of the store under one configuration,
    at HEAD, or with ``every_turn`` at each assistant turn of the branch."""
    for info in store.list_sessions():
        heads: list[str | None] = [None]
        if every_turn:
            path = branch_path(store, info.id)
            heads = [c.id for c in path if c.caller is None and c.role == "assistant"]
        for head in heads:
            plain = make_commit(info.id, head, now=NOW, store=store, config=OFF)
            config = CONFIGS[config_name](plain.total_tokens)
            yield info.source, check_quality(info.id, head, now=NOW, store=store, config=config)


@pytest.fixture(scope="module")
def corpus_store(corpus: Path, tmp_path_factory):
    store = open_store(f"memory:{tmp_path_factory.mktemp('quality')}/corpus")
    import_paths(store, corpus_files(corpus))
    yield store
    store.close()


@pytest.mark.parametrize("config_name", list(CONFIGS))
def test_every_corpus_session_is_checked(corpus_store, config_name):
    store = corpus_store
    checked = folded = compacted = 0
    for _, report in reports(store, config_name):
        checked += 1
        commit = make_commit(
            report.session_id,
            now=NOW,
            store=store,
            config=CONFIGS[config_name](report.baseline_tokens),
        )
        assert report.commit_id == commit.id
        assert report.commit_tokens == commit.total_tokens
        assert report.retained_ratio == pytest.approx(
            commit.total_tokens / report.baseline_tokens if report.baseline_tokens else 1.0
        )
        ids = set(folded_node_ids(commit))
        assert report.folded_nodes == len(ids)
        # Every fact but the task statement comes from a folded node.
        assert all(f.node_id in ids for f in report.facts if f.category != "task")
        # Found means: in the text of the request this report was made from.
        request = Request(session_id=report.session_id, commit=commit, situation="", sent_at=0)
        defaults = render_defaults(store, request, "anthropic").options
        text = request_text(render(commit, "anthropic", **defaults).body)
        assert all((f.text in text) == f.found for f in report.facts)
        # The task statement is the anchor: whatever folds, it is in the request.
        task = [f for f in report.facts if f.category == "task"]
        assert len(task) <= 1, report.session_id
        assert all(f.found for f in task), report.session_id
        for name in CATEGORIES:
            score = report.categories[name]
            assert score.found + len(score.missing) == score.total
        folded += report.folded_nodes > 0
        compacted += report.folded_nodes > 0 and report.retained_ratio <= 0.5
    assert checked >= 210  # 200 tau-bench conversations and 11 other sessions
    if config_name == "half":  # made to fold every session that has something to fold
        # System prompts are locked: tau-bench's airline policy is about 40 % of a
        # session, so only about half of them can get under 50 % (earlier summaries are
        # kept as they are, cache-stable, and count against the half too).
        # Summaries also name the identifiers of the tool results they fold (issue 21),
        # and the numbers and dates of those results in the room the names leave (the
        # flight numbers, prices and dates a booking agent quotes again: 77 sessions
        # under half, 80 before), so a few more tau-bench sessions stay just over half.
        assert folded >= 200 and compacted >= 75, (folded, compacted)
    else:
        assert folded > 0


def test_the_offline_summarizer_meets_the_targets_when_folding_to_half(corpus_store):
    """Over the sessions compacted to at most 50 %: ≥ 95 % of the identifiers and the
    constraints, 100 % of the task statements and open todos (the issue's targets)."""
    compacted = [
        r for _, r in reports(corpus_store, "half") if r.folded_nodes and r.retained_ratio <= 0.5
    ]
    assert len(compacted) >= 75  # as test_every_corpus_session_is_checked says why
    share = {}
    for name in CATEGORIES:
        found = sum(r.categories[name].found for r in compacted)
        total = sum(r.categories[name].total for r in compacted)
        share[name] = found / total if total else 1.0
    missing = {
        name: [m for r in compacted for m in r.categories[name].missing][:5] for name in share
    }
    assert share["identifiers"] >= 0.95 and share["constraints"] >= 0.95, (share, missing)
    assert share["task"] == 1.0 and share["todos"] == 1.0, (share, missing)


# -- the figures for benches/README.md ---------------------------------------------------


def _share(found: int, total: int) -> str:
    return f"{found}/{total} ({found / total:.0%})" if total else "–"


def _row(name: str, rs: list[QualityReport]) -> str:
    ratios = [r.retained_ratio for r in rs]
    ratio = (
        f"{ratios[0]:.2f}"
        if len(rs) == 1
        else f"{statistics.median(ratios):.2f} (max {max(ratios):.2f})"
    )
    cells = []
    for c in CATEGORIES:
        found = sum(r.categories[c].found for r in rs)
        total = sum(r.categories[c].total for r in rs)
        cells.append(_share(found, total))
    folded = sum(r.folded_nodes for r in rs)
    return f"| {name} | {ratio} | {folded} | " + " | ".join(cells) + " |"


def table(store: CommitStore, config_name: str, *, every_turn: bool = False) -> str:
    """A markdown table: one row per session (tau-bench's 200 in one row), then all
    reports of sessions folded to at most 50 %; ``every_turn`` skips tau-bench and sums
    each session's turns in its row."""
    rows: list[str] = [
        "| session | retained | folded | " + " | ".join(CATEGORIES) + " |",
        "|---|---|---|" + "---|" * len(CATEGORIES),
    ]
    by_source: dict[str, list[QualityReport]] = {}
    for source, r in reports(store, config_name, every_turn=every_turn):
        if every_turn and "taubench" in source:
            continue
        key = "taubench" if "taubench" in source else source
        by_source.setdefault(key, []).append(r)
    every = [r for rs in by_source.values() for r in rs]
    for source, rs in by_source.items():
        if source != "taubench":
            rows.append(_row(Path(source).name[:48], rs))
    if "taubench" in by_source:
        tau = by_source["taubench"]
        rows.append(_row(f"tau-bench airline ({len(tau)} sessions, summed)", tau))
    compacted = [r for r in every if r.folded_nodes and r.retained_ratio <= 0.5]
    what = "commits" if every_turn else "sessions"
    rows.append(_row(f"**all folded to ≤ 50 % ({len(compacted)} {what})**", compacted))
    return "\n".join(rows)


def missing_kinds(
    store: CommitStore, config_name: str, *, every_turn: bool = False
) -> dict[tuple[str, str], int]:
    """How many facts of each (category, kind) were missing, over the commits folded to
    at most 50 %."""
    out: dict[tuple[str, str], int] = {}
    for source, r in reports(store, config_name, every_turn=every_turn):
        if (every_turn and "taubench" in source) or not (
            r.folded_nodes and r.retained_ratio <= 0.5
        ):
            continue
        for f in r.facts:
            if not f.found:
                out[f.category, f.kind] = out.get((f.category, f.kind), 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


if __name__ == "__main__":
    st = open_store("memory:quality-corpus")
    import_paths(st, corpus_files(Path(__file__).resolve().parents[1] / "data" / "corpus"))
    for name in sys.argv[1:] or list(CONFIGS):
        for every_turn in (False, True):
            print(f"\n### {name}{', every assistant turn' if every_turn else ', at HEAD'}\n")
            print(table(st, name, every_turn=every_turn))
            print("\nmissing by kind:", missing_kinds(st, name, every_turn=every_turn))
    st.close()
