"""A fleet on one store: 8 processes append to one shared session and to their own,
and commit, all at once, on SQLite and on PostgreSQL.  Nothing is lost or duplicated:
``seq`` is dense and unique, every acknowledged node and commit is there, the shared
session is one chain, and a head committed by several processes at once has one
commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxrules import dag
from ctxrules.commit import load_commit
from ctxrules.store import open_store

WORKERS = Path(__file__).with_name("_workers.py")
WRITERS, ROUNDS = 8, 30


def start(argv: list[str]) -> list[subprocess.Popen]:
    return [
        subprocess.Popen(
            [sys.executable, str(WORKERS), *argv, f"w{k}", str(ROUNDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(WRITERS)
    ]


def release(procs: list[subprocess.Popen]) -> None:
    for p in procs:  # every one is waiting on its stdin: they start at one moment
        p.stdin.write("go\n")
    for p in procs:
        p.stdin.flush()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_eight_processes_append_and_commit_at_once(store_location, backend):
    location = store_location("fleet")
    st = open_store(location)
    shared = dag.create_session(st, source="shared").id
    procs = start(["writer", location, shared])
    release(procs)
    acked = []
    for p in procs:
        line = p.stdout.readline()
        assert line, p.stderr.read()
        acked.append(json.loads(line))
    release(procs)  # all done appending: commit the final head together
    finals = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        finals.append(out.strip())

    nodes = st.nodes(shared)
    assert [n.seq for n in nodes] == list(range(1, WRITERS * ROUNDS + 1))  # dense, unique
    assert sorted(n.id for n in nodes) == sorted(i for a in acked for i in a["shared"])
    for prev, n in zip([None, *nodes], nodes):  # HEAD read in each append's transaction
        assert n.predecessor == (prev.id if prev else None)
    for a in acked:
        assert [(n.id, n.seq) for n in st.nodes(a["session"])] == [
            (nid, i + 1) for i, nid in enumerate(a["own"])
        ]
        mine = {r.id for r in st.session_commits(a["session"])}
        assert set(a["commits"]) <= mine | {r.id for r in st.session_commits(shared)}
        assert len(mine) == ROUNDS  # one per head: each of its appends moved the head
    for cid in {c for a in acked for c in a["commits"]} | set(finals):
        assert load_commit(cid, store=st).id == cid  # every acknowledged commit loads
    # Heads committed by several processes at once were committed once.
    rows = st.session_commits(shared)
    assert len({r.head_node_id for r in rows}) == len(rows)
    assert len(set(finals)) == 1 and finals[0] in {r.id for r in rows}
    assert [r.id for r in rows if r.head_node_id == nodes[-1].id] == finals[:1]
    st.close()
