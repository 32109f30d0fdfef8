"""``--now`` takes epoch seconds or an ISO 8601 time (no offset: UTC) on every command
that has it; non-finite and out-of-range values are refused as usage errors."""

from __future__ import annotations

import argparse
import json

import pytest

from ctxrules.cli import build_parser, main

NEW_YEAR = 1767225600.0  # 2026-01-01T00:00:00Z, from `date -u -d 2026-01-01 +%s`

CC = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1767225600", NEW_YEAR),
        ("1.7672256e9", NEW_YEAR),
        ("0", 0.0),
        ("2026-01-01T00:00:00Z", NEW_YEAR),
        ("2026-01-01T00:00:00z", NEW_YEAR),
        ("2026-01-01T00:00:00+00:00", NEW_YEAR),
        ("2026-01-01T01:00:00+01:00", NEW_YEAR),
        ("2025-12-31T19:00:00-05:00", NEW_YEAR),
        ("2026-01-01T00:00:00.250Z", NEW_YEAR + 0.25),
        ("2026-01-01 00:00:00Z", NEW_YEAR),
        ("2026-01-01T00:00:00", NEW_YEAR),  # no offset: UTC, as transcripts are read
        ("2026-01-01T00:00", NEW_YEAR),
        ("2026-01-01", NEW_YEAR),
        (" 2026-01-01T00:00:00Z ", NEW_YEAR),
    ],
)
def test_now_reads_epoch_seconds_and_iso_8601(text, expected):
    assert build_parser().parse_args(["commit", "s_x", "--now", text]).now == expected


@pytest.mark.parametrize(
    "text",
    [
        "nan",
        "inf",
        "-inf",
        "1e400",
        "1e300",  # finite, but no one's clock
        "-1e300",
        "",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-01-01T25:00:00Z",
        "2026-01-01T00:00:00+25:00",
        "Z",
    ],
)
def test_now_refuses_what_is_not_a_time(text, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["commit", "s_x", f"--now={text}"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "ISO 8601" in err and repr(text) in err


def test_every_now_option_takes_iso_8601():
    """Every subcommand with --now parses it with the same type."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    with_now = {
        name: p
        for name, p in sub.choices.items()
        if any("--now" in a.option_strings for a in p._actions)
    }
    assert {"commit", "render"} <= set(with_now)
    types = set()
    for name, p in with_now.items():
        (now,) = [a for a in p._actions if "--now" in a.option_strings]
        types.add(now.type)
        assert "ISO 8601" in (now.help or ""), name
    assert len(types) == 1


@pytest.fixture
def imported(cli_import):
    store, (sid,) = cli_import(CC)
    return store, sid


def _json(capsys, *argv):
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_an_iso_now_is_the_same_instant_as_its_epoch_seconds(imported, capsys):
    store, sid = imported
    # HEAD is the recorded final answer; the node before it has a next request.
    head = ["--head", _json(capsys, "log", sid, "--store", store, "--json")[-1]["predecessor"]]
    base = ["commit", sid, "--store", store, "--preset", "aggressive", "--json", *head]
    iso = _json(capsys, *base, "--now", "2026-01-01T01:00:00+01:00")
    assert iso["created_at"] == NEW_YEAR
    assert _json(capsys, *base, "--now", str(int(NEW_YEAR)))["id"] == iso["id"]
    render = ["render", sid, "--store", store, "--provider", "anthropic", "--json"]
    render += ["--preset", "aggressive", *head]
    by_iso = _json(capsys, *render, "--now", "2026-01-01T00:00:00Z")
    assert by_iso == _json(capsys, *render, "--now", "1767225600")
    assert by_iso["commit"] == iso["id"]


def test_a_bad_now_is_one_line_naming_the_forms(imported, capsys):
    store, sid = imported
    with pytest.raises(SystemExit) as exc:
        main(["commit", sid, "--store", store, "--now", "next tuesday"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--now" in err and "ISO 8601" in err
    assert "'next tuesday'" in err and "ctxrules commit --help" in err
