"""A writer process for benches/bench_store.py (run as a script, never collected).

``_store_writer.py STORE TAG``: opens STORE, creates a session of its own, prints
``ready``, then for each line ``append K`` appends K nodes at HEAD of its session and
for each line ``commit K`` puts K commit rows (each the child of the previous one, at a
new head, compare-and-set against the head's latest), printing ``done`` after each.
"""

from __future__ import annotations

import sys


def main(location: str, tag: str) -> None:
    from ctxrules import dag
    from ctxrules.store import CommitRow, open_store

    store = open_store(location)
    session = dag.create_session(store, source=tag).id
    text = f"{tag}: please look at the failing test and fix it | " * 8  # ~0.5 KB
    blob = bytes(range(256)) * 8  # a 2 KB delta, about what a turn's commit stores
    made = 0
    parent = None
    print("ready", flush=True)
    for line in sys.stdin:
        op, count = line.split()
        for _ in range(int(count)):
            made += 1
            if op == "append":
                dag.append(store, session, "user", text, created_at=float(made))
            else:
                row = CommitRow(
                    id=f"cc_{tag}_{made}",
                    session_id=session,
                    parent_id=parent,
                    head_node_id=f"{tag}-h{made}",
                    rules_version="bench",
                    created_at=float(made),
                    total_tokens=made,
                    n_items=made,
                    meta=b"m" * 200,
                    delta=blob,
                )
                assert store.put_commit(row, if_latest=None) == row.id
                parent = row.id
        print("done", flush=True)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
