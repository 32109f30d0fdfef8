"""Acknowledged means stored: non-finite times are refused everywhere (CLI, API, both
stores), and a write that finds its id taken checks that the stored row is the same
instead of silently dropping the new one."""

from __future__ import annotations

import json
import math

import msgspec
import pytest

import ctxrules
from ctxrules import dag
from ctxrules.cli import main
from ctxrules.commit import persist
from ctxrules.errors import StoreError, ValidationError
from ctxrules.store import CommitRow

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


@pytest.fixture
def imported(tmp_path, corpus, capsys):
    store = str(tmp_path / "store")
    assert main(["import", str(corpus / CC), "--store", store, "--json"]) == 0
    sid = json.loads(capsys.readouterr().out)["sessions"][0]["id"]
    return store, sid


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "1e400"])
@pytest.mark.parametrize("command", ["commit", "render"])
def test_a_non_finite_now_is_refused_by_the_cli(imported, capsys, value, command):
    store, sid = imported
    extra = ["--provider", "anthropic"] if command == "render" else []
    with pytest.raises(SystemExit) as exc:
        main([command, sid, "--store", store, f"--now={value}", *extra])
    assert exc.value.code == 2  # a usage error, like any other bad option value
    err = capsys.readouterr().err
    assert "--now" in err and "finite" in err
    # and nothing was stored behind the refusal
    assert main(["commit", sid, "--store", store, "--now", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["created_at"] == 5.0 and out["parent_ids"] == []


def test_every_printed_commit_is_stored(imported, capsys):
    store, sid = imported
    for now in ("0", "5", "1e9"):
        assert main(["commit", sid, "--store", store, "--now", now, "--json"]) == 0
        cid = json.loads(capsys.readouterr().out)["id"]
        st = ctxrules.store.open_store(store)
        try:
            assert persist.load(st, cid).created_at == float(now)
            assert cid in {r.id for r in st.session_commits(sid)}
        finally:
            st.close()


@pytest.mark.parametrize("now", [math.nan, math.inf, -math.inf, None, "5"])
def test_the_api_refuses_a_missing_or_non_finite_now(any_store, now):
    s = dag.create_session(any_store)
    dag.append(any_store, s.id, "user", "hi")
    for rerun in (False, True):
        with pytest.raises(ValidationError, match="now"):
            ctxrules.make_commit(s.id, now=now, store=any_store, rerun=rerun)
    assert any_store.session_commits(s.id) == []


def test_now_is_a_required_keyword(any_store):
    s = dag.create_session(any_store)
    dag.append(any_store, s.id, "user", "hi")
    with pytest.raises(TypeError, match="now"):
        ctxrules.make_commit(s.id, store=any_store)
    with pytest.raises(TypeError):
        ctxrules.make_commit(s.id, None, 5.0, store=any_store, rerun=True)  # not positional


def _row(**kw) -> CommitRow:
    fields = {
        "id": "cc_x",
        "session_id": "s",
        "parent_id": None,
        "head_node_id": "n",
        "rules_version": "rv",
        "created_at": 1.0,
        "total_tokens": 3,
        "n_items": 1,
        "meta": b"\x80",
        "delta": b"\x93\x90\x90\x90",
    }
    fields.update(kw)
    return CommitRow(**fields)


@pytest.mark.parametrize("created_at", [math.nan, math.inf, -math.inf])
def test_the_stores_refuse_non_finite_commit_times(any_store, created_at):
    with pytest.raises(ValidationError, match="created_at"):
        any_store.put_commit(_row(created_at=created_at))
    assert any_store.session_commits("s") == []


def test_a_taken_id_is_verified_not_ignored(any_store):
    assert any_store.put_commit(_row()) == "cc_x"
    assert any_store.put_commit(_row()) == "cc_x"  # the same row again: one row
    assert len(any_store.session_commits("s")) == 1
    with pytest.raises(StoreError, match=r"cc_x.*different"):
        any_store.put_commit(_row(total_tokens=4))
    with pytest.raises(StoreError, match="parent"):
        any_store.put_commit(_row(id="cc_y", parent_id="cc_missing"))
    assert [r.total_tokens for r in any_store.session_commits("s")] == [3]


@pytest.mark.parametrize("created_at", [math.nan, math.inf])
def test_nodes_with_non_finite_times_are_refused(any_store, created_at):
    s = dag.create_session(any_store)
    with pytest.raises(ValidationError, match="created_at"):
        dag.append(any_store, s.id, "user", "hi", created_at=created_at)
    assert any_store.nodes(s.id) == []


def test_a_commit_row_is_plain_data():
    row = _row()
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(row), type=CommitRow) == row
