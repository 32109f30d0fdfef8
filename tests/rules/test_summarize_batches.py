"""Summarize folds in batches once the target is out of reach: a commit whose earlier
summaries, kept items and tail alone hold more than the target does not fold the one
turn that left the tail on every commit (a summarizer call, a stored answer and a
rewritten cached suffix a turn) but waits until the run is worth a batch
(``min_run_share`` × (threshold − target)), and its notes say so while it is over."""

from __future__ import annotations

import re

import pytest

from ctxrules.commit import Pipeline
from ctxrules.errors import ConfigError
from ctxrules.rules import Summarize
from ctxrules.testing import Script, Step, check_commits, drive

THRESHOLD = 3000
#: What a fold that reaches the target folds from a commit at the threshold (the
#: default target_ratio 0.6): a batch at the default min_run_share 1.
BATCH = THRESHOLD - int(0.6 * THRESHOLD)
#: The summarize rule's notes of a fold: "folded N item(s) (T tokens) into sm_…".
_FOLDED = re.compile(r"^summarize: folded (\d+) item\(s\) \((\d+) tokens\)")


def _busy(n):
    # Each turn ~730 tokens: a two-turn tail alone holds more than the target (1,800).
    return [Step(user=f"task step {i}", tools=[("Read", 1500, False)]) for i in range(n)]


def _folds(min_run_share=None, turns=40):
    """Per commit of a session over the threshold: (total tokens, tokens folded or None,
    notes)."""
    params = {} if min_run_share is None else {"min_run_share": min_run_share}
    pipeline = Pipeline.of([Summarize(threshold_tokens=THRESHOLD, keep_tail_turns=2, **params)])
    runs = drive(Script(_busy(turns)), pipeline)
    check_commits(runs, pipeline)  # every rule's promise, the notes over the threshold too
    out = []
    for _, gen, _ in runs:
        c = gen.commit
        folded = [int(m.group(2)) for n in c.notes if (m := _FOLDED.match(n))]
        out.append((c.total_tokens, sum(folded) if folded else None, c.notes))
    return out


def test_a_commit_that_cannot_reach_the_target_folds_in_batches_not_every_turn():
    batched = _folds()
    every = _folds(min_run_share=0.0)
    first = next(k for k, (_, f, _) in enumerate(batched) if f)
    assert first == next(k for k, (_, f, _) in enumerate(every) if f)  # the same first fold
    later = batched[first + 1 :]
    # Without batches (the rule before version 5) nearly every later commit folds.
    assert sum(f is not None for _, f, _ in every[first + 1 :]) >= 0.8 * len(later)
    # With them at most every other one does: a turn (~730 tokens) is under a batch.
    folding = [f for _, f, _ in later if f is not None]
    assert 0 < len(folding) <= len(later) // 2 + 1
    # Every batch holds at least a batch's tokens.
    assert all(f >= BATCH for f in folding)


def test_a_waiting_commit_says_why_in_its_notes():
    waiting = [notes for total, f, notes in _folds() if f is None and total > THRESHOLD]
    assert waiting  # the session sits over the threshold between batches
    for notes in waiting:
        assert any(
            "could not reach the threshold" in n and "(min_run_share)" in n for n in notes
        ), notes


def test_a_larger_share_folds_less_often():
    small = sum(f is not None for _, f, _ in _folds(min_run_share=1.0))
    large = sum(f is not None for _, f, _ in _folds(min_run_share=2.5))
    assert 0 < large < small


def test_a_run_that_can_reach_the_target_is_folded_at_any_size():
    # A one-turn tail: the first commit over the threshold can fold down to the target,
    # so it folds a run shorter than the batch (the whole threshold here).
    pipeline = Pipeline.of(
        [Summarize(threshold_tokens=THRESHOLD, keep_tail_turns=1, min_run_share=2.5)]
    )
    runs = drive(Script(_busy(6)), pipeline)
    check_commits(runs, pipeline)
    folded = [
        (c.total_tokens, int(m.group(2)))
        for c in (gen.commit for _, gen, _ in runs)
        for n in c.notes
        if (m := _FOLDED.match(n))
    ]
    assert folded
    total, run = folded[0]
    assert run < THRESHOLD and total <= 0.6 * THRESHOLD


def test_the_share_is_a_parameter_and_a_negative_one_is_refused():
    assert Summarize().min_run_share == 1.0
    assert Summarize(min_run_share=0).min_run_share == 0.0
    with pytest.raises(ConfigError, match="min_run_share"):
        Summarize(min_run_share=-0.1)
