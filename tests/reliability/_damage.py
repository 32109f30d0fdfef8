"""Worker of the damaged-store probe (run as a script, never imported by pytest).

``_damage.py STORE SESSION FLIPS SEED``: for each of FLIPS rounds, copies the SQLite
file STORE (a store whose WAL is checkpointed: one file), flips one byte at a seeded
random offset past the 100-byte header, and runs the read and write commands on the
copy in this process (``ctxrules.cli.main``, output swallowed).  Prints one JSON line:
``{"runs": N, "tracebacks": [[offset, command, "Type: message"], ...], "exit": {code: n}}``
— a traceback is any exception that escaped ``main`` (what a user would see as one).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import sys
import tempfile


def main() -> None:
    store, session, flips, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    from ctxrules.cli import main as cli

    rng = random.Random(seed)
    size = os.path.getsize(store)
    work = tempfile.mkdtemp(prefix="ctxrules-damage-")
    tracebacks: list[list[object]] = []
    codes: dict[str, int] = {}
    runs = 0
    commands = [
        ["sessions"],
        ["log", session],
        ["commit", session],
        ["stats", session],
        ["render", session, "--provider", "anthropic"],
        ["view", session, "--json"],
        ["fork", session],
    ]
    for _ in range(flips):
        offset = rng.randrange(100, size)
        copy = os.path.join(work, "store.db")
        shutil.copyfile(store, copy)
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(copy + suffix)
        with open(copy, "r+b") as fh:
            fh.seek(offset)
            byte = fh.read(1)[0]
            fh.seek(offset)
            fh.write(bytes([byte ^ rng.randrange(1, 256)]))
        for argv in commands:
            runs += 1
            sink = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
            try:
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    code = cli(
                        [*argv, "--store", copy, "--now", "1767225600"]
                        if argv[0] in ("commit", "stats", "render", "view")
                        else [*argv, "--store", copy]
                    )
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException as exc:  # what would reach the user as a traceback
                tracebacks.append([offset, argv[0], f"{type(exc).__name__}: {str(exc)[:160]}"])
                continue
            codes[str(code)] = codes.get(str(code), 0) + 1
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"runs": runs, "tracebacks": tracebacks, "exit": codes}))


if __name__ == "__main__":
    main()
