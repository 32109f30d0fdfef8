"""Crash safety with real processes and real SQLite: a child appending in a loop is
SIGKILLed at random moments; after every kill the store opens cleanly, every
acknowledged node is there and intact, none is duplicated and no seq is reused.  On
SQLite and PostgreSQL alike, a client killed inside a transaction (an import, or an
append and a new session together) leaves none of it and holds no lock after."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_sigkill_during_an_import_leaves_all_or_nothing(tmp_path, corpus, store_location):
    """A file is one transaction: killed half-way, none of its sessions exist; else all."""
    import json

    rng = random.Random(99)
    src = corpus / "openai-chat-json" / "taubench_gpt-4o-airline.json"
    runs = json.loads(src.read_text())
    want = {len(r["traj"]) for r in runs}
    store_path = store_location("store")
    open_store(store_path).close()
    zygote = subprocess.Popen(
        [sys.executable, str(WORKERS), "zygote", store_path, "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    outcomes = set()
    try:
        for _ in range(12):
            # A fresh copy each round: new bytes, new import key, a new set of sessions.
            copy = tmp_path / f"copy{len(outcomes)}{rng.random()}.json"
            copy.write_text(json.dumps(runs) + " " * rng.randrange(1000))
            zygote.stdin.write(f"import {copy}\n")
            zygote.stdin.flush()
            pid = int(zygote.stdout.readline().split()[1])
            time.sleep(rng.uniform(0.0, 0.6))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # the import finished first
            acks = []
            for line in zygote.stdout:
                if line.startswith("dead "):
                    break
                acks.append(line)
            store = open_store(store_path)
            try:
                mine = [s for s in store.list_sessions() if s.source == str(copy)]
                assert len(mine) in (0, len(runs)), "a file was imported in part"
                if acks:
                    assert len(mine) == len(runs)  # reported imported: durably there
                assert {s.calls for s in mine} <= want
                assert sum(s.calls for s in mine) in (0, sum(len(r["traj"]) for r in runs))
                outcomes.add(bool(mine))
            finally:
                store.close()
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=30)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_client_killed_inside_a_transaction_leaves_nothing_and_no_lock(store_location):
    location = store_location("store")
    store = open_store(location)
    session = dag.create_session(store).id
    dag.append(store, session, "user", "before", node_id="before")
    holder = subprocess.Popen(
        [sys.executable, str(WORKERS), "holder", location, session],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"  # mid-transaction, locks held
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert [s.id for s in store.list_sessions()] == [session]  # no partial session
    assert [n.id for n in store.nodes(session)] == ["before"]
    # Its locks went with it: the next write goes through and takes the next seq.
    after = dag.append(store, session, "user", "after", node_id="after")
    assert after.seq == 2 and store.get_session(session).calls == 2
    store.close()
