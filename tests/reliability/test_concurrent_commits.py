"""Generating the commit of a head is idempotent: several processes committing a new
head at once print one commit id and leave one row, and repeating ``commit --now X``
finds the commit made at X instead of appending an identical one."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from ctxrules.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from _cli import together

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
PROCESSES = 4


@pytest.fixture
def imported(tmp_path, corpus, capsys):
    store = str(tmp_path / "store")
    assert main(["import", str(corpus / CC), "--store", store, "--json"]) == 0
    (s,) = json.loads(capsys.readouterr().out)["sessions"]
    return store, s["id"]


def rows_at_head(store: str, sid: str) -> list[str]:
    conn = sqlite3.connect(Path(store) / "ctxrules.db")
    try:
        (head,) = conn.execute("SELECT head FROM sessions WHERE id = ?", (sid,)).fetchone()
        return [
            r[0]
            for r in conn.execute(
                "SELECT id FROM commits WHERE session_id = ? AND head_node_id = ?", (sid, head)
            )
        ]
    finally:
        conn.close()


def together_ids(*argv: str) -> list[str]:
    """Run ``ctxrules ARGV`` in several processes released at one moment; their ids."""
    return [json.loads(out)["id"] for out in together(PROCESSES, *argv)]


@pytest.mark.parametrize("now", [None, "1767225600"], ids=["wall-clock", "fixed-now"])
def test_concurrent_commits_of_a_new_head_make_one_row(imported, now):
    store, sid = imported
    extra = [] if now is None else ["--now", now]
    ids = together_ids("commit", sid, "--store", store, "--json", *extra)
    assert len(set(ids)) == 1, f"{len(set(ids))} different commits for one head"
    assert rows_at_head(store, sid) == ids[:1]


def test_repeating_commit_now_finds_the_same_commit(imported, capsys):
    store, sid = imported
    ids = []
    for _ in range(3):
        assert main(["commit", sid, "--store", store, "--now", "1000", "--json"]) == 0
        ids.append(json.loads(capsys.readouterr().out)["id"])
    assert len(set(ids)) == 1 and rows_at_head(store, sid) == ids[:1]
    # a later time runs the rules again: one more commit, on top of the first
    assert main(["commit", sid, "--store", store, "--now", "90000", "--json"]) == 0
    later = json.loads(capsys.readouterr().out)
    assert later["parent_ids"] == ids[:1] and len(rows_at_head(store, sid)) == 2
