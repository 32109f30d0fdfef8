"""Worker processes that end with the command that started them.

A local pool's workers are forked by Python's fork server, not by the command, so
nothing tells them when the command dies without running its clean-up (SIGKILL, a
crash, the machine's out-of-memory killer): they would wait for work forever, and keep
the fork server and the resource tracker alive with them.  ``watch_parent(pid)``, run
in each worker as it starts, holds a pidfd of the command (``os.pidfd_open``; where the
platform has none, the pid is looked at twice a second) on a daemon thread and ends the
worker the moment the command is gone, whatever ended it.  With every worker gone the
fork server and the resource tracker see their pipes close and exit on their own.
"""

from __future__ import annotations

import os
import select
import threading
import time

__all__ = ["watch_parent"]

#: Seconds between two looks at the command where no pidfd can be had.
POLL_S = 0.5


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's (a reused pid: the fallback's limit)
    return False


def watch_parent(pid: int) -> None:
    """End this process (exit code 1, no clean-up) as soon as process ``pid`` ends."""
    try:
        fd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)  # the command died while this worker started
    except (AttributeError, OSError):
        fd = None

    def watch() -> None:
        if fd is not None:
            select.select([fd], [], [])  # readable once the process has ended
        else:
            while not _gone(pid):
                time.sleep(POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="ctxrules-parent-watch", daemon=True).start()
