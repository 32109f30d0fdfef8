"""Where commits live: store migration 2 (``context_commits``), save and load.

A commit row holds the commit's header and its *delta* against its first parent (the
positions of inserted items, every new or changed item, and each fold as the summary
id plus the positions it absorbed, msgpack — see ``ctxrules.commit.delta``): storage grows
with the items a commit changes, not with its length, and a fold costs a few bytes per
absorbed item, not the item again.  Rows are insert-only —
triggers refuse UPDATE and DELETE, as for history nodes (invariant 2) — and
content-addressed: saving an id that exists is a no-op, since the same id means the
same content.  ``commits_head`` makes "the commit for this node" an indexed lookup.

Loading replays the deltas from the root (one recursive query fetches the chain);
loaded commits are kept in a small in-process cache, since they never change.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import NotFoundError, StoreError
from ..model import Call, ContextCommit, ContextItem
from ..store import Store, register_migration
from .delta import replay

if TYPE_CHECKING:
    from .derive import Generated

__all__ = [
    "CACHE_SIZE",
    "calls_since",
    "latest_for_head",
    "load",
    "save",
    "stored_bytes",
]

#: Commits kept in memory per process (they are immutable, so caching is always safe).
CACHE_SIZE = 8
_cache: OrderedDict[str, ContextCommit] = OrderedDict()
_cache_lock = threading.Lock()


class _Meta(msgspec.Struct, frozen=True, omit_defaults=True):
    # The running summary is not stored here (it would repeat in every row): it is the
    # text of the last ``summary`` item a delta wrote.  Rows written before keep it.
    summary: str = ""
    notes: tuple[str, ...] = ()
    cursors: dict[str, int] = {}
    parent_ids: tuple[str, ...] = ()


@register_migration(2, "context_commits")
def _context_commits(conn: sqlite3.Connection) -> None:
    statements = [
        """CREATE TABLE commits (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    parent_id TEXT REFERENCES commits(id),
    head_node_id TEXT NOT NULL,
    rules_version TEXT NOT NULL,
    created_at REAL NOT NULL,
    total_tokens INTEGER NOT NULL,
    n_items INTEGER NOT NULL,
    meta BLOB NOT NULL,
    delta BLOB NOT NULL
)""",
        "CREATE INDEX commits_head ON commits(head_node_id, rules_version)",
        "CREATE INDEX commits_session ON commits(session_id)",
        # For the history graph's table (additive): generation asks for the calls of each
        # node it walks (``Store.children``, ``WHERE caller = ? … ORDER BY seq``).  With
        # only ``nodes_caller`` the planner prefers UNIQUE(session_id, seq) for the ORDER
        # BY and scans the whole session — 16 ms per lookup at 30k nodes; this index
        # serves both the filter and the order.
        "CREATE INDEX IF NOT EXISTS nodes_caller_seq ON nodes(caller, seq) "
        "WHERE caller IS NOT NULL",
        """CREATE TRIGGER commits_no_update BEFORE UPDATE ON commits
    BEGIN SELECT RAISE(ABORT, 'context commits are never rewritten'); END""",
        """CREATE TRIGGER commits_no_delete BEFORE DELETE ON commits
    BEGIN SELECT RAISE(ABORT, 'context commits are never rewritten'); END""",
    ]
    for statement in statements:
        conn.execute(statement)


def _remember(commit: ContextCommit) -> None:
    with _cache_lock:
        _cache[commit.id] = commit
        _cache.move_to_end(commit.id)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


def _query(store: Store, sql: str, args: tuple[Any, ...]) -> list[Any]:
    # Reads go through the store's public transaction (the Protocol's one way to reach
    # the backend); inside an outer transaction this joins it.
    try:
        with store.transaction() as conn:
            return list(conn.execute(sql, args).fetchall())
    except sqlite3.Error as exc:
        raise StoreError(f"commit lookup failed: {exc}", where=store.location) from None


def save(store: Store, gen: Generated) -> None:
    """Store a derived commit (no-op if its id is stored already)."""
    c = gen.commit
    meta = msgspec.msgpack.encode(_Meta(notes=c.notes, cursors=c.cursors, parent_ids=c.parent_ids))
    with store.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO commits (id, session_id, parent_id, head_node_id, "
            "rules_version, created_at, total_tokens, n_items, meta, delta) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                c.id,
                c.session_id,
                c.parent_ids[0] if c.parent_ids else None,
                c.head_node_id,
                c.rules_version,
                c.created_at,
                c.total_tokens,
                len(c.items),
                meta,
                gen.delta,
            ),
        )
    _remember(c)


def latest_for_head(store: Store, node_id: str, rules_version: str, session_id: str) -> str | None:
    """The id of this session's newest commit at ``node_id`` made by this rule set.

    Only the session's own commits serve as ancestors: a commit records the graph marks
    (seq watermark, shown tool-call variants) of the session it was made in, so a fork
    cannot prove its base's commit still fits its own graph (a fork's first commit is
    built from its whole branch).  Another rule set's commits never serve either: their
    items carry that rule set's compression, and states only tighten along a chain."""
    rows = _query(
        store,
        "SELECT id FROM commits WHERE head_node_id = ? AND rules_version = ? "
        "AND session_id = ? ORDER BY rowid DESC LIMIT 1",
        (node_id, rules_version, session_id),
    )
    return str(rows[0][0]) if rows else None


