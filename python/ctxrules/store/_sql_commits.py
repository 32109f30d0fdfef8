"""The SQL stores' commit rows (a mixin of ``SQLStore``; the table is migration 2).

Rows are insert-only (triggers refuse UPDATE and DELETE) and content-addressed.  A put
reads, checks and inserts in one write transaction that holds the lock of its
(session, head, rule set) key (``SQLStore._lock_key``: the whole store on SQLite, an
advisory lock on PostgreSQL), so a compare-and-set on the head cannot race another
process; a row another writer inserted under the same id meanwhile is checked like
one found up front.  The chain of a commit is one recursive query over ``parent_id``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import EllipsisType
from typing import Any

from ..model import Node
from ._shared import (
    DAMAGE,
    check_commit_row,
    check_same_commit,
    damaged,
    decode_node,
    missing_parent,
    not_found,
)
from .base import CommitRow

__all__ = ["Commits"]

_COLS = (
    "id, session_id, parent_id, head_node_id, rules_version, created_at, total_tokens, "
    "n_items, meta, delta"
)


def _row(r: tuple[object, ...], location: str = "") -> CommitRow:
    try:
        return _row_of(r)
    except DAMAGE as exc:
        raise damaged("a stored commit row", exc, location) from None


def _row_of(r: tuple[object, ...]) -> CommitRow:
    cid, sid, parent, head, rv, created, total, n, meta, delta = r
    return CommitRow(
        id=str(cid),
        session_id=str(sid),
        parent_id=None if parent is None else str(parent),
        head_node_id=str(head),
        rules_version=str(rv),
        created_at=float(created),  # type: ignore[arg-type]
        total_tokens=int(total),  # type: ignore[call-overload]
        n_items=int(n),  # type: ignore[call-overload]
        meta=bytes(meta),  # type: ignore[call-overload]
        delta=bytes(delta),  # type: ignore[call-overload]
    )


class Commits:
    """Commit-row methods; the host class provides the connection and transactions."""

    _conn: Any
    _ORDER: str
    _INTEGRITY: tuple[type[Exception], ...]
    location: str

    def transaction(self) -> AbstractContextManager[Any]:
        raise NotImplementedError  # provided by the store class

    def _lock_key(self, conn: Any, key: str) -> None:
        raise NotImplementedError  # provided by SQLStore

    def _latest(self, session_id: str, head_node_id: str, rules_version: str) -> str | None:
        row = self._conn.execute(
            "SELECT id FROM commits WHERE head_node_id = ? AND rules_version = ? "
            f"AND session_id = ? ORDER BY {self._ORDER} DESC LIMIT 1",
            (head_node_id, rules_version, session_id),
        ).fetchone()
        return None if row is None else str(row[0])

    def put_commit(
        self, row: CommitRow, *, if_latest: str | EllipsisType | None = ...
    ) -> str | None:
        """Store a commit row (see ``CommitStore.put_commit``)."""
        check_commit_row(row)
        with self.transaction() as conn:
            old = conn.execute(f"SELECT {_COLS} FROM commits WHERE id = ?", (row.id,)).fetchone()
            if old is not None:
                check_same_commit(_row(old, self.location), row, self.location)
                return row.id
            key = (row.session_id, row.head_node_id, row.rules_version)
            self._lock_key(conn, "commit\x1f" + "\x1f".join(key))
            if if_latest is not ...:
                latest = self._latest(*key)
                if latest != if_latest:
                    return latest
            try:
                cur = conn.execute(
                    f"INSERT INTO commits ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (id) DO NOTHING",
                    (
                        row.id,
                        row.session_id,
                        row.parent_id,
                        row.head_node_id,
                        row.rules_version,
                        row.created_at,
                        row.total_tokens,
                        row.n_items,
                        row.meta,
                        row.delta,
                    ),
                )
            except self._INTEGRITY:  # a taken id is no error here: the parent is missing
                raise missing_parent(row, self.location) from None
            if cur.rowcount == 0:  # another writer stored this id since the check above
                taken = conn.execute(f"SELECT {_COLS} FROM commits WHERE id = ?", (row.id,))
                check_same_commit(_row(taken.fetchone(), self.location), row, self.location)
            return row.id

    def latest_commit(self, session_id: str, head_node_id: str, rules_version: str) -> str | None:
        """The id of the session's newest commit at ``head_node_id`` by a rule set."""
        return self._latest(session_id, head_node_id, rules_version)

    def commit_chain(self, commit_id: str) -> list[CommitRow]:
        """Rows from the root to ``commit_id``; ``NotFoundError`` if unknown."""
        rows = self._conn.execute(
            f"""WITH RECURSIVE chain(id, depth) AS (
                   SELECT CAST(? AS TEXT), 0
                   UNION ALL
                   SELECT c.parent_id, chain.depth + 1 FROM commits c JOIN chain ON c.id = chain.id
                   WHERE c.parent_id IS NOT NULL
               )
               SELECT {", ".join("c." + c for c in _COLS.split(", "))}
               FROM chain JOIN commits c ON c.id = chain.id ORDER BY chain.depth DESC""",
            (commit_id,),
        ).fetchall()
        if not rows or rows[-1][0] != commit_id:
            raise not_found("commit", commit_id, self.location)
        return [_row(r, self.location) for r in rows]

    def session_commits(self, session_id: str) -> list[CommitRow]:
        """The session's commits in the order they were stored."""
        rows = self._conn.execute(
            f"SELECT {_COLS} FROM commits WHERE session_id = ? ORDER BY {self._ORDER}",
            (session_id,),
        ).fetchall()
        return [_row(r, self.location) for r in rows]

    def calls_since(self, session_id: str, seq: int) -> list[Node]:
        """The session's own caller-children above ``seq`` (an indexed range scan)."""
        rows = self._conn.execute(
            "SELECT body FROM nodes WHERE session_id = ? AND seq > ? AND caller IS NOT NULL "
            "ORDER BY seq",
            (session_id, seq),
        ).fetchall()
        return [decode_node(r[0], self.location) for r in rows]
