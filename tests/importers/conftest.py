"""Fixtures for the importer tests: a fresh store and the corpus folders."""

from __future__ import annotations

import pytest

from ctxrules.store import open_store


@pytest.fixture
def store(tmp_path):
    """An empty store in a temporary directory."""
    s = open_store(tmp_path / "store")
    yield s
    s.close()


def take_snapshot(store) -> list[tuple[object, ...]]:
    """Everything a failed import must leave unchanged: each session row (HEAD,
    metadata, counts) and its nodes as stored."""
    return [(s, store.nodes(s.id)) for s in store.list_sessions()]


@pytest.fixture
def snapshot():
    """``snapshot(store)``: the sessions and node ids of a store, to compare before/after."""
    return take_snapshot