def load(store: Store, commit_id: str) -> ContextCommit:
    """Rebuild a stored commit by replaying the deltas of its ancestry."""
    with _cache_lock:
        hit = _cache.get(commit_id)
    if hit is not None:
        return hit
    rows = _query(
        store,
        """WITH RECURSIVE chain(id, depth) AS (
               SELECT ?, 0
               UNION ALL
               SELECT c.parent_id, chain.depth + 1 FROM commits c JOIN chain ON c.id = chain.id
               WHERE c.parent_id IS NOT NULL
           )
           SELECT c.id, c.session_id, c.head_node_id, c.rules_version, c.created_at,
                  c.total_tokens, c.meta, c.delta
           FROM chain JOIN commits c ON c.id = chain.id ORDER BY chain.depth DESC""",
        (commit_id,),
    )
    if not rows or rows[-1][0] != commit_id:
        raise NotFoundError(
            f"no commit {commit_id!r}",
            where=store.location,
            hint="`ctxrules commit SESSION --json` shows the current commit's id",
        )
    items: list[ContextItem] = []
    commit: ContextCommit | None = None
    with _cache_lock:
        cached = {r[0]: _cache[r[0]] for r in rows if r[0] in _cache}
    start = 0
    summary = ""
    for i in range(len(rows) - 1, -1, -1):  # resume from the newest cached ancestor
        if rows[i][0] in cached:
            items = list(cached[rows[i][0]].items)
            summary = cached[rows[i][0]].summary
            start = i + 1
            break
    for cid, sid, head, rv, created, total, meta_b, delta_b in rows[start:]:
        written = replay(items, delta_b)
        if written is not None:
            summary = written
        if cid == commit_id:
            meta = msgspec.msgpack.decode(meta_b, type=_Meta)
            commit = ContextCommit(
                id=cid,
                session_id=sid,
                parent_ids=meta.parent_ids,
                created_at=created,
                head_node_id=head,
                rules_version=rv,
                total_tokens=total,
                items=tuple(items),
                summary=meta.summary or summary,
                notes=meta.notes,
                cursors=meta.cursors,
            )
    assert commit is not None
    _remember(commit)
    return commit


def stored_bytes(store: Store, commit_id: str) -> int:
    """Bytes the commit's row holds (header, meta and delta): what one commit costs to keep."""
    rows = _query(
        store,
        "SELECT length(id) + length(session_id) + coalesce(length(parent_id), 0) + "
        "length(head_node_id) + length(rules_version) + 24 + length(meta) + length(delta) "
        "FROM commits WHERE id = ?",
        (commit_id,),
    )
    if not rows:
        raise NotFoundError(f"no commit {commit_id!r}", where=store.location)
    return int(rows[0][0])


_call_decoder = msgspec.json.Decoder(Call)


def calls_since(store: Store, session_id: str, seq: int) -> list[Call]:
    """The session's own caller-children with ``seq`` above ``seq`` (indexed range scan)."""
    rows = _query(
        store,
        "SELECT body FROM nodes WHERE session_id = ? AND seq > ? AND caller IS NOT NULL "
        "ORDER BY seq",
        (session_id, seq),
    )
    return [_call_decoder.decode(r[0]) for r in rows]
