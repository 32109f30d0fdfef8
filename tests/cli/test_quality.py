"""``ctxrules quality``: the report of the library, as JSON or as a table, and one-line
errors."""

from __future__ import annotations

import json

import msgspec

from ctxrules.cli import main
from ctxrules.config import PipelineConfig
from ctxrules.quality import CATEGORIES, check_quality
from ctxrules.store import open_store

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
NOW = "2033-05-18T03:33:20Z"  # 2,000,000,000 seconds


def test_json_is_the_library_report(cli_import, capsys):
    store, (sid,) = cli_import(CC)
    argv = ["quality", sid[:8], "--store", store, "--preset", "aggressive", "--now", NOW]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    st = open_store(store)
    try:
        expected = check_quality(sid, now=2e9, store=st, config=PipelineConfig.preset("aggressive"))
    finally:
        st.close()
    assert out == json.loads(msgspec.json.encode(expected))
    assert out["folded_nodes"] > 0 and list(out["categories"]) == list(CATEGORIES)

    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"retained tokens: {expected.commit_tokens:,} of {expected.baseline_tokens:,}" in text
    for name in CATEGORIES:
        c = expected.categories[name]
        row = next(line for line in text.splitlines() if line.startswith(f"{name} "))
        assert row.split()[1:3] == [str(c.found), str(c.total)]
    missing = sum(len(c.missing) for c in expected.categories.values())
    assert f"missing ({missing}):" in text
    first = next(m for name in CATEGORIES for m in expected.categories[name].missing)
    assert first[:100] in text


def test_another_provider_and_a_session_without_folds(cli_import, capsys):
    store, (sid,) = cli_import(CC)
    argv = ["quality", sid, "--store", store, "--now", NOW, "--preset", "off"]
    assert main([*argv, "--provider", "gemini", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["provider"] == "gemini" and out["folded_nodes"] == 0
    assert out["retained_ratio"] == 1.0
    assert main(argv) == 0
    assert "nothing is folded in this commit" in capsys.readouterr().out


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
