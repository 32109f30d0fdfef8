"""Probe: a rerender's processes die with it.  The command is started in a session of
its own (as a terminal starts a job), its local pool of two workers gets to work, and
the command is killed — SIGKILL, so none of its own clean-up runs, and SIGTERM; then
every process of that session must be gone: the workers, the fork server and the
resource tracker (before issue 25 these four lived on, ~113 MB a worker, the tracker
ignoring SIGTERM).  An error that ends a run (its journal cannot grow) leaves no
process either, and is one line."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _cli import tau_sessions

RERENDER = [sys.executable, "-m", "ctxrules", "rerender"]


def in_session(sid: int) -> list[int]:
    """The processes of session ``sid`` (field 6 of /proc/PID/stat), zombies aside."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()  # after "pid (comm)"
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry))
    return found


def survivors(sid: int, wait: float = 60.0) -> list[int]:
    """The processes of ``sid`` still there once they had ``wait`` seconds to end."""
    deadline = time.monotonic() + wait
    while (left := in_session(sid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return tau_sessions(tmp_path_factory.mktemp("src"), 40, start=60)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killing_rerender_leaves_no_process(tmp_path, source, sig):
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        [*RERENDER, str(source), "--jobs", "2", "--quiet", "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    sid = proc.pid
    journal = tmp_path / ".out.jsonl.partial"
    try:
        deadline = time.monotonic() + 180
        while not (journal.exists() and journal.read_bytes().count(b"\n")):
            assert proc.poll() is None and time.monotonic() < deadline, "no session finished"
            time.sleep(0.02)
        assert len(in_session(sid)) >= 4  # the command, two workers, the fork server…
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
        left = survivors(sid)
        assert not left, [Path(f"/proc/{p}/cmdline").read_bytes()[:120] for p in left]
    finally:
        for pid in in_session(sid):  # whatever the test left, it started
            os.kill(pid, signal.SIGKILL)


def _small_files() -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


#: The largest file the run of the error probe may write: a few sessions' lines.
LIMIT = 8000


def test_a_run_ended_by_an_error_leaves_no_process(tmp_path, source):
    # Past a few sessions the journal cannot grow (EFBIG, RLIMIT_FSIZE): the run ends
    # with that error, its workers busy.
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        [*RERENDER, str(source), "--jobs", "2", "--quiet", "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_small_files,
    )
    sid = proc.pid
    try:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 1 and b"Traceback" not in err, err[-2000:]
        assert b"File too large" in err
        assert not survivors(sid)
    finally:
        for pid in in_session(sid):
            os.kill(pid, signal.SIGKILL)
