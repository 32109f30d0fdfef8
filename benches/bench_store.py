"""The stores under a fleet: appends/s and commits/s on PostgreSQL and SQLite, with 1
and with 8 writer processes, side by side in one run (groups ``append ×N`` and
``commit ×N``).

Each writer is a process of its own (``_store_writer.py``) with its own session, as
agents of a fleet are; a round releases every writer at once for ``K`` operations
each and ends when the last one is done, so a round's time is the fleet's.  Both
stores are durable on acknowledgement: SQLite in WAL mode with ``synchronous=FULL``,
PostgreSQL (the run's own server, ``pg_server``, default settings: ``fsync`` on) with
``synchronous_commit = on``.  An append is ``dag.append`` at HEAD (a ~0.5 KB node);
a commit is ``put_commit`` of a row with a 2 KB delta, compare-and-set against its
head.  ``extra_info`` has the operations per round; ops/s = ops / the median.
Under ``make test`` (benchmarks disabled) the 1-writer cases run one small round;
8 processes appending and committing at once are checked by
``tests/reliability/test_concurrent_writers.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ctxrules.store import open_store

WRITER = Path(__file__).with_name("_store_writer.py")


@pytest.fixture
def location(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "store")
        return
    server = request.getfixturevalue("pg_server")
    url = server.new_store()
    yield url
    server.drop_store(url)


@pytest.mark.parametrize("writers", [1, 8])
@pytest.mark.parametrize("location", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("op", ["append", "commit"])
def test_fleet(benchmark, location, writers, op):
    if benchmark.disabled and writers > 1:
        pytest.skip("8 writer processes: make bench (tests/reliability covers their result)")
    open_store(location).close()  # created once, before the writers race to open it
    per_writer = 5 if benchmark.disabled else 400 // writers
    procs = [
        subprocess.Popen(
            [sys.executable, str(WRITER), location, f"w{k}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(writers)
    ]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"

        def round_() -> None:
            for p in procs:
                p.stdin.write(f"{op} {per_writer}\n")
            for p in procs:
                p.stdin.flush()
            for p in procs:
                assert p.stdout.readline().strip() == "done"

        benchmark.group = f"{op} x{writers}"
        benchmark.pedantic(round_, rounds=5, warmup_rounds=1)
        benchmark.extra_info.update(ops=writers * per_writer)
    finally:
        for p in procs:
            p.stdin.close()
        for p in procs:
            assert p.wait(timeout=60) == 0
    st = open_store(location)
    try:  # what the writers acknowledged is there: dense seq per session, every row
        for s in st.list_sessions():
            rounds = 1 if benchmark.disabled else 6
            if op == "append":
                assert [n.seq for n in st.nodes(s.id)] == list(range(1, rounds * per_writer + 1))
            else:
                assert len(st.session_commits(s.id)) == rounds * per_writer
    finally:
        st.close()
