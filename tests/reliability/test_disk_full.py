"""Probe: a full disk is one line naming what could not be written and what to do,
never a traceback, and a compaction lands whole or not at all.

The disk is a real one: a 6 MB tmpfs mounted in a user and mount namespace of the
test's own (``unshare --user --map-root-user --mount``, no privilege needed where user
namespaces are enabled — the test says why it skips where they are not), filled to
~100 KB free after a store was made on it.  Then ``import``, ``fork``, ``store copy``,
``view --export``, ``rerender --out``, ``tune --out`` and ``compact`` run as real
processes against it.

Before issue 25: ``import`` ended in "database or disk is full" and then "cannot
rollback - no transaction is active" tracebacks, the others in tracebacks too, and
``compact`` stored its boundary and restore nodes and moved HEAD before failing to
store its commit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _cli import tau_sessions

WORKER = Path(__file__).with_name("_diskfull.py")


def _namespaces() -> str | None:
    """Why a private tmpfs cannot be mounted here, or None."""
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
         "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"user namespaces are not available here: {probe.stderr.strip()[:200]}"
    return None


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    why = _namespaces()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("full")
    small = tau_sessions(root / "src", 1, start=30)
    big = tau_sessions(root / "src", 60, start=40)
    disk = root / "disk"
    disk.mkdir()
    script = (
        f'mount -t tmpfs -o size=6m tmpfs "{disk}" && '
        f'exec "{sys.executable}" "{WORKER}" "{disk}" "{small}" "{big}"'
    )
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


NAMES = ["import", "fork", "store copy", "view --export", "rerender --out", "tune --out", "compact"]


@pytest.mark.parametrize("i", range(len(NAMES)), ids=NAMES)
def test_one_line_never_a_traceback(report, i):
    run = report["runs"][i]
    err = run["stderr"]
    assert "Traceback" not in err, err
    if run["code"] != 0:
        lines = [line for line in err.splitlines() if ": error: " in line]
        assert run["code"] == 1 and len(lines) == 1, err
        assert any(w in lines[0] for w in ("full", "space", "too large")), lines[0]


def test_the_big_import_did_not_fit(report):
    assert report["runs"][0]["code"] == 1  # the probe is about a disk that is full


def test_the_store_is_intact(report):
    assert report["integrity"] == "ok"


def test_a_compaction_lands_whole_or_not_at_all(report):
    code = report["runs"][-1]["code"]
    mid, after = report["mid"], report["after"]
    if code == 0:
        assert after[1] > mid[1] and after[2] > mid[2] and after[0] != mid[0]
    else:
        assert after == mid, (mid, after)


def test_nothing_half_written_is_left(report):
    assert not report["page"]  # the export did not fit: no page, not half a page
    assert not [n for n in report["hidden"] if n.endswith((".tmp", ".lock"))], report["hidden"]
