"""``ctxrules store copy``: sessions and commits move between SQLite, PostgreSQL and
memory stores and back, every node and commit equal by id on both sides (read back
with the stores' own methods, not from the command's report), a second run writes
nothing, a grown source adds only its tail, and different content under an id stops
the copy before anything is written."""

from __future__ import annotations

import io
import json

import pytest

from ctxrules import dag
from ctxrules.cli import main
from ctxrules.commit import make_commit
from ctxrules.errors import StoreError
from ctxrules.importers import import_paths
from ctxrules.model import Node
from ctxrules.store import CommitRow, open_store
from ctxrules.store.copy import copy_store
from ctxrules.store.memory import forget

CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
TAU = "openai-chat-json/taubench_gpt-4o-airline.json"


def snapshot(location: str) -> dict:
    """Everything a store holds per session, as plain data."""
    st = open_store(location, create=False)
    try:
        out = {}
        for s in st.list_sessions():
            out[s.id] = {
                "fixed": (s.source, s.import_key, s.base_session, s.base_node, s.base_seq),
                "head": s.head,
                "metadata": s.metadata,
                "calls": s.calls,
                "nodes": st.nodes(s.id),
                "visible": [n.id for n in st.nodes(s.id, inherited=True)],
                "commits": st.session_commits(s.id),
            }
        return out
    finally:
        st.close()


@pytest.fixture
def source(tmp_path, corpus):
    """A SQLite store with imported sessions, commits, a fork whose base grew after
    the fork point, a moved HEAD and metadata."""
    location = str(tmp_path / "src")
    st = open_store(location)
    cc, *_ = import_paths(st, [str(corpus / CC), str(corpus / TAU)])
    heads = [n for n in dag.branch_path(st, cc.id) if n.caller is None]
    for h in heads[::5]:
        make_commit(cc.id, h.id, now=h.created_at, store=st)
    base = dag.create_session(st, metadata={"team": "a"})
    first = dag.append(st, base.id, "user", "first")
    fork = dag.fork(st, base.id, first.id)
    dag.append(st, base.id, "user", "after the fork")  # the fork must not see it
    dag.append(st, fork.id, "user", "in the fork")
    make_commit(fork.id, now=5.0, store=st, rerun=True)
    dag.checkout(st, cc.id, heads[3].id)
    st.update_metadata(cc.id, {"note": "moved"})
    st.close()
    return location


def copy(src: str, dst: str, capsys, *extra: str, code: int = 0) -> dict:
    assert main(["store", "copy", src, dst, "--json", *extra]) == code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_sqlite_to_postgres_and_back_keeps_every_id_and_content(
    source, pg_server, tmp_path, capsys
):
    pg = pg_server.new_store()
    want = snapshot(source)
    report = copy(source, pg, capsys)
    assert snapshot(pg) == want
    assert report["sessions"] == report["created"] == len(want)
    assert report["nodes_verified"] == sum(len(s["nodes"]) for s in want.values())
    assert report["commits_verified"] == sum(len(s["commits"]) for s in want.values()) > 2
    back = str(tmp_path / "back.db")
    copy(pg, back, capsys)
    assert snapshot(back) == want
    pg_server.drop_store(pg)


def test_through_memory_and_a_second_run_writes_nothing(source, capsys):
    try:
        copy(source, "memory:copy-test", capsys)
        again = copy(source, "memory:copy-test", capsys)
        assert (again["created"], again["nodes_copied"], again["commits_copied"]) == (0, 0, 0)
        st = open_store("memory:copy-test")
        want = snapshot(source)
        got = {s.id: st.nodes(s.id) for s in st.list_sessions()}
        assert got == {sid: s["nodes"] for sid, s in want.items()}
    finally:
        forget("copy-test")


def test_the_copy_uses_only_the_protocol(source, protocol_only):
    src, dst = protocol_only(open_store(source)), protocol_only(open_store("memory:"))
    report = copy_store(src, dst)
    assert report.nodes_verified == sum(s.calls for s in src.list_sessions())
    assert {"create_session", "append", "put_commit", "set_head"} <= dst.used
    src.close()


def test_a_grown_source_adds_its_tail_and_state(source, tmp_path, capsys):
    dst = str(tmp_path / "dst")
    copy(source, dst, capsys)
    st = open_store(source)
    sid = st.list_sessions()[0].id
    added = dag.append(st, sid, "user", "later")
    st.update_metadata(sid, {"note": None})
    st.close()
    report = copy(source, dst, capsys)
    assert (report["created"], report["nodes_copied"]) == (0, 1)
    assert snapshot(dst) == snapshot(source)
    assert snapshot(dst)[sid]["nodes"][-1] == added


def conflicting_node(location: str, sid: str, node: Node) -> None:
    st = open_store(location)
    st.create_session(session_id=sid)
    st.append(sid, Node(id=node.id, seq=0, created_at=1.0, role="user", output="not the same"))
    st.close()


def test_different_content_under_an_id_stops_before_anything_is_written(source, tmp_path, capsys):
    src = snapshot(source)
    # the last session that is no fork: a check made only when writing it would leave
    # every session before it written
    sid = [k for k, v in src.items() if v["fixed"][2] is None][-1]
    dst = str(tmp_path / "dst")
    conflicting_node(dst, sid, src[sid]["nodes"][0])
    before = snapshot(dst)
    assert main(["store", "copy", source, dst]) == 1
    err = capsys.readouterr().err
    assert "nothing was copied" in err and src[sid]["nodes"][0].id in err
    assert snapshot(dst) == before


def test_a_commit_with_other_content_under_its_id_is_refused(source, tmp_path, capsys):
    dst = str(tmp_path / "dst")
    copy(source, dst, capsys)
    theirs = next(v["commits"] for v in snapshot(source).values() if v["commits"])
    other = open_store("memory:")
    other.put_commit(CommitRow(**{**_fields(theirs[0]), "total_tokens": -1}))
    with pytest.raises(StoreError, match=f"commit {theirs[0].id!r} differs"):
        copy_store(open_store(dst, create=False), other)
    assert other.list_sessions() == []  # refused before any session was written


def _fields(row: CommitRow) -> dict:
    return {f: getattr(row, f) for f in row.__struct_fields__}


def test_progress_is_drawn_on_a_terminal(source, tmp_path, monkeypatch, capsys):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    assert main(["store", "copy", source, str(tmp_path / "dst")]) == 0
    n = len(snapshot(source))
    assert "copying sessions" in err.getvalue() and f"{n}/{n}" in err.getvalue()
    assert f"{n} sessions from" in capsys.readouterr().out


def test_a_missing_source_or_the_same_store_twice_are_errors(source, tmp_path, capsys):
    assert main(["store", "copy", str(tmp_path / "nowhere"), str(tmp_path / "dst")]) == 1
    assert "no ctxrules store" in capsys.readouterr().err
    assert not (tmp_path / "dst").exists()
    assert main(["store", "copy", source, source]) == 1
    assert "same store" in capsys.readouterr().err
    assert main(["store"]) == 1
    assert "store copy SRC DST" in capsys.readouterr().err
