"""Probe: a compaction lands whole or not at all.  Its steps — the boundary node, the
restore message, HEAD, the commit — are stored in one transaction: when storing the
commit fails (here a store that refuses the compaction's commit, as a full disk does;
the real full disk is in test_disk_full.py), none of them is there afterwards, on
every backend.

Before issue 25 the boundary and restore nodes were stored and HEAD moved, then the
commit failed: a session left half-compacted."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from ctxrules.compaction import compact
from ctxrules.errors import StoreError
from ctxrules.importers import import_paths
from ctxrules.store import open_store

sys.path.insert(0, str(Path(__file__).parent))
from _cli import tau_sessions

NOW = 1767225600.0


class FullAtTheCommit:
    """The store, except that storing a commit whose head is a node appended since the
    compaction began fails as a full disk does."""

    def __init__(self, inner: Any, known: set[str]):
        self._inner = inner
        self._known = known

    def put_commit(self, row: Any, **kwargs: Any) -> Any:
        if row.head_node_id not in self._known:
            raise StoreError("the disk holding the store is full", where="test")
        return self._inner.put_commit(row, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_failed_commit_leaves_no_part_of_the_compaction(store_location, tmp_path):
    store = open_store(store_location())
    try:
        (imported,) = import_paths(store, [str(tau_sessions(tmp_path, 1, start=50))])
        sid = imported.id
        before = store.get_session(sid)
        nodes = [n.id for n in store.nodes(sid)]
        commits = [r.id for r in store.session_commits(sid)]
        with pytest.raises(StoreError, match="full"):
            compact(FullAtTheCommit(store, set(nodes)), sid, now=NOW)
        assert store.get_session(sid).head == before.head
        assert [n.id for n in store.nodes(sid)] == nodes  # no boundary, no restore node
        new = [r for r in store.session_commits(sid) if r.id not in commits]
        assert all(r.head_node_id in nodes for r in new)  # at most the commit at HEAD
        done = compact(store, sid, now=NOW)  # and it can be done afterwards, whole
        assert store.get_session(sid).head in (done.boundary, done.restore)
    finally:
        store.close()
