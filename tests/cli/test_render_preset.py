"""``ctxrules render`` takes the rule configuration as ``commit`` does: ``--preset`` or
``--config``, not both."""

from __future__ import annotations

import json

import pytest
from tests.presets import every_rule_file

from ctxrules.cli import main

CC = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"


@pytest.fixture
def session(cli_import):
    store, (sid,) = cli_import(CC)
    return store, sid


def _json(capsys, *argv):
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _before_head(capsys, store, sid):
    """HEAD is the recorded final answer (no next request): the node before it, an
    assistant turn whose tool results are in, has one."""
    return _json(capsys, "log", sid, "--store", store, "--json")[-1]["predecessor"]


@pytest.mark.parametrize("preset", ["off", "aggressive"])
def test_render_preset_renders_the_commit_that_preset_makes(session, capsys, preset):
    store, sid = session
    common = [sid, "--store", store, "--now", "2026-01-01T00:00:00Z", "--preset", preset]
    common += ["--head", _before_head(capsys, store, sid)]
    made = _json(capsys, "commit", *common, "--json")
    rendered = _json(capsys, "render", *common, "--provider", "anthropic", "--json")
    assert rendered["commit"] == made["id"]


def test_presets_change_what_is_sent_and_a_file_still_works(session, capsys, tmp_path):
    store, sid = session
    base = ["render", sid, "--store", store, "--provider", "openai-chat", "--json"]
    base += ["--now", "2026-01-01T00:00:00Z", "--head", _before_head(capsys, store, sid)]
    off = _json(capsys, *base, "--preset", "off")
    aggressive = _json(capsys, *base, "--preset", "aggressive")
    assert off["commit"] != aggressive["commit"]
    # aggressive's budgets without the cache ledger (tests/presets.py): on this
    # session's seconds-apart requests the shipped preset waits for a paying rewrite.
    every = _json(capsys, *base, "--config", every_rule_file(tmp_path))
    assert len(json.dumps(every["body"])) < len(json.dumps(off["body"]))
    cfg = tmp_path / "ctxrules.toml"
    cfg.write_text("pipeline = []\n", encoding="utf-8")
    by_file = _json(capsys, *base, "--config", str(cfg))
    assert by_file["body"] == off["body"]  # no rules either way


def test_preset_and_config_together_or_an_unknown_preset_is_one_line(session, capsys, tmp_path):
    store, sid = session
    base = ["render", sid, "--store", store, "--provider", "anthropic"]
    cfg = tmp_path / "ctxrules.toml"
    cfg.write_text("pipeline = []\n", encoding="utf-8")
    assert main([*base, "--preset", "off", "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--config or --preset, not both" in err
    assert main([*base, "--preset", "no-such-preset"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-preset" in err and "Traceback" not in err
