"""Crash safety with real processes and real SQLite: a child appending in a loop is
SIGKILLed at random moments; after every kill the store opens cleanly, every
acknowledged node is there and intact, none is duplicated and no seq is reused."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from ctxrules import dag
from ctxrules.store import open_store

sys.path.insert(0, str(Path(__file__).parent))
from _workers import payload

WORKERS = Path(__file__).with_name("_workers.py")
ROUNDS = 60


def check(store_path, session, acked):
    store = open_store(store_path)  # a fresh open after the crash
    try:
        nodes = store.nodes(session)
        ids = [n.id for n in nodes]
        assert len(ids) == len(set(ids)), "a node was stored twice"
        assert [n.seq for n in nodes] == list(range(1, len(nodes) + 1)), "seq gap or reuse"
        assert store.get_session(session).calls == len(nodes)
        present = set(ids)
        missing = [a for a in acked if a not in present]
        assert not missing, f"acknowledged but lost: {missing[:5]}"
        for prev, n in zip([None, *nodes], nodes):
            assert n.output == payload(n.id), f"{n.id} is not intact"
            assert n.predecessor == (prev.id if prev else None)
        head = store.get_session(session).head
        assert head == (nodes[-1].id if nodes else None)
        return len(nodes)
    finally:
        store.close()


def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path):
    rng = random.Random(1234)
    store_path = str(tmp_path / "store")
    st = open_store(store_path)
    session = dag.create_session(st).id
    st.close()
    zygote = subprocess.Popen(
        [sys.executable, str(WORKERS), "zygote", store_path, session],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    acked: list[str] = []
    kills_with_acks = 0
    try:
        for rnd in range(ROUNDS):
            zygote.stdin.write(f"go {rnd}\n")
            zygote.stdin.flush()
            line = zygote.stdout.readline()
            assert line.startswith("pid "), line
            pid = int(line.split()[1])
            time.sleep(rng.uniform(0.0, 0.08))
            os.kill(pid, signal.SIGKILL)
            before = len(acked)
            for line in zygote.stdout:
                if line.startswith("dead "):
                    break
                if line.startswith("ack ") and line.endswith("\n"):
                    acked.append(line.split()[1])
            kills_with_acks += len(acked) > before
            stored = check(store_path, session, acked)
            assert stored >= len(acked)
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=30)
    assert kills_with_acks >= ROUNDS // 2, "most kills should land while appending"
