"""Probe: a test run killed before its teardown leaves no PostgreSQL server behind.

The PostgreSQL tests start their own server (``tests/postgres_server.py``); ``pg_ctl``
detaches it, so when the test run died without ``stop()`` (SIGKILL, a CI timeout that
kills the process group) the server and its ``/tmp/ctxrules-pg-*`` directory lived on
for good.  Here a process stands in for the test run: it starts a server and is killed
(alone, or with its process group); within seconds the server must be gone and its
directory deleted.  Before the watchdog both outlived their owner indefinitely.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests._pg_watchdog import stop as stop_server

REPO = Path(__file__).resolve().parents[2]

#: The stand-in for a test run: start a server, say where it is, wait to be killed.
OWNER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.postgres_server import PostgresServer
server = PostgresServer().start()
pid = (server.data / "postmaster.pid").read_text().split()[0]
print(server.root, pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


@pytest.mark.parametrize("kill", ["the process", "its process group"])
def test_a_killed_owner_takes_its_server_along(kill):
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(REPO)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    root: Path | None = None
    try:
        line = owner.stdout.readline().split()  # type: ignore[union-attr]
        assert len(line) == 2, f"the server did not start (exit {owner.wait()})"
        root, postmaster = Path(line[0]), int(line[1])
        assert not _gone(postmaster)
        if kill == "the process":
            os.kill(owner.pid, signal.SIGKILL)
        else:
            os.killpg(owner.pid, signal.SIGKILL)
        owner.wait(30)
        deadline = time.monotonic() + 30
        while (not _gone(postmaster) or root.exists()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(postmaster), "the server outlived the process that started it"
        assert not root.exists(), f"{root} outlived the process that started its server"
    finally:
        if owner.poll() is None:
            os.killpg(owner.pid, signal.SIGKILL)
            owner.wait()
        if root is not None:
            stop_server(root)  # whatever a failed probe left
