"""Probe: a damaged SQLite store (bytes flipped inside its pages, not its header) gives
a one-line error naming the store and what to do, never a traceback, for every
command that reads or writes it.  Seeded flips over a real imported store with
commits; each copy is opened fresh.

Before issue 25 about a quarter of the runs ended in a traceback (malformed database,
UTF-8 and MessagePack/JSON decode errors)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ctxrules.cli import main
from ctxrules.store import open_store

sys.path.insert(0, str(Path(__file__).parent))
from _cli import tau_sessions

WORKER = Path(__file__).with_name("_damage.py")


def test_flipped_bytes_give_one_line_errors(tmp_path, capsys):
    source = tau_sessions(tmp_path, 2, start=20)
    db = tmp_path / "store.db"
    assert main(["import", str(source), "--store", str(db)]) == 0
    store = open_store(str(db))
    sid = store.list_sessions()[0].id
    store.close()
    assert main(["commit", sid, "--store", str(db), "--now", "1767225600"]) == 0
    capsys.readouterr()
    # One file: the last connection closed checkpoints the WAL into it.
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    proc = subprocess.run(
        [sys.executable, str(WORKER), str(db), sid, "40", "2025"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # no crash of the interpreter either
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["runs"] == 40 * 7
    shown = result["tracebacks"]
    assert shown == [], f"{len(shown)} of {result['runs']} runs: {shown[:8]}"
