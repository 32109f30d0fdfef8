"""Worker of the full-disk probe: run inside a user and mount namespace of its own, on
a small tmpfs mounted at DIR (``test_disk_full.py`` starts it with ``unshare``).

``_diskfull.py DIR SMALL BIG``: imports SMALL into DIR/store, fills the filesystem
but ~100 KB, then runs the commands that write (import BIG, fork, store copy,
view --export, rerender --out, tune --out, compact) as real processes and reports,
as one JSON line, each one's exit code and stderr, the store's integrity check and
its session (HEAD, node count) before and after ``compact``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator


def ctxrules(*args: str, cwd: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "ctxrules", *args],
        capture_output=True, text=True, cwd=cwd, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return {"argv": list(args), "code": proc.returncode, "stderr": proc.stderr[-3000:]}


BALLAST = 256 * 1024  # room the probe's own reads take back while the disk is full


@contextlib.contextmanager
def room(root: str) -> Iterator[None]:
    """Free the ballast while the probe reads the store (a reader of a WAL store makes
    its shared-memory file, which a full disk refuses), then fill it again."""
    ballast = os.path.join(root, "ballast")
    os.unlink(ballast)
    try:
        yield
    finally:
        with open(ballast, "wb") as fh, contextlib.suppress(OSError):
            fh.write(b"\0" * BALLAST)
            fh.flush()


def state(root: str, db: str, session: str) -> list[object]:
    with room(root):
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            head = conn.execute("SELECT head FROM sessions WHERE id = ?", (session,))
            nodes = conn.execute("SELECT count(*) FROM nodes").fetchone()[0]
            commits = conn.execute("SELECT count(*) FROM commits").fetchone()[0]
            return [head.fetchone()[0], nodes, commits]
        finally:
            conn.close()


def main() -> None:
    root, small, big = sys.argv[1], sys.argv[2], sys.argv[3]
    store = os.path.join(root, "store")
    done = ctxrules("import", small, "--store", store, "--json", cwd=root)
    assert done["code"] == 0, done
    listed = subprocess.run(
        [sys.executable, "-m", "ctxrules", "sessions", "--store", store, "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    session = json.loads(listed.stdout)[0]["id"]
    head = json.loads(listed.stdout)[0]["head"]
    with open(os.path.join(root, "ballast"), "wb") as fh:
        fh.write(b"\0" * BALLAST)
    # Fill the filesystem, then give back ~100 KB.
    with open(os.path.join(root, "filler"), "wb") as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        fh.truncate(max(0, fh.tell() - 100 * 1024))
    db = os.path.join(store, "ctxrules.db")
    before = state(root, db, session)
    runs = [
        ctxrules("import", big, "--store", store, cwd=root),
        ctxrules("fork", session, head, "--store", store, cwd=root),
        ctxrules("store", "copy", store, os.path.join(root, "copy"), cwd=root),
        ctxrules("view", session, "--store", store, "--export", "page.html", cwd=root),
        ctxrules("rerender", big, "--jobs", "1", "--quiet", "--out", "out.jsonl", cwd=root),
        ctxrules(
            "tune",
            small,
            "--param",
            "tool_aging.tail_turns=1..3",
            "--jobs",
            "1",
            "--preset",
            "default",
            "--out",
            "tune",
            cwd=root,
        ),
    ]
    mid = state(root, db, session)
    runs.append(ctxrules("compact", session, "--store", store, "--now", "1767225600", cwd=root))
    after = state(root, db, session)
    with room(root):
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        conn.close()
    left = sorted(n for n in os.listdir(root) if n.startswith("."))
    print(json.dumps({"runs": runs, "integrity": check, "before": before, "mid": mid,
                      "after": after, "hidden": left, "page": os.path.exists(
                          os.path.join(root, "page.html"))}))  # fmt: skip


if __name__ == "__main__":
    main()
