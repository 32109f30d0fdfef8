"""The same input and configuration give byte-identical results whatever the number of
workers or the backend: one process, a local pool of two, a Dask cluster of two."""

from __future__ import annotations

import json
import os

from distributed import Client

from ctxrules.batch import local_cluster, rerender

from .conftest import OPTIONS


def test_the_lines_are_sorted_records_with_sorted_keys(reference):
    lines = reference.splitlines()
    ids = [json.loads(line)["session"] for line in lines]
    assert ids == sorted(ids) and len(set(ids)) == 19
    for line in lines:
        record = json.loads(line)
        assert (
            line
            == json.dumps(
                record, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            ).encode()
        )
        assert "error" not in record, record


def test_two_local_workers_write_the_same_bytes(subset, reference, tmp_path):
    out = tmp_path / "out.jsonl"
    result = rerender([str(subset)], OPTIONS, jobs=2, out=out)
    assert (result.replayed, result.resumed, result.interrupted) == (19, 0, False)
    assert out.read_bytes() == reference


def test_a_dask_cluster_of_worker_processes_writes_the_same_bytes(subset, reference, tmp_path):
    out = tmp_path / "out.jsonl"
    with local_cluster(2) as cluster:
        # Two worker processes of one thread each, on the loopback interface only.
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        assert len(cluster.workers) == 2
        workers = cluster.scheduler_info["workers"].values()
        assert [info["nthreads"] for info in workers] == [1, 1]
        with Client(cluster) as client:  # separate processes, none of them this one
            pids = set(client.run(os.getpid).values())
        assert len(pids) == 2 and os.getpid() not in pids
        result = rerender(
            [str(subset)],
            OPTIONS,
            jobs=2,
            backend="dask",
            scheduler=cluster.scheduler_address,
            out=out,
        )
    assert (result.replayed, result.interrupted) == (19, False)
    assert out.read_bytes() == reference


def test_the_records_do_not_depend_on_the_batch_they_were_in(subset, reference):
    # A session replayed alone gives the line it gets among all the others.
    first = json.loads(reference.splitlines()[4])
    alone = rerender([str(subset)], OPTIONS, jobs=1, sessions=[first["session"]])
    assert alone.records == [first]
