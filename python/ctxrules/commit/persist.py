"""A commit and its stored row: save (encode the meta, put the row) and load (fetch the
chain of rows, replay the deltas), with a cache of loaded commits per store.

A row holds the commit's header, its meta (notes, cursors, parent ids) and its delta
against its first parent (``ctxrules.ruleapi.delta``): storage grows with the items a
commit changes, not with its length.  The store keeps the bytes; this module is the
only one that encodes the meta, and ``delta`` the only one that encodes deltas.

Loaded commits never change, so each store object keeps the last few it loaded or
saved (``CACHE_SIZE``, or what ``keep`` set for it: a long-running reader such as the
viewer keeps more, so a commit asked for again is the same object, which the core's
render cache — found by identity — recognises instead of preparing it again).  The
cache belongs to the store object: a commit another store holds is never returned
for this one, even under the same id.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from types import EllipsisType

import msgspec

from ..errors import ValidationError
from ..model import ContextCommit, ContextItem
from ..ruleapi.delta import replay
from ..store import DAMAGE, CommitRow, CommitStore, damaged
from .derive import Generated

__all__ = ["CACHE_SIZE", "clear_cache", "keep", "load", "row_reasons", "save", "stored_bytes"]

#: Commits kept in memory per store object.
CACHE_SIZE = 8


class _Meta(msgspec.Struct, frozen=True, omit_defaults=True):
    # The running summary is not stored here (it would repeat in every row): it is the
    # text of the last ``summary`` item a delta wrote.  Rows written before keep it.
    summary: str = ""
    notes: tuple[str, ...] = ()
    cursors: dict[str, int] = {}
    parent_ids: tuple[str, ...] = ()
    # Which rule wrote each item reason of this derive (``Generated.reasons``): kept
    # beside the commit, not in it, so commit ids do not depend on it.
    reasons: dict[str, str] = {}


_meta_decoder = msgspec.msgpack.Decoder(_Meta)
_caches: weakref.WeakKeyDictionary[CommitStore, OrderedDict[str, ContextCommit]] = (
    weakref.WeakKeyDictionary()
)
_sizes: weakref.WeakKeyDictionary[CommitStore, int] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def keep(store: CommitStore, count: int) -> None:
    """Keep the last ``count`` commits ``store`` loaded or saved in memory (instead of
    ``CACHE_SIZE``) for as long as the store object lives."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValidationError(f"count must be a non-negative int, not {count!r}", where="keep")
    with _lock:
        _sizes[store] = count
        cache = _caches.get(store)
        while cache is not None and len(cache) > count:
            cache.popitem(last=False)


def _cached(store: CommitStore, ids: list[str]) -> dict[str, ContextCommit]:
    with _lock:
        cache = _caches.get(store)
        return {} if cache is None else {i: cache[i] for i in ids if i in cache}


def _remember(store: CommitStore, commit: ContextCommit) -> None:
    with _lock:
        cache = _caches.setdefault(store, OrderedDict())
        cache[commit.id] = commit
        cache.move_to_end(commit.id)
        size = _sizes.get(store, CACHE_SIZE)
        while len(cache) > size:
            cache.popitem(last=False)


def clear_cache(store: CommitStore | None = None) -> None:
    """Forget the loaded commits of ``store`` (of every store with ``None``)."""
    with _lock:
        if store is None:
            _caches.clear()
        else:
            _caches.pop(store, None)


def save(
    store: CommitStore, gen: Generated, *, if_latest: str | EllipsisType | None = ...
) -> ContextCommit | None:
    """Store a derived commit; returns it, or ``None`` if ``if_latest`` no longer held
    (another commit took its head first: see ``CommitStore.put_commit``)."""
    c = gen.commit
    meta = msgspec.msgpack.encode(
        _Meta(
            notes=c.notes,
            cursors=c.cursors,
            parent_ids=c.parent_ids,
            reasons=dict(gen.reasons),
        )
    )
    row = CommitRow(
        id=c.id,
        session_id=c.session_id,
        parent_id=c.parent_ids[0] if c.parent_ids else None,
        head_node_id=c.head_node_id,
        rules_version=c.rules_version,
        created_at=c.created_at,
        total_tokens=c.total_tokens,
        n_items=len(c.items),
        meta=meta,
        delta=gen.delta,
    )
    if store.put_commit(row, if_latest=if_latest) != c.id:
        return None
    _remember(store, c)
    return c


def load(store: CommitStore, commit_id: str) -> ContextCommit:
    """Rebuild a stored commit by replaying the deltas of its ancestry (``NotFoundError``
    if ``store`` does not hold it)."""
    hit = _cached(store, [commit_id]).get(commit_id)
    if hit is not None:
        return hit
    rows = store.commit_chain(commit_id)
    cached = _cached(store, [r.id for r in rows])
    items: list[ContextItem] = []
    start = 0
    summary = ""
    for i in range(len(rows) - 1, -1, -1):  # resume from the newest cached ancestor
        if rows[i].id in cached:
            items = list(cached[rows[i].id].items)
            summary = cached[rows[i].id].summary
            start = i + 1
            break
    last = rows[-1]
    try:
        for row in rows[start:]:
            written = replay(items, row.delta)
            if written is not None:
                summary = written
        meta = _meta_decoder.decode(last.meta)
    except DAMAGE as exc:  # bytes changed on disk since the commit was stored
        raise damaged(f"stored commit {commit_id}", exc, store.location) from None
    commit = ContextCommit(
        id=last.id,
        session_id=last.session_id,
        parent_ids=meta.parent_ids,
        created_at=last.created_at,
        head_node_id=last.head_node_id,
        rules_version=last.rules_version,
        total_tokens=last.total_tokens,
        items=tuple(items),
        summary=meta.summary or summary,
        notes=meta.notes,
        cursors=meta.cursors,
    )
    _remember(store, commit)
    return commit


def row_reasons(row: CommitRow) -> dict[str, str]:
    """Which rule wrote each item reason of the derive that made ``row`` (empty for rows
    stored before this was kept, and for derives no rule changed anything in)."""
    return dict(_meta_decoder.decode(row.meta).reasons)


def stored_bytes(store: CommitStore, commit_id: str) -> int:
    """Bytes the commit's row holds (header, meta and delta): what one commit costs to keep."""
    row = store.commit_chain(commit_id)[-1]
    text = (row.id, row.session_id, row.parent_id or "", row.head_node_id, row.rules_version)
    return sum(len(t.encode()) for t in text) + 24 + len(row.meta) + len(row.delta)
