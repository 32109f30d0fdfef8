"""``ctxrules stats``: the usage record and the breakdown of an imported session, checked
against the usage the transcript recorded (read here with plain JSON)."""

from __future__ import annotations

import json

from ctxrules.cli import main

CC = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"


def _recorded_prompt(corpus, message_id_of_head: str | None = None) -> dict[str, int]:
    """Prompt sizes per API message id, from the transcript's assistant lines."""
    out: dict[str, int] = {}
    for line in (corpus / CC).read_text().splitlines():
        entry = json.loads(line)
        msg = entry.get("message") or {}
        if entry.get("type") == "assistant" and isinstance(msg.get("usage"), dict):
            u = msg["usage"]
            out[msg["id"]] = (
                u["input_tokens"]
                + u.get("cache_creation_input_tokens", 0)
                + u.get("cache_read_input_tokens", 0)
            )
    return out


def _stats(capsys, *argv: str) -> dict:
    assert main(["stats", *argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_an_imported_session_is_measured_by_its_recorded_usage(cli_import, corpus, capsys):
    store, (sid,) = cli_import(CC)
    out = _stats(
        capsys,
        sid,
        "--store",
        store,
        "--now",
        "2026-01-01",
        "--model",
        "anthropic:claude-sonnet-4-20250514",
    )
    usage = out["usage"]
    assert usage["basis"] == "measured"
    # HEAD is the last answer: its request's recorded prompt size is the record.
    last_line = [
        json.loads(x)
        for x in (corpus / CC).read_text().splitlines()
        if json.loads(x).get("type") == "assistant"
    ][-1]
    assert usage["total_used"] == _recorded_prompt(corpus)[last_line["message"]["id"]]
    assert usage["calibration"] == round(usage["total_used"] / usage["estimated"], 4)
    cats = out["breakdown"]["categories"]
    assert sum(c["tokens"] for c in cats) == out["breakdown"]["window"] == usage["window"]
    assert sum(c["tokens"] for c in cats if c["kind"] == "used") == usage["total_used"]
    assert out["level"] in ("ok", "warn", "compact", "critical")


def test_another_model_means_an_estimate(cli_import, capsys):
    store, (sid,) = cli_import(CC)
    out = _stats(capsys, sid, "--store", store, "--model", "anthropic:claude-opus-4-1")
    assert out["usage"]["basis"] == "estimated"
    assert out["usage"]["total_used"] == out["usage"]["estimated"]
    assert "calibration" not in out["usage"]


def test_the_table_names_every_room(cli_import, capsys):
    store, (sid,) = cli_import(CC)
    assert main(["stats", sid, "--store", store, "--now", "2026-01-01"]) == 0
    text = capsys.readouterr().out
    for word in ("output_reserve", "compaction_buffer", "free", "window", "thresholds"):
        assert word in text
    assert main(["stats", sid, "--store", store, "--model", "gpt-4o"]) == 1
    assert "PROVIDER:MODEL" in capsys.readouterr().err
