"""A SOURCE is a store (SQLite, PostgreSQL) or transcripts imported on the fly: the same
sessions give the same lines either way; what cannot be read is a clear error."""

from __future__ import annotations

import json

import pytest

from ctxrules.batch import rerender
from ctxrules.errors import NotFoundError, StoreError, ValidationError

from .conftest import OPTIONS, filled_store


def test_a_sqlite_store_gives_what_its_transcripts_give(subset, reference, tmp_path):
    store = filled_store(str(tmp_path / "store"), subset)
    out = tmp_path / "out.jsonl"
    rerender([store], OPTIONS, jobs=1, out=out)
    assert out.read_bytes() == reference


def test_a_postgresql_store_gives_what_its_transcripts_give(subset, reference, tmp_path, pg_server):
    url = filled_store(pg_server.new_store(), subset)
    out = tmp_path / "out.jsonl"
    try:
        rerender([url], OPTIONS, jobs=2, out=out)
    finally:
        pg_server.drop_store(url)
    assert out.read_bytes() == reference


def test_chosen_sessions_only(subset, reference):
    lines = reference.splitlines()
    wanted = [json.loads(lines[i])["session"] for i in (7, 1)]
    result = rerender([str(subset)], OPTIONS, jobs=1, sessions=wanted)
    assert [r["session"] for r in result.records] == sorted(wanted)
    assert result.records == [json.loads(lines[1]), json.loads(lines[7])]
    with pytest.raises(NotFoundError, match="s_nope"):
        rerender([str(subset)], OPTIONS, jobs=1, sessions=["s_nope"])


def test_what_cannot_be_read_is_named(subset, tmp_path):
    with pytest.raises(ValidationError, match="no such file, folder or store") as exc:
        rerender([str(tmp_path / "missing")], OPTIONS, jobs=1)
    assert str(tmp_path / "missing") in str(exc.value)
    with pytest.raises(StoreError):
        rerender(["memory:never-made"], OPTIONS, jobs=1)
    store = filled_store(str(tmp_path / "store"), subset)
    with pytest.raises(ValidationError, match="is in two sources"):
        rerender([store, str(subset)], OPTIONS, jobs=1)
