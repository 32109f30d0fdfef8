"""Tokens saved per rule (``ctxrules.commit.savings``): each derive records which rule
wrote each item reason, the store keeps that map beside the commit (not in its id), and
``rule_savings`` credits each changed item to the rule that decided its form."""

from __future__ import annotations

import pytest
from tests.presets import EVERY_RULE

from ctxrules import dag
from ctxrules.commit import (
    Pipeline,
    derive_commit,
    load_commit,
    make_commit,
    persist,
    reason_rules,
    rule_savings,
)
from ctxrules.importers import import_paths
from ctxrules.model import ContextCommit, ContextItem
from ctxrules.ruleapi import RuleContext
from ctxrules.rules.result_cap import ResultCap
from ctxrules.rules.summarize import Summarize
from ctxrules.rules.tool_aging import ToolAging
from ctxrules.store import MemoryStore

CC = "claude-code-jsonl/reliability_coverage-test-fix.jsonl"


def _item(node: str, state: str, tokens: int, reason: str, role: str = "tool") -> ContextItem:
    return ContextItem(source_node_id=node, role=role, state=state, tokens=tokens, reason=reason)


def test_each_item_is_credited_to_the_rule_that_wrote_its_reason():
    commit = ContextCommit(
        id="c",
        session_id="s",
        head_node_id="n9",
        rules_version="rv",
        items=(
            _item("n1", "full", 40, "new", role="user"),  # unchanged: nothing saved
            _item("n2", "aged", 10, "tail_window"),  # 100 → 10
            _item("n3", "full", 30, "result_cap:1000"),  # capped, still full: 80 → 30
            _item("n4", "summarized", 0, "summarized:2_items"),  # 50 folded
            _item("n5", "summarized", 0, "summarized:2_items"),  # 60 folded
            _item("sm_1", "summary", 25, "summarized:2_items", role="assistant"),  # costs 25
            _item("n6", "cleared", 5, "someone_elses"),  # no rule wrote it: 20 → 5
            _item("n7", "full", 12, "new", role="user"),  # not in the plain branch
        ),
    )
    plain = {"n1": 40, "n2": 100, "n3": 80, "n4": 50, "n5": 60, "n6": 20}
    rules = {
        "tail_window": "tool_aging",
        "result_cap:1000": "result_cap",
        "summarized:2_items": "summarize",
    }
    assert rule_savings(commit, plain, rules) == {
        "other": 15 - 12,
        "result_cap": 50,
        "summarize": 50 + 60 - 25,
        "tool_aging": 90,
    }


@pytest.fixture
def imported(corpus):
    store = MemoryStore()
    (res,) = import_paths(store, [str(corpus / CC)])
    return store, res.id


def _plain(store, sid, head, pipeline: Pipeline) -> dict[str, int]:
    branch = dag.branch_path(store, sid, head)
    gen = derive_commit(
        None, branch, session_id=sid, head_node_id=head, pipeline=pipeline.with_rules([]), now=0.0
    )
    return {it.source_node_id: it.tokens for it in gen.commit.items}


@pytest.mark.parametrize(
    "rules",
    [
        [ResultCap(max_tool_result_chars=200)],
        [ToolAging(tail_turns=1, step_turns=1)],
        [Summarize(threshold_tokens=2000, target_ratio=0.5, keep_tail_turns=1)],
    ],
    ids=lambda rules: rules[0].name,
)
def test_one_rule_alone_is_credited_with_the_whole_saving(imported, rules):
    store, sid = imported
    pipeline = Pipeline.of(rules)
    head = store.get_session(sid).head
    commit = make_commit(sid, now=1e10, store=store, config=pipeline)
    plain = _plain(store, sid, head, pipeline)
    saved = rule_savings(commit, plain, reason_rules(store, sid))
    whole = sum(plain.values()) - commit.total_tokens
    assert whole > 0
    assert saved == {rules[0].name: whole}


def test_the_map_is_kept_beside_the_commit_not_in_it(imported, corpus, monkeypatch):
    store, sid = imported
    config = EVERY_RULE  # every rule fires (tests/presets.py)
    commit = make_commit(sid, now=1e10, store=store, config=config)
    reasons = reason_rules(store, sid)
    changed = {it.reason for it in commit.items if it.state != "full"}
    assert changed and changed <= set(reasons)
    assert set(reasons.values()) <= set(config.pipeline)
    assert reasons["tail_window"] == "tool_aging"
    row = store.commit_chain(commit.id)[-1]
    assert persist.row_reasons(row) == reasons
    persist.clear_cache()
    assert load_commit(commit.id, store=store) == commit
    # The id does not depend on the map: the same commit made with none recorded.
    monkeypatch.setattr(RuleContext, "_wrote", lambda self, reason: None)
    other = MemoryStore()
    import_paths(other, [str(corpus / CC)])
    again = make_commit(sid, now=1e10, store=other, config=config)
    assert reason_rules(other, sid) == {}
    assert again == commit
