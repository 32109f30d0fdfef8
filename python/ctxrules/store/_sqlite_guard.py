"""The SQLite store's agent-run guard and key/value table (a mixin of ``SQLiteStore``).

The guard is a row per session: run id, pid, host and an expiry that the holder's
heartbeat pushes forward.  A row whose expiry passed, or whose pid is dead on this
host, does not count (``_shared.live_run``), so a crashed agent never locks a session
for good.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import AbstractContextManager
from typing import Any

from ._shared import live_run, take_run
from .base import RunInfo

__all__ = ["GuardAndKv"]


def _run(row: tuple[Any, ...] | None) -> RunInfo | None:
    if row is None:
        return None
    sid, run_id, pid, host, started, expires = row
    return RunInfo(
        session_id=sid, run_id=run_id, pid=pid, host=host, started_at=started, expires_at=expires
    )


class GuardAndKv:
    """Run-guard and key/value methods; the host class provides the connection."""

    _conn: sqlite3.Connection

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # provided by SQLiteStore

    def _session_row(self, session_id: str) -> tuple[Any, ...]:
        raise NotImplementedError  # provided by SQLiteStore

    # -- agent-run guard -------------------------------------------------------------
    def start_run(self, session_id: str, run_id: str, *, ttl: float) -> RunInfo:
        """Take the run guard; ``AgentRunActiveError`` names the live holder."""
        with self.transaction() as conn:
            self._session_row(session_id)
            row = conn.execute("SELECT * FROM runs WHERE session_id = ?", (session_id,)).fetchone()
            run = take_run(session_id, run_id, ttl, _run(row))
            conn.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?)",
                (run.session_id, run.run_id, run.pid, run.host, run.started_at, run.expires_at),
            )
            return run

    def renew_run(self, session_id: str, run_id: str, *, ttl: float) -> None:
        """Push the guard's expiry ``ttl`` seconds into the future."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE runs SET expires_at = ? WHERE session_id = ? AND run_id = ?",
                (time.time() + ttl, session_id, run_id),
            )

    def end_run(self, session_id: str, run_id: str) -> None:
        """Release the guard if ``run_id`` still holds it."""
        with self.transaction() as conn:
            conn.execute(
                "DELETE FROM runs WHERE session_id = ? AND run_id = ?", (session_id, run_id)
            )

    def active_run(self, session_id: str) -> RunInfo | None:
        """The live run on the session, if any."""
        row = self._conn.execute(
            "SELECT * FROM runs WHERE session_id = ?", (session_id,)
        ).fetchone()
        return live_run(_run(row), time.time())

    # -- key/value ---------------------------------------------------------------------
    def kv_put(self, namespace: str, key: str, value: bytes) -> None:
        """Store a value under ``(namespace, key)``."""
        with self.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO kv VALUES (?,?,?)", (namespace, key, value))

    def kv_get(self, namespace: str, key: str) -> bytes | None:
        """The value under ``(namespace, key)`` or ``None``."""
        row = self._conn.execute(
            "SELECT value FROM kv WHERE namespace = ? AND key = ?", (namespace, key)
        ).fetchone()
        return bytes(row[0]) if row else None

    def kv_keys(self, namespace: str, prefix: str = "") -> list[str]:
        """Sorted keys of a namespace starting with ``prefix``."""
        rows = self._conn.execute(
            "SELECT key FROM kv WHERE namespace = ? AND substr(key, 1, ?) = ? ORDER BY key",
            (namespace, len(prefix), prefix),
        ).fetchall()
        return [r[0] for r in rows]
