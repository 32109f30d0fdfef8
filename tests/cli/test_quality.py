"""``ctxrules quality``: the needed-fact recall of the session's replay and the library's
second-line report, as JSON or as a table, and one-line errors."""

from __future__ import annotations

import json

import msgspec

from ctxrules.batch import ReplayOptions, session_data
from ctxrules.batch.session import replay_detail
from ctxrules.cli import main
from ctxrules.config import PipelineConfig
from ctxrules.quality import CATEGORIES, check_quality
from ctxrules.store import open_store

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
NOW = "2033-05-18T03:33:20Z"  # 2,000,000,000 seconds


def test_json_is_the_replay_and_the_library_report(cli_import, capsys):
    store, (sid,) = cli_import(CC)
    argv = ["quality", sid[:8], "--store", store, "--preset", "aggressive", "--now", NOW]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    config = PipelineConfig.preset("aggressive")
    st = open_store(store)
    try:
        done = replay_detail(session_data(st, sid), ReplayOptions.of(config))
        expected = check_quality(sid, now=2e9, store=st, config=config, provider="anthropic")
    finally:
        st.close()
    rules = done.record["rules"]["quality"]
    assert out["recall"]["needed"] == rules["needed"] == done.rules_recall.needed > 0
    assert out["recall"]["kept"] == done.rules_recall.kept
    assert out["recall"]["lost_count"] == len(out["recall"]["lost"]) == len(done.rules_recall.lost)
    assert len(out["recall"]["requests"]) == len(done.rules_recall.requests)
    assert out["no_rules_recall"]["kept"] == out["no_rules_recall"]["needed"]
    assert out["tokens"]["prompt_tokens"] == done.record["rules"]["prompt_tokens"]
    assert out["checks"] == json.loads(msgspec.json.encode(expected))
    assert out["checks"]["folded_nodes"] > 0 and list(out["checks"]["categories"]) == list(
        CATEGORIES
    )

    assert main(argv) == 0
    text = capsys.readouterr().out
    r = done.rules_recall
    assert f"needed facts kept: {r.kept:,} of {r.needed:,}" in text
    assert f"older facts: {r.older_kept:,} of {r.older_needed:,}" in text
    if r.lost:
        assert f"lost ({len(r.lost)}):" in text
        first = r.lost[0]
        assert f"from {first.source}, needed by {first.needed_by}" in text
    assert f"({expected.folded_nodes} folded nodes)" in text


def test_off_keeps_every_needed_fact(cli_import, capsys):
    store, (sid,) = cli_import(CC)
    argv = ["quality", sid, "--store", store, "--now", NOW, "--preset", "off"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["recall"]["kept"] == out["recall"]["needed"] > 0 and out["recall"]["lost"] == []
    assert out["tokens"]["share"] == 1.0 and out["tokens"]["billed_input_ratio"] == 1.0
    assert out["checks"]["folded_nodes"] == 0
    assert main([*argv, "--provider", "gemini", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["provider"] == "gemini"


def test_errors_are_one_line(cli_import, capsys, tmp_path):
    store, (sid,) = cli_import(CC)
    for argv in (
        ["quality", "s_nope", "--store", store],
        ["quality", sid, "--store", store, "--provider", "nope"],
        ["quality", sid, "--store", store, "--preset", "nope"],
        ["quality", sid, "--store", str(tmp_path / "no-store")],
    ):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("ctxrules quality: error: ") and err.count("\n") == 1, err
