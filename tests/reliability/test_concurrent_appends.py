"""Concurrency with real processes: 4 writers × 1,000 appends to one session; no seq
is lost or duplicated and every acknowledged node is there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctxrules import dag
from ctxrules.store import open_store

WORKERS = Path(__file__).with_name("_workers.py")
WRITERS, EACH = 4, 1000


def test_four_processes_append_to_one_session(tmp_path):
    store_path = str(tmp_path / "store")
    st = open_store(store_path)
    session = dag.create_session(st).id
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKERS), "appender", store_path, session, f"w{k}", str(EACH)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(WRITERS)
    ]
    for p in procs:  # all opened their store: start them together
        p.stdin.write("go\n")
        p.stdin.flush()
    acked = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        acked.extend(out.split())
    assert len(acked) == WRITERS * EACH
    nodes = st.nodes(session)
    assert [n.seq for n in nodes] == list(range(1, WRITERS * EACH + 1))
    assert sorted(n.id for n in nodes) == sorted(acked)
    # HEAD is read inside each append's transaction, so the writers formed one chain.
    for prev, n in zip([None, *nodes], nodes):
        assert n.predecessor == (prev.id if prev else None)
    assert st.get_session(session).head == nodes[-1].id
    # Each writer's own nodes kept their order.
    for k in range(WRITERS):
        mine = [n.id for n in nodes if n.id.startswith(f"w{k}-")]
        assert mine == [f"w{k}-{i}" for i in range(EACH)]
    st.close()
