"""Worker processes for the reliability tests (run as scripts, never imported by pytest).

``zygote STORE SESSION``: imports ctxrules once, then for every ``go N`` line on stdin
forks a child that appends to SESSION forever, printing ``ack <id>`` after each append
returned; the zygote prints ``pid <pid>`` after forking and ``dead N`` once the child
is gone (so every ack of that child comes before it on the same pipe).  Forking from a
warm process keeps 50+ crash rounds within seconds instead of paying an interpreter
start-up per round.

An ``import PATH`` line forks a child that imports PATH instead (``ack <session>
<calls>`` per imported session), to kill an import half-way.  A ``flip PLAN`` line
forks a child that checks out, round after round, the tool-call variant ``i`` of the
JSON file PLAN (``{"variants": [...], "back": NODE}``) and then NODE on the other
branch, printing ``sel i`` and ``back i`` after each checkout returned.

``appender STORE SESSION TAG COUNT``: waits for a line on stdin, appends COUNT nodes,
then prints every acknowledged id.

``cli ARGS…``: imports the command line, waits for a line on stdin, then runs
``ctxrules ARGS…`` and exits with its code (to start several commands at one moment).

``writer STORE SHARED TAG COUNT``: creates a session of its own, waits for a line, then
COUNT times appends a node at HEAD of SHARED and one to its own session and commits
its own session's head, committing SHARED's head every 10 rounds; prints a JSON
object of what was acknowledged, then waits for another line and commits SHARED's
final head at a time of its own (``2e6`` + the number in TAG), printing the id.

``holder STORE SESSION``: in one transaction appends to SESSION and imports a new
session of 50 nodes (source ``killed``), prints ``open`` and waits to be killed.
"""

from __future__ import annotations

import os
import sys
import time


def payload(node_id: str) -> str:
    """The content a node must still have after any crash."""
    return f"payload of {node_id} | " * 16


def flip(store_path: str, session: str, plan_path: str) -> None:
    """Check out variant i, then the other branch, for i = 0, 1, … until killed."""
    import json

    from ctxrules import dag
    from ctxrules.store import open_store

    with open(plan_path) as f:
        plan = json.load(f)
    store = open_store(store_path)
    for i, variant in enumerate(plan["variants"]):
        dag.checkout(store, session, variant)
        os.write(1, f"sel {i}\n".encode())
        dag.checkout(store, session, plan["back"])
        os.write(1, f"back {i}\n".encode())


def zygote(store_path: str, session: str) -> None:
    from ctxrules import dag
    from ctxrules.importers import import_paths
    from ctxrules.store import open_store

    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd not in ("go", "import", "flip"):
            break
        # The child starts only once "pid" is on the pipe, so none of its lines can come
        # before it or land inside it (both processes write to the same pipe).
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            os.read(go_r, 1)
            os.close(go_r)
        if pid == 0 and cmd == "flip":
            try:
                flip(store_path, session, arg)
            finally:
                os._exit(0)
        if pid == 0 and cmd == "import":  # the child: import one file, then report
            try:
                store = open_store(store_path)
                for res in import_paths(store, [arg]):
                    os.write(1, f"ack {res.id} {res.calls}\n".encode())
            finally:
                os._exit(0)
        if pid == 0:  # the child: append until killed
            try:
                store = open_store(store_path)
                i = 0
                while True:
                    nid = f"r{arg}-{i}"
                    dag.append(store, session, "user", payload(nid), node_id=nid)
                    os.write(1, f"ack {nid}\n".encode())
                    i += 1
            finally:
                os._exit(1)
        os.close(go_r)
        os.write(1, f"pid {pid}\n".encode())  # one write: never split by the child's
        os.write(go_w, b"g")
        os.close(go_w)
        os.waitpid(pid, 0)
        os.write(1, f"dead {arg}\n".encode())


def appender(store_path: str, session: str, tag: str, count: int) -> None:
    from ctxrules import dag
    from ctxrules.store import open_store

    store = open_store(store_path)
    sys.stdin.readline()  # start together with the other writers
    acked = []
    for i in range(count):
        nid = f"{tag}-{i}"
        dag.append(store, session, "user", payload(nid), node_id=nid)
        acked.append(nid)
    store.close()
    sys.stdout.write("\n".join(acked) + "\n")


def writer(store_path: str, shared: str, tag: str, count: int) -> None:
    import json

    from ctxrules import dag
    from ctxrules.commit import make_commit
    from ctxrules.store import open_store

    store = open_store(store_path)
    own = dag.create_session(store, source=tag).id
    sys.stdin.readline()  # start together with the other writers
    acked: dict[str, list[str]] = {"shared": [], "own": [], "commits": []}
    for i in range(count):
        nid = f"{tag}-{i}"
        dag.append(store, shared, "user", payload(nid), node_id=nid)
        acked["shared"].append(nid)
        mine = f"{tag}-own-{i}"
        dag.append(store, own, "user", payload(mine), node_id=mine)
        acked["own"].append(mine)
        acked["commits"].append(make_commit(own, now=float(i), store=store).id)
        if i % 10 == 9:
            acked["commits"].append(make_commit(shared, now=1e6, store=store).id)
    print(json.dumps({"session": own, **acked}), flush=True)
    sys.stdin.readline()  # every writer is done: commit the final head together, each
    # at a time of its own, so only the compare-and-set keeps their commits to one
    now = 2e6 + int(tag.lstrip("w") or 0)
    print(make_commit(shared, now=now, store=store).id, flush=True)
    store.close()


def holder(store_path: str, session: str) -> None:
    from ctxrules import dag
    from ctxrules.model import Node
    from ctxrules.store import open_store

    store = open_store(store_path)
    nodes = [
        Node(id=f"killed-{i}", seq=0, created_at=1.0, role="user", output=payload(f"k{i}"))
        for i in range(50)
    ]
    with store.transaction():
        dag.append(store, session, "user", "never committed", node_id="killed-append")
        store.create_session(session_id="killed", source="killed", nodes=nodes)
        print("open", flush=True)
        time.sleep(600)  # killed long before


def cli(argv: list[str]) -> int:
    from ctxrules.cli import main

    sys.stdin.readline()
    return main(argv)


if __name__ == "__main__":
    if sys.argv[1] == "cli":
        sys.exit(cli(sys.argv[2:]))
    if sys.argv[1] == "zygote":
        zygote(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "writer":
        writer(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif sys.argv[1] == "holder":
        holder(sys.argv[2], sys.argv[3])
    else:
        appender(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
