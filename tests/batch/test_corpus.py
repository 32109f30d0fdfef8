"""The corpus's first files (``tests.corpus.FIRST``) replayed under the aggressive
preset (every rule fires): no session fails and no commit breaks an invariant or the
tool pairing; the recorded figures are the usage the transcripts hold (read here with
plain JSON / YAML); the replay with no rules matches it, and matches
``replay.compare_usage`` (request_for + explain, another path to the same requests);
the tokens saved per rule add up to what the rules saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.corpus import ESTIMATE_MISSES, FIRST
from tests.presets import EVERY_RULE

from ctxrules.batch import ReplayOptions, replay_session, rerender, session_data
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.requests import compare_usage
from ctxrules.store import MemoryStore

from .conftest import OPTIONS

RULES = set(PipelineConfig.preset("aggressive").pipeline)


@pytest.fixture(scope="module")
def records(first_corpus: Path) -> dict[str, dict[str, Any]]:
    result = rerender([str(first_corpus)], OPTIONS, jobs=2)
    assert result.sessions == result.replayed == 211
    return {r["session"]: r for r in result.records}


@pytest.fixture(scope="module")
def sessions(corpus: Path) -> dict[str, str]:
    """The corpus file of every session id (an import of each file on its own)."""
    out = {}
    for rel in FIRST:
        for res in import_paths(MemoryStore(), [str(corpus / rel)]):
            out[res.id] = rel
    return out


def test_no_session_fails_and_nothing_breaks_an_invariant(records):
    assert [r["error"] for r in records.values() if "error" in r] == []
    assert [v for r in records.values() for v in r["violations"]] == []
    # Every request was checked: a commit per request at least, in both replays.
    assert sum(r["requests"] for r in records.values()) > 2000


def test_the_savings_per_rule_add_up_to_what_the_rules_saved(records):
    total: dict[str, int] = {}
    for r in records.values():
        saved = r["rules"]["saved_by_rule"]
        assert set(saved) <= RULES, saved
        assert sum(saved.values()) == r["plain"]["item_tokens"] - r["rules"]["item_tokens"]
        for k, v in saved.items():
            total[k] = total.get(k, 0) + v
    # The cache-aware preset folds; its aging, whose stubs name 2,000 characters of
    # identifiers, seldom pays on these sessions (hardly ever on the first files).
    assert total.get("summarize", 0) > 0


def test_the_savings_of_every_rule_add_up(corpus):
    """The same sum where aging and folding both act: the Claude Code sessions of the
    first files under ``aggressive``'s budgets without the ledger (``EVERY_RULE``)."""
    store = MemoryStore()
    for rel in FIRST:
        if rel.startswith("claude-code-jsonl/"):
            import_paths(store, [str(corpus / rel)])
    total: dict[str, int] = {}
    for info in store.list_sessions():
        r = replay_session(session_data(store, info.id), ReplayOptions.of(EVERY_RULE))
        saved = r["rules"]["saved_by_rule"]
        assert sum(saved.values()) == r["plain"]["item_tokens"] - r["rules"]["item_tokens"]
        for k, v in saved.items():
            total[k] = total.get(k, 0) + v
    # (Under a one-turn tail, aging takes a result the turn the cap would: the newest
    # result is not capped, so the cap's savings are credited to aging.)
    assert {"tool_aging", "summarize"} <= {k for k, v in total.items() if v > 0}


def _claude_code_usage(path: Path) -> int:
    """Prompt sizes of the main conversation's API responses (not the sub-agents')."""
    prompts: dict[str, int] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        msg = entry.get("message") or {}
        if entry.get("type") == "assistant" and not entry.get("isSidechain"):
            u = msg.get("usage")
            if isinstance(u, dict):
                prompts[msg["id"]] = (
                    u["input_tokens"]
                    + u.get("cache_creation_input_tokens", 0)
                    + u.get("cache_read_input_tokens", 0)
                )
    return sum(prompts.values())


def _walk(value: Any):
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def _openhands_usage(path: Path) -> int:
    prompts = {
        o["model_response"]["id"]: o["model_response"]["usage"]["prompt_tokens"]
        for o in _walk(json.loads(path.read_text()))
        if isinstance(o.get("model_response"), dict) and "usage" in o["model_response"]
    }
    return sum(prompts.values())


def _cassette_usage(path: Path) -> dict[str, int]:
    """The last recorded call's usage: the response to the request the session ends at."""
    body = yaml.safe_load(path.read_text())["interactions"][-1]["response"]["parsed_body"]
    if "usageMetadata" in body:
        return {"prompt": body["usageMetadata"]["promptTokenCount"]}
    u = body["usage"]
    if "prompt_tokens" in u:
        cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        return {"prompt": u["prompt_tokens"], "cached": cached, "out": u["completion_tokens"]}
    read, write = u.get("cache_read_input_tokens") or 0, u.get("cache_creation_input_tokens") or 0
    return {"prompt": u["input_tokens"] + read + write}


