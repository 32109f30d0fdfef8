"""The shipped cache-aware presets never bill more than no rules.

On the first of these recorded Claude Code sessions the `default` preset used to cost
1.011 times the recording's prompts with cache pricing (benches/README.md, "Quality
against cost"): aging and capping rewrote the cached conversation for savings that the
few requests left never paid back.  With the cache ledger each rewrite waits until it
pays, so the rules' prompts cost at most the recording's.  On the second the ledger
first took ten stubs for 120 tokens each where they held up to 2,000 characters of
identifiers: the aging it judged paying cost 1.005 times no rules."""

from __future__ import annotations

import pytest

from ctxrules.batch import ReplayOptions, session_data
from ctxrules.batch.session import replay_detail
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.store import MemoryStore

SESSION = "claude-code-jsonl/entirecli/a6_e4c2a0fbd1_0_full.jsonl"
STUBS = "claude-code-jsonl/agentv/7a_d2528cc37f_0_full.jsonl"


def _data(corpus, path):
    store = MemoryStore()
    import_paths(store, [str(corpus / path)])
    (info,) = store.list_sessions()
    return session_data(store, info.id)


@pytest.fixture(scope="module")
def data(corpus):
    return _data(corpus, SESSION)


@pytest.mark.parametrize("preset", ["default", "claude-code", "lean"])
@pytest.mark.parametrize("path", [SESSION, STUBS])
def test_a_cache_aware_preset_bills_no_more_than_no_rules(corpus, path, preset):
    data = _data(corpus, path)
    record = replay_detail(data, ReplayOptions.of(PipelineConfig.preset(preset))).record
    plain, rules = record["plain"]["input_cost_usd"], record["rules"]["input_cost_usd"]
    assert plain > 0
    assert rules <= plain, f"{preset}: {rules / plain:.4f} × no rules"


def test_without_the_ledger_the_previous_default_rules_bill_more(data):
    # The rules of the previous default (aging with a 3-turn tail into stubs naming
    # 1,000 characters of identifiers), none of them cache-aware: on this session they
    # rewrite the cache for savings that are never paid back.
    config = PipelineConfig.preset("default")
    for rule in ("result_cap", "tool_aging", "idle_clearing"):
        config = config.with_params(rule, cache_aware=False)
    config = config.with_params("tool_aging", tail_turns=3, stub_identifier_chars=1000)
    record = replay_detail(data, ReplayOptions.of(config)).record
    assert record["rules"]["input_cost_usd"] > record["plain"]["input_cost_usd"]
