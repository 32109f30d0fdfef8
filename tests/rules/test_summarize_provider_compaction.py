"""Summarize and a provider's own compaction: the items before the latest effective
compaction block are already compacted for its vendor (which reads nothing before it),
so they are neither counted against the threshold nor folded again, and the item
holding the block is kept (docs/provider-compaction.md)."""

from __future__ import annotations

from typing import Any

from ctxrules.commit import Pipeline, derive_with_summaries
from ctxrules.model import CompactionBlock, ContentBlock, TextBlock
from ctxrules.rules import Summarize
from providers.conftest import conversation

OLD_TEXT = "an old and long exchange about the header layout " * 40


def _calls(answer: list[ContentBlock], *, old: int = 8, after: int = 2, after_text: str = "ok"):
    turns: list[tuple[str, Any]] = []
    for i in range(old):
        turns += [("user", f"old question {i}"), ("assistant", f"{i}: {OLD_TEXT}")]
    turns += [("user", "go on"), ("assistant", answer)]
    for i in range(after):
        turns += [("user", f"new question {i}"), ("assistant", f"{i}: {after_text}")]
    return conversation(turns)


def _derive(answer: list[ContentBlock], rule: Summarize, **kw):
    calls = _calls(answer, **kw)
    commit = derive_with_summaries(
        None,
        calls,
        session_id="s",
        head_node_id=calls[-1].id,
        pipeline=Pipeline.of([rule]),
        now=100.0,
    ).commit
    assert rule.check_promise(commit) == []
    return commit, calls[2 * kw.get("old", 8) + 1].id  # the answer's node


RULE = dict(threshold_tokens=1500, keep_tail_turns=1, summarizer="extractive")
SUMMARY = CompactionBlock(content="Summary: the header layout is settled.")


def test_without_a_provider_compaction_the_old_part_is_folded():
    commit, _ = _derive([TextBlock(text="continuing")], Summarize(**RULE))
    assert any(it.state == "summarized" for it in commit.items)


def test_items_before_an_effective_compaction_are_not_counted_nor_folded():
    commit, answer = _derive([SUMMARY, TextBlock(text="continuing")], Summarize(**RULE))
    assert commit.total_tokens > RULE["threshold_tokens"]  # the commit holds it all ...
    assert all(it.state == "full" for it in commit.items)  # ... and nothing was folded
    assert not [n for n in commit.notes if n.startswith("summarize: ")]
    assert next(it for it in commit.items if it.source_node_id == answer).blocks[0] == SUMMARY


def test_a_failed_provider_compaction_changes_nothing():
    failed, _ = _derive(
        [CompactionBlock(content=None), TextBlock(text="continuing")], Summarize(**RULE)
    )
    plain, _ = _derive([TextBlock(text="continuing")], Summarize(**RULE))
    assert [it.state for it in failed.items] == [it.state for it in plain.items]


def test_only_what_follows_the_compaction_is_folded_and_its_item_is_kept():
    commit, answer = _derive(
        [SUMMARY, TextBlock(text="continuing")],
        Summarize(**RULE),
        after=8,
        after_text=OLD_TEXT,
    )
    pos = {it.source_node_id: p for p, it in enumerate(commit.items)}
    before = [it for it in commit.items if pos[it.source_node_id] < pos[answer]]
    assert all(it.state == "full" for it in before)
    assert commit.items[pos[answer]].state == "full"
    folded = [it for it in commit.items if it.state == "summarized"]
    assert folded and all(pos[it.source_node_id] > pos[answer] for it in folded)
    summary = next(p for p, it in enumerate(commit.items) if it.state == "summary")
    assert summary > pos[answer]  # the vendor reads it: it is after the block