def test_the_recorded_figures_are_the_transcripts_usage(records, sessions, corpus):
    checked = set()
    for sid, rel in sessions.items():
        path, fmt = corpus / rel, records[sid]["format"]
        recorded = records[sid]["recorded"]
        if fmt == "claude-code":
            assert recorded["prompt_tokens"] == _claude_code_usage(path)
        elif fmt == "openhands":
            assert recorded["prompt_tokens"] == _openhands_usage(path)
        elif fmt == "cassette":
            assert recorded["requests"] == 1
            assert recorded["prompt_tokens"] == _cassette_usage(path)["prompt"]
        else:  # tau-bench and SWE-agent runs record no usage
            assert recorded["requests"] == recorded["prompt_tokens"] == 0
            continue
        checked.add(fmt)
    assert checked == {"claude-code", "openhands", "cassette"}


#: How close the replay with no rules comes to what was billed (tests/providers:
#: test_estimate_fidelity holds the estimator to these per request).
TARGET = {"anthropic": 0.08, "gemini": 0.08, "openai-chat": 0.03}


def test_the_replay_with_no_rules_matches_the_recorded_usage(records, sessions):
    for sid, r in records.items():
        recorded = r["recorded"]["prompt_tokens"]
        replayed = r["plain"]["prompt_tokens_where_recorded"]
        if Path(sessions[sid]).name in ESTIMATE_MISSES:  # a known miss (and why): still one
            assert abs(replayed / recorded - 1) > TARGET[r["provider"]], sessions[sid]
            continue
        if r["format"] == "claude-code":
            # The harness prefix is fitted on the first request; the rest is the estimate.
            assert r["harness_prefix_tokens"] > 10_000
            assert abs(replayed / recorded - 1) <= 0.03, (r["session"], replayed, recorded)
        elif r["format"] == "cassette":
            assert r["harness_prefix_tokens"] == 0  # the cassette holds the whole request
            assert abs(replayed / recorded - 1) <= TARGET[r["provider"]], r["session"]


def test_the_replay_with_no_rules_is_what_compare_usage_estimates(records, first_corpus):
    """OpenHands' later requests are over-estimated (its recorded prompts grow less than
    the observations it keeps): whatever the estimate, both paths must agree on it."""
    store = MemoryStore()
    files = [first_corpus / "claude-code-jsonl", first_corpus / "openhands-trajectory"]
    for res in import_paths(store, [str(f) for f in files]):
        r = records[res.id]
        rows = [
            row
            for row in compare_usage(
                store, res.id, r["provider"], config=PipelineConfig.preset("off")
            )
            if row.frame == "main"
        ]
        assert len(rows) == r["recorded"]["requests"]
        assert sum(row.input_tokens for row in rows) == r["plain"]["prompt_tokens_where_recorded"]
        if r["requests"] == len(rows):  # every request recorded: the cache figures compare
            assert sum(row.cache_read_tokens for row in rows) == r["plain"]["cache_read_tokens"]


def test_cost_is_the_usage_at_the_published_prices(records, sessions, corpus):
    (sid,) = [s for s, rel in sessions.items() if "openai-chat/test_tool_search" in rel]
    u = _cassette_usage(corpus / sessions[sid])
    # gpt-5.4-mini: $0.75 input, $0.075 cached input, $4.50 output per million tokens.
    expected = ((u["prompt"] - u["cached"]) * 0.75 + u["cached"] * 0.075 + u["out"] * 4.50) / 1e6
    assert records[sid]["model"] == "gpt-5.4-mini"
    assert records[sid]["recorded"]["cost_usd"] == pytest.approx(expected, abs=1e-6)
    assert records[sid]["plain"]["cost_usd"] > 0
    # Gemini has no prices in the table: its cost is unknown, not zero.
    gemini = [r for r in records.values() if r["provider"] == "gemini"]
    assert gemini and all(r["plain"]["cost_usd"] is None for r in gemini)


def test_quality_and_levels_are_reported_per_session(records):
    for r in records.values():
        q, plain = r["rules"]["quality"], r["plain"]["quality"]
        assert 0 <= q["kept"] <= q["needed"] == plain["needed"]
        assert 0 <= q["older_kept"] <= q["older_needed"] == plain["older_needed"]
        assert q["lost_count"] == q["needed"] - q["kept"] and len(q["lost"]) <= 20
        # With no rules every needed fact is in the request (no corpus file compacted
        # itself, so nothing was lost before the rules).
        assert plain["kept"] == plain["needed"]
        checks = q["checks"]
        assert checks is not None and 0 <= checks["found"] <= checks["total"]
        assert sum(r["rules"]["levels"].values()) == r["requests"]
        assert r["rules"]["compactions"] >= 0 and r["recorded_compactions"] == 0
    assert sum(r["rules"]["quality"]["needed"] for r in records.values()) > 1000
    folded = [r for r in records.values() if r["rules"]["quality"]["checks"]["folded_nodes"]]
    assert len(folded) > 50  # summarize folded history in many sessions: facts were checked
