"""History graph throughput: corpus import, and one durable append against JSONL.

Groups, each compared inside the group by pytest-benchmark's table:
- ``import``: every file of tests/data/corpus (12 files, ~4.6 MB, 5,500+ calls) into a
  fresh store, parse + one transaction per file;  ``extra_info`` has bytes and calls,
  so MB/s = bytes / mean and calls/s = calls / mean;
- ``append``: one acknowledged append, ours (SQLite WAL, ``synchronous=FULL``: the append
  is on disk when it returns) against a plain JSONL line append as Claude Code does it
  (``appendFileSync``: no fsync, so not durable) and the same append followed by
  ``fsync`` (the durable equivalent), in the same run on the same disk.

Every benchmark checks its result (counts, stored ids), so a fast wrong answer fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ctxrules import dag
from ctxrules.importers import import_paths
from ctxrules.store import open_store


def corpus_files(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.rglob("*") if p.is_file() and p.name != "SOURCES.md")


@pytest.mark.benchmark(group="import")
def test_import_corpus(benchmark, corpus, tmp_path):
    files = corpus_files(corpus)
    size = sum(p.stat().st_size for p in files)
    rounds = iter(range(10_000))

    def setup():
        store = open_store(tmp_path / f"s{next(rounds)}")
        return (store,), {}

    def run(store):
        results = import_paths(store, [str(p) for p in files])
        store.close()
        return results

    results = benchmark.pedantic(run, setup=setup, rounds=5, iterations=1)
    calls = sum(r.calls for r in results)
    # tau-bench alone has 5,308 messages; every Claude Code line gives at most one node.
    assert calls > 5308
    assert len({r.source for r in results}) == len(files)
    benchmark.extra_info.update(bytes=size, calls=calls, files=len(files))


PAYLOAD = {"role": "user", "content": "x" * 400}


@pytest.fixture
def session(tmp_path):
    store = open_store(tmp_path / "append")
    sid = dag.create_session(store).id
    yield store, sid
    store.close()


@pytest.mark.benchmark(group="append")
def test_append_ctxrules_sqlite_durable(benchmark, session):
    store, sid = session
    node = benchmark(lambda: dag.append(store, sid, "user", PAYLOAD["content"]))
    assert store.get_node(node.id).output == PAYLOAD["content"]
    assert store.get_session(sid).head == node.id


@pytest.mark.benchmark(group="append")
@pytest.mark.parametrize("fsync", [False, True], ids=["like_claude_code", "fsync"])
def test_append_jsonl(benchmark, tmp_path, fsync):
    """A JSONL line append: as Claude Code's appendFileSync does it (open, write, close,
    no sync), or made durable with an fsync like our append."""
    path = tmp_path / "session.jsonl"
    line = (json.dumps(PAYLOAD) + "\n").encode()

    def append():
        with open(path, "ab") as fh:
            fh.write(line)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())

    benchmark(append)
    assert path.read_bytes().endswith(line)
