"""History graph throughput: corpus import, and one durable append against JSONL.

Groups, each compared inside the group by pytest-benchmark's table:
- ``import``: the first files of tests/data/corpus (``tests.corpus.FIRST``: 12 files,
  ~4.6 MB, 5,500+ calls) into a fresh store, parse + one transaction per file;
  ``extra_info`` has bytes and calls, so MB/s = bytes / mean and calls/s = calls / mean;
- ``append``: one acknowledged append, ours (SQLite WAL, ``synchronous=FULL``: the append
  is on disk when it returns) against a plain JSONL line append as Claude Code does it
  (``appendFileSync``: no fsync, so not durable) and the same append followed by
  ``fsync`` (the durable equivalent), in the same run on the same disk.

- ``tasks``: a generated Claude Code transcript with 1k and 8k Task sub-agent calls
  (four lines each, shaped like the corpus's ccviewer_5c0375b4 file: sidechains
  inline), imported into a fresh store, beside the floor of decoding its lines with
  ``json.loads`` alone; t(8k) / t(1k) is ≈ 8 when the import is linear;
- ``memory``: tracemalloc's peak of Python allocations during one import, ÷ the file
  size, and the growth of the peak RSS of a fresh process doing the same import, for
  a large Claude Code transcript (the corpus's ccviewer_5c0375b4 file repeated), one
  very long line, and a large JSON document (tau-bench runs repeated).  Under
  ``--benchmark-disable`` (``make test``) the files are small and only the bounds are
  checked.

Every benchmark checks its result (counts, stored ids), so a fast wrong answer fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from tests.corpus import FIRST

from ctxrules import dag
from ctxrules.importers import import_paths
from ctxrules.store import open_store

REAL_CC = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
TAU = "openai-chat-json/taubench_gpt-4o-airline.json"


def corpus_files(corpus: Path) -> list[Path]:
    return [corpus / f for f in FIRST]


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


# -- cost against the input: Task sub-agent calls --------------------------------------


@pytest.fixture(scope="module", params=[1000, 8000], ids=["1k_tasks", "8k_tasks"])
def task_transcript(request, claude_code_generator, tmp_path_factory):
    path = tmp_path_factory.mktemp("tasks") / f"tasks_{request.param}.jsonl"
    return request.param, claude_code_generator.tasks(path, request.param)


@pytest.mark.benchmark(group="tasks")
def test_import_task_calls(benchmark, task_transcript, tmp_path):
    tasks, path = task_transcript
    rounds = iter(range(10_000))

    def setup():
        return (open_store(tmp_path / f"s{next(rounds)}"),), {}

    def run(store):
        (result,) = import_paths(store, [str(path)])
        store.close()
        return result

    result = benchmark.pedantic(run, setup=setup, rounds=3, iterations=1)
    assert result.calls == 4 * tasks + 1  # prompt; per Task: call, result, sidechain of 2
    benchmark.extra_info.update(tasks=tasks, bytes=path.stat().st_size, calls=result.calls)


@pytest.mark.benchmark(group="tasks")
def test_decode_task_lines_floor(benchmark, task_transcript):
    """What any importer of the file pays at least: decoding every line."""
    tasks, path = task_transcript

    def run():
        with open(path, "rb") as fh:
            return [json.loads(line) for line in fh]

    lines = benchmark.pedantic(run, rounds=3, iterations=1)
    assert len(lines) == 4 * tasks + 1
    benchmark.extra_info.update(tasks=tasks, bytes=path.stat().st_size)


# -- memory against the file size --------------------------------------------------


def traced_peak(path: Path, store_dir: Path) -> int:
    """tracemalloc's peak of Python allocations while ``path`` is imported."""
    store = open_store(store_dir)
    tracemalloc.start()
    try:
        import_paths(store, [str(path)])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        store.close()


_RSS_CHILD = """
import sys
from ctxrules.importers import import_paths
from ctxrules.store import open_store

def status(field):
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith(field))

store = open_store(sys.argv[2])
import_paths(store, [sys.argv[3]])  # a first import loads plugins and modules
before = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the peak (VmHWM) starts again from the current RSS
import_paths(store, [sys.argv[1]])
print(status("VmHWM:") - before)
"""


def rss_growth(path: Path, store_dir: Path, warm: Path) -> int:
    """How much a fresh process's peak RSS grows while it imports ``path`` (bytes).

    Read from /proc (``ru_maxrss`` would carry the parent's peak across the exec).
    """
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(path), str(store_dir), str(warm)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.strip()) * 1024  # kB in /proc/self/status


def _tau_document(corpus: Path, path: Path, copies: int) -> Path:
    runs = json.loads((corpus / TAU).read_text())
    path.write_text(json.dumps([run for _ in range(copies) for run in runs]))
    return path


MEMORY_CASES = {
    # name: (how to write the file at (bench size, test size), Python-allocation bound)
    "claude_code_lines": (lambda g, c, p, n: g.replicated(p, c / REAL_CC, n), (200, 20), 4.0),
    "claude_code_one_line": (
        lambda g, c, p, n: g.single_line(p, n),
        (50_000_000, 4_000_000),
        4.0,
    ),
    "json_document": (lambda g, c, p, n: _tau_document(c, p, n), (10, 1), None),
}


@pytest.mark.benchmark(group="memory")
@pytest.mark.parametrize("case", sorted(MEMORY_CASES))
def test_import_peak_memory(benchmark, case, claude_code_generator, corpus, tmp_path):
    write, (big, small), bound = MEMORY_CASES[case]
    suffix = ".json" if case == "json_document" else ".jsonl"
    path = write(
        claude_code_generator,
        corpus,
        tmp_path / f"{case}{suffix}",
        big if benchmark.enabled else small,
    )
    size = path.stat().st_size
    traced = traced_peak(path, tmp_path / "traced")
    rss = rss_growth(path, tmp_path / "rss", corpus / REAL_CC)
    benchmark.extra_info.update(
        bytes=size,
        traced_peak=traced,
        traced_ratio=traced / size,
        rss_growth=rss,
        rss_ratio=rss / size,
    )
    # And the time of one import without tracing, so the figures sit in the same table.
    rounds = iter(range(10_000))

    def setup():
        return (open_store(tmp_path / f"timed{next(rounds)}"),), {}

    def run(store):
        results = import_paths(store, [str(path)])
        store.close()
        return results

    assert benchmark.pedantic(run, setup=setup, rounds=1, iterations=1)
    if bound is not None:
        assert traced / size <= bound, f"{case}: peak {traced / size:.2f}x the file"
