"""The SQL stores' agent-run guard and key/value table (a mixin of ``SQLStore``).

The guard is a row per session: run id, pid, host and an expiry that the holder's
heartbeat pushes forward.  A row whose expiry passed, or whose pid is dead on this
host, does not count (``_shared.live_run``), so a crashed agent never locks a session
for good.  Taking the guard reads the row and writes it in one transaction that holds
the session row's lock (the whole store on SQLite), so two runs never both win.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Any

from ._shared import live_run, take_run
from .base import RunInfo

__all__ = ["GuardAndKv"]

#: The guard row of a session, in the order ``_run`` reads it.
_SELECT_RUN = (
    "SELECT session_id, run_id, pid, host, started_at, expires_at FROM runs WHERE session_id = ?"
)


def _run(row: tuple[Any, ...] | None) -> RunInfo | None:
    if row is None:
        return None
    sid, run_id, pid, host, started, expires = row
    return RunInfo(
        session_id=sid, run_id=run_id, pid=pid, host=host, started_at=started, expires_at=expires
    )


class GuardAndKv:
    """Run-guard and key/value methods; the host class provides the connection."""

    _conn: Any
    _FOR_UPDATE: str

    def transaction(self) -> AbstractContextManager[Any]:
        raise NotImplementedError  # provided by the store class

    def _session_row(self, session_id: str, lock: str = "") -> tuple[Any, ...]:
        raise NotImplementedError  # provided by SQLStore

    # -- agent-run guard -------------------------------------------------------------
    def start_run(self, session_id: str, run_id: str, *, ttl: float) -> RunInfo:
        """Take the run guard; ``AgentRunActiveError`` names the live holder."""
        with self.transaction() as conn:
            self._session_row(session_id, self._FOR_UPDATE)  # serialises takers
            row = conn.execute(_SELECT_RUN, (session_id,)).fetchone()
            run = take_run(session_id, run_id, ttl, _run(row))
            conn.execute(
                "INSERT INTO runs VALUES (?,?,?,?,?,?) ON CONFLICT (session_id) DO UPDATE SET "
                "run_id = excluded.run_id, pid = excluded.pid, host = excluded.host, "
                "started_at = excluded.started_at, expires_at = excluded.expires_at",
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
        row = self._conn.execute(_SELECT_RUN, (session_id,)).fetchone()
        return live_run(_run(row), time.time())

    # -- key/value ---------------------------------------------------------------------
    def kv_put(self, namespace: str, key: str, value: bytes) -> None:
        """Store a value under ``(namespace, key)``."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO kv VALUES (?,?,?) "
                "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value",
                (namespace, key, bytes(value)),
            )

    def kv_get(self, namespace: str, key: str) -> bytes | None:
        """The value under ``(namespace, key)`` or ``None``."""
        row = self._conn.execute(
            "SELECT value FROM kv WHERE namespace = ? AND key = ?", (namespace, key)
        ).fetchone()
        return bytes(row[0]) if row else None

    def kv_keys(self, namespace: str, prefix: str = "") -> list[str]:
        """Sorted keys of a namespace starting with ``prefix``."""
        rows = self._conn.execute(
            "SELECT key FROM kv WHERE namespace = ? AND substr(key, 1, ?) = ?",
            (namespace, len(prefix), prefix),
        ).fetchall()
        # Sorted here, by code point: a server's collation may order text otherwise.
        return sorted(r[0] for r in rows)
