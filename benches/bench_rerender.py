"""``ctxrules rerender`` of the corpus's first files (``tests.corpus.FIRST``: 211
sessions, a SQLite store) under the
default rules: the local backend with 1 and 2 jobs (a pool started by each run), and
Dask with 2 worker processes — on a ``LocalCluster`` (127.0.0.1) started once outside
the timed rounds (its start time is in ``extra_info``), and on one each run starts and
stops itself (``dask x2 started``, what the command does without ``--scheduler``).
Every request of every session is prepared twice (no rules, the rules) and every body
rendered.  ``extra_info`` has the sessions, requests
and body bytes of a run: requests/s and bytes/s are those over the median time.

Under ``make test`` (benchmarks disabled) each runs once on four sessions, and all
the runs must give the same records.
"""

from __future__ import annotations

import time

import pytest

from ctxrules.batch import ReplayOptions, local_cluster, rerender
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.store import open_store

OPTIONS = ReplayOptions.of(PipelineConfig.preset("default"))
SMALL = 4
_seen: dict[str, list[dict]] = {}


@pytest.fixture(scope="module")
def store(first_corpus, tmp_path_factory) -> str:
    location = str(tmp_path_factory.mktemp("rerender") / "store")
    st = open_store(location)
    try:
        import_paths(st, [str(first_corpus)])
    finally:
        st.close()
    return location


@pytest.fixture(scope="module")
def cluster():
    started = time.perf_counter()
    with local_cluster(2) as c:
        yield c, time.perf_counter() - started


def _sessions(benchmark, store: str) -> list[str]:
    if not benchmark.disabled:
        return []
    st = open_store(store, create=False)
    try:
        return sorted(s.id for s in st.list_sessions())[:SMALL]
    finally:
        st.close()


@pytest.mark.parametrize("backend", ["local x1", "local x2", "dask x2", "dask x2 started"])
def test_rerender_corpus(benchmark, store, backend, request):
    kind, jobs = backend.split(" x")
    jobs, started = jobs.split(" ")[0], jobs.endswith("started")
    options = {"backend": kind, "jobs": int(jobs), "sessions": _sessions(benchmark, store)}
    if kind == "dask" and not started:  # a running cluster; else the run starts its own
        c, start = request.getfixturevalue("cluster")
        options["scheduler"] = c.scheduler_address
        benchmark.extra_info["cluster_start_s"] = round(start, 2)
    results = []

    def run():
        results.append(rerender([store], OPTIONS, **options))

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    last = results[-1]
    assert not last.interrupted and last.totals["errors"] == last.totals["violations"] == 0
    assert all(r.records == last.records for r in results)
    _seen[backend] = last.records
    assert all(records == last.records for records in _seen.values())
    t = last.totals
    benchmark.extra_info.update(
        sessions=t["sessions"],
        requests=t["requests"],
        body_bytes=t["plain"]["body_bytes"] + t["rules"]["body_bytes"],
    )
