"""The watchdog of a test PostgreSQL server: stops it when the process that started it dies.

``pg_ctl`` detaches the server from the test run (its own session, its parent init), so
a test run killed before its teardown (SIGKILL, an OOM kill, a CI timeout) would leave
the server and its ``/tmp/ctxrules-pg-*`` directory behind for good.  ``PostgresServer``
starts this script before the server, in a session of its own (a kill of the test
run's process group does not reach it):

    python _pg_watchdog.py OWNER_PID ROOT

It waits for its parent (``OWNER_PID``) to go, then stops the server whose data
directory is ``ROOT/data`` (an immediate shutdown, SIGKILL if that does not end it
within a few seconds; a frozen server is thawed first) and deletes ``ROOT``.  A normal
teardown stops the server itself (``stop`` here, if ``pg_ctl stop`` fails) and then ends
the watchdog with SIGTERM.  It imports
nothing from the test suite or ctxrules, so it starts in a few milliseconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

POLL_S = 0.2  # how often the parent is looked for
GRACE_S = 5.0  # how long an immediate shutdown may take before SIGKILL
START_S = 3.0  # how long a server still starting may take to write its pid file


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry))
    return found


def postmaster(data: Path) -> int | None:
    """The pid of the server running on ``data`` (checked against its command line, so a
    pid reused by another program is never signalled)."""
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return None
    return pid if str(data).encode() in cmdline else None


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return "Z"


def stop(root: Path, *, starting: bool = False) -> None:
    """Stop the server on ``root/data`` (if one runs) and delete ``root``; ``starting``:
    give a server that may be starting (no pid file yet) a moment to show itself."""
    data = root / "data"
    deadline = time.monotonic() + (START_S if starting else 0)
    pid = postmaster(data)
    while pid is None and time.monotonic() < deadline and (data / "PG_VERSION").exists():
        time.sleep(POLL_S)  # a server being started as its owner died: wait for its pid
        pid = postmaster(data)
    if pid is not None:
        family = [pid, *children(pid)]
        _signal([pid], signal.SIGQUIT)  # immediate shutdown: no checkpoint, data thrown away
        _signal(family, signal.SIGCONT)  # a frozen (SIGSTOPped) server acts on it
        deadline = time.monotonic() + GRACE_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            _signal([pid, *children(pid)], signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    owner, root = int(sys.argv[1]), Path(sys.argv[2])
    while os.getppid() == owner:
        time.sleep(POLL_S)
    stop(root, starting=True)


if __name__ == "__main__":
    main()
