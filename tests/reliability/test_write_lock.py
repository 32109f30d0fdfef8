"""A long writer does not stop readers: while another process holds the store's write
lock, ``commit`` and ``render`` of a head whose commit exists still answer, and a
command that must write gives up after the busy timeout (``CTXRULES_BUSY_TIMEOUT``)
with one line naming the process that holds the lock and what to do."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctxrules.cli import main
from ctxrules.store import open_store

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


@pytest.fixture
def locked(tmp_path, corpus, capsys, monkeypatch):
    store = str(tmp_path / "store")
    assert main(["import", str(corpus / CC), "--store", store, "--json"]) == 0
    (s,) = json.loads(capsys.readouterr().out)["sessions"]
    assert main(["commit", s["id"], "--store", store, "--now", "100", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)["id"]
    # HEAD is the recorded final answer; its request is the commit at the node before it.
    assert main(["log", s["id"], "--store", store, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)[-1]
    assert main(["commit", s["id"], "--store", store, "--head", answer["predecessor"]]) == 0
    capsys.readouterr()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sqlite3, sys
                conn = sqlite3.connect({str(Path(store) / "ctxrules.db")!r}, isolation_level=None)
                conn.execute("BEGIN IMMEDIATE")
                print("locked", flush=True)
                sys.stdin.readline()
            """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    monkeypatch.setenv("CTXRULES_BUSY_TIMEOUT", "0.3")
    yield store, s["id"], made, holder
    holder.stdin.write("\n")
    holder.stdin.close()
    holder.wait(timeout=30)


def test_reads_do_not_wait_for_a_writer(locked, capsys):
    store, sid, made, _ = locked
    assert main(["commit", sid, "--store", store, "--json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["id"] == made
    assert main(["sessions", "--store", store, "--json"]) == 0
    head = json.loads(capsys.readouterr().out)[0]["head"]
    assert main(["render", sid, "--provider", "anthropic", "--store", store, "--for", head]) == 0
    assert json.loads(capsys.readouterr().out)["messages"]
    for command in (["sessions"], ["log", sid]):
        assert main([*command, "--store", store]) == 0
        capsys.readouterr()


def test_a_write_that_times_out_names_the_holder(locked, capsys):
    store, sid, _, holder = locked
    assert main(["commit", sid, "--store", store, "--now", "999999", "--json"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"pid {holder.pid}" in err and "0.3 s" in err and "CTXRULES_BUSY_TIMEOUT" in err


def test_a_bad_busy_timeout_is_a_clear_error(tmp_path, capsys, monkeypatch):
    open_store(tmp_path / "s").close()
    monkeypatch.setenv("CTXRULES_BUSY_TIMEOUT", "soon")
    assert main(["sessions", "--store", str(tmp_path / "s")]) == 1
    assert "CTXRULES_BUSY_TIMEOUT" in capsys.readouterr().err
