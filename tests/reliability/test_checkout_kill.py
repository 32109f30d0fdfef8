"""Checking out a tool-call variant is one transaction: a child flipping between a
variant on one branch and a node on the other is SIGKILLed at random moments, and after
every kill the selection and HEAD are those before or after one whole checkout, never
the selection changed with HEAD left where it was."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from ctxrules import dag
from ctxrules.dag import SELECTED_KEY
from ctxrules.model import ToolUseBlock
from ctxrules.store import open_store

WORKERS = Path(__file__).with_name("_workers.py")
ROUNDS = 30
FLIPS = 400  # more than a child gets through before it is killed


def build(store_path: str) -> tuple[str, str, str, str, str]:
    """u → a (tool t, retried as r) on one branch, u' → b on the other; HEAD at b."""
    st = open_store(store_path)
    s = dag.create_session(st)
    u = dag.append(st, s.id, "user", "list the files")
    a = dag.append(st, s.id, "assistant", [ToolUseBlock(id="k", name="ls")])
    t = dag.append(st, s.id, "tool", "a b", name="ls", caller=a.id)
    r = dag.retry(st, s.id, t.id)
    dag.edit(st, s.id, u.id, output="list the folders")
    b = dag.append(st, s.id, "assistant", "none")
    st.close()
    return s.id, a.id, b.id, t.id, r.id


def state(store_path: str, sid: str, group: str) -> tuple[str, str]:
    st = open_store(store_path)
    try:
        info = st.get_session(sid)
        return info.metadata[SELECTED_KEY][group], info.head
    finally:
        st.close()


def test_a_kill_never_separates_the_selection_from_head(tmp_path):
    rng = random.Random(4321)
    store_path = str(tmp_path / "store")
    sid, a, b, t, r = build(store_path)
    plan = tmp_path / "plan.json"
    zygote = subprocess.Popen(
        [sys.executable, str(WORKERS), "zygote", store_path, sid],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    current = state(store_path, sid, t)
    assert current == (r, b)
    killed_while_flipping = 0
    try:
        for _ in range(ROUNDS):
            # Start with the variant that is not shown, so every checkout changes both.
            first = t if current[0] == r else r
            other = r if first == t else t
            variants = [first if i % 2 == 0 else other for i in range(FLIPS)]
            plan.write_text(json.dumps({"variants": variants, "back": b}))
            zygote.stdin.write(f"flip {plan}\n")
            zygote.stdin.flush()
            acks = 0
            line = zygote.stdout.readline()
            while not line.startswith("pid "):  # the child may print before the zygote
                acks += line.startswith(("sel ", "back "))
                line = zygote.stdout.readline()
            time.sleep(rng.uniform(0.0, 0.15))
            os.kill(int(line.split()[1]), signal.SIGKILL)
            for line in zygote.stdout:
                if line.startswith("dead "):
                    break
                acks += line.startswith(("sel ", "back "))
            # The states after 0, 1, 2, … whole checkouts of this round.
            expected = [current]
            for i in range(acks + 1):
                sel = variants[i // 2]
                expected.append((sel, a) if i % 2 == 0 else (expected[-1][0], b))
            got = state(store_path, sid, t)
            assert got in expected[acks : acks + 2], (
                f"after {acks} checkouts the store shows {got}; a whole checkout gives "
                f"{expected[acks]} or {expected[acks + 1]}"
            )
            killed_while_flipping += acks > 0
            current = got
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=30)
    assert killed_while_flipping >= ROUNDS // 2, "most kills should land while flipping"
