"""The replay's two stores share their nodes (``store.memory.SharedNodes``: each recorded
node checked, encoded and decoded once for both): the results are the bytes of stores
that each decode and encode on their own, and every replayed request is the same."""

from __future__ import annotations

import msgspec
import pytest

from ctxrules.batch import rerender, session
from ctxrules.batch.requests import session_data
from ctxrules.importers import import_paths
from ctxrules.store import open_store

from .conftest import OPTIONS


@pytest.fixture
def unshared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replays whose stores share nothing (each decodes every read, encodes every node)."""
    monkeypatch.setattr(session, "SharedNodes", lambda: None)


def test_the_results_are_those_of_stores_sharing_nothing(subset, reference, tmp_path, unshared):
    out = tmp_path / "out.jsonl"
    rerender([str(subset)], OPTIONS, jobs=1, out=out)
    assert out.read_bytes() == reference


#: What an estimate holds (the core's are methods, a Python estimate's fields).
ESTIMATE = ("input_tokens", "prefix_tokens", "breakpoints", "segments", "rules")


def _value(est: object, name: str) -> object:
    value = getattr(est, name)
    return value() if callable(value) else value


def _requests(location: str) -> list[bytes]:
    """Every request both replays of every session prepared, encoded whole."""
    store = open_store(location, create=False)
    try:
        out = []
        for info in store.list_sessions():
            detail = session.replay_detail(session_data(store, info.id), OPTIONS)
            for point, prep, prefix, output, priced in [*detail.plain, *detail.rules]:
                est = prep.request.estimate
                assert est is not None
                made = (prep.commit, prep.request.body, prep.tokens, prep.budget, prep.model)
                figures = [_value(est, name) for name in ESTIMATE]
                out.append(msgspec.json.encode([point.index, made, prefix, output, priced]))
                out.append(repr(figures).encode())
            out.append(msgspec.json.encode(detail.record))
        return out
    finally:
        store.close()


def test_every_request_is_the_same(subset, tmp_path, monkeypatch):
    location = str(tmp_path / "store")
    store = open_store(location)
    try:
        import_paths(store, [str(subset)])
    finally:
        store.close()
    shared = _requests(location)
    monkeypatch.setattr(session, "SharedNodes", lambda: None)
    alone = _requests(location)
    assert len(shared) > 100
    assert shared == alone
