"""``rerender`` of the corpus against the raw renderer on the same sessions, one run.

Two workloads: the corpus's first files (``tests.corpus.FIRST``: 211 sessions, short
ones, 11.7 KB a body) and the held-out Claude Code transcripts (the corpus's
``claude-code`` files of the validation split: long agent sessions, bodies of a few
hundred KB), each in a SQLite store.

- **rerender**: ``ctxrules.batch.rerender`` of every corpus session (a SQLite store)
  under the default rules, one job in this process: every request point replayed
  twice (no rules, the rules), every body rendered and estimated, its cache use
  predicted, every commit checked, the last request's quality scored;
- **render_requests**: ``ctxrules.requests.render_requests`` of the same sessions'
  requests (``session_requests`` under the default rules, commits made beforehand),
  each session for the provider rerender renders it for, one thread: the bodies alone.

Both run in the same process, alternating round by round, CPU time and wall time.
Targets (issue 24): rerender ≥ 25 % of render_requests' bodies per second (one body per
request point) and ≥ 1,500 request points per second per core.

How to reproduce::

    PYTHONPATH=. .venv/bin/python benches/bench_rerender_vs_render.py --rounds 3

``--full`` adds a third run, alternating with the other two: rerender with every
request rendered whole (the engine without its session renderer).

Under ``make test`` (benchmarks disabled) both run once on a few sessions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.corpus import CORPUS, FIRST
from tests.corpus import files as corpus_files

from ctxrules.batch import ReplayOptions, rerender
from ctxrules.batch import session as replay
from ctxrules.batch.requests import render_provider, session_data
from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.engine import Engine
from ctxrules.errors import CtxrulesError
from ctxrules.importers import import_paths
from ctxrules.render import clear_cache as clear_render_cache
from ctxrules.requests import Request, render_requests, session_requests
from ctxrules.store import open_store
from ctxrules.tokenizers import clear_cache as clear_token_cache

CONFIG = PipelineConfig.preset("default")
OPTIONS = ReplayOptions.of(CONFIG)


class Workload:
    """The corpus in a SQLite store, and per provider the requests of its sessions."""

    def __init__(self, files: list[Path], directory: Path, limit: int | None = None) -> None:
        self.location = str(directory / "store")
        store = open_store(self.location)
        try:
            for f in files:  # one at a time: a file today's importers refuse is left out
                try:
                    import_paths(store, [str(f)])
                except CtxrulesError:
                    pass
            ids = sorted(s.id for s in store.list_sessions())[:limit]
            pipeline = Pipeline.from_config(CONFIG)
            self.sessions = ids
            self.by_provider: dict[str, list[list[Request]]] = defaultdict(list)
            for sid in ids:
                data = session_data(store, sid)
                provider = render_provider(None, None, data.metadata, data.nodes)
                requests = session_requests(store, sid, config=pipeline)
                if requests:
                    self.by_provider[provider].append(requests)
        finally:
            store.close()
        self.requests = sum(len(s) for ss in self.by_provider.values() for s in ss)

    def rerender(self) -> dict[str, Any]:
        """One rerender of every session (one job, this process); its totals."""
        result = rerender([self.location], OPTIONS, jobs=1, sessions=self.sessions)
        assert result.totals["errors"] == 0, result.totals
        return result.totals

    def rerender_full(self) -> dict[str, Any]:
        """``rerender`` with every request rendered whole (no session renderer)."""
        real = Engine._renderer
        Engine._renderer = lambda self, session: None  # type: ignore[method-assign]
        try:
            return self.rerender()
        finally:
            Engine._renderer = real  # type: ignore[method-assign]

    def render(self) -> int:
        """Every request's body (render_requests, one thread); the bytes rendered."""
        store = open_store(self.location, create=False)
        try:
            total = 0
            for provider, sessions in self.by_provider.items():
                for bodies in render_requests(store, sessions, provider, threads=1, meta=False):
                    total += sum(len(r.body) for r in bodies)
            return total
        finally:
            store.close()


def _time(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """CPU and wall time of ``fn`` from cold caches (the core's prepared items and token
    counts, and the replay's pipelines with what their rules keep, such as result_cap's
    cuts): each round is a first look at the sessions, as a rerender of a new corpus."""
    clear_render_cache()
    clear_token_cache()
    replay._SETUPS.clear()  # built again for the round (private: the bench's own reach)
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - w0, out


WORKLOADS = {
    "first": lambda: [CORPUS / f for f in FIRST],
    "held-out": lambda: corpus_files(kind="claude-code", split="validation"),
}


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_rerender_against_render(benchmark, workload, tmp_path):
    """Under ``make test``: both once on two sessions of each workload."""
    w = Workload(WORKLOADS[workload](), tmp_path, limit=None if not benchmark.disabled else 2)
    totals = benchmark.pedantic(w.rerender, rounds=1 if benchmark.disabled else 3)
    assert w.render() > 0
    benchmark.extra_info.update(requests=totals["requests"], render_requests=w.requests)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workload", choices=list(WORKLOADS), action="append")
    ap.add_argument("--full", action="store_true", help="also rerender with full renders")
    args = ap.parse_args(argv)
    print(
        "| workload | run | bodies | CPU s (min / median) | wall s (min / median) "
        "| bodies/s (CPU, min) | MB/s | rerender ÷ render_requests |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in args.workload or list(WORKLOADS):
        with tempfile.TemporaryDirectory() as d:
            w = Workload(WORKLOADS[name](), Path(d))
            times: dict[str, list[tuple[float, float]]] = {"rerender": [], "render_requests": []}
            if args.full:
                times["rerender (full renders)"] = []
            totals: dict[str, Any] = {}
            body_bytes = 0
            for _ in range(args.rounds):  # alternating, so both see the same machine
                if args.full:
                    cpu, wall, full_totals = _time(w.rerender_full)
                    times["rerender (full renders)"].append((cpu, wall))
                cpu, wall, totals = _time(w.rerender)
                times["rerender"].append((cpu, wall))
                cpu, wall, body_bytes = _time(w.render)
                times["render_requests"].append((cpu, wall))
            if args.full:
                assert full_totals == totals, "full and incremental rerenders differ"
        runs = [
            ("rerender", totals["requests"], totals["rules"]["body_bytes"] / 1e6),
            ("render_requests", w.requests, body_bytes / 1e6),
        ]
        if args.full:
            runs.insert(0, ("rerender (full renders)", *runs[0][1:]))
        rates = {run: n / min(t[0] for t in times[run]) for run, n, _ in runs}
        for run, n, size in runs:
            cpu = [t[0] for t in times[run]]
            wall = [t[1] for t in times[run]]
            # Each rerender's bodies per second against the renderer's.
            share = None if run == "render_requests" else rates[run] / rates["render_requests"]
            print(
                f"| {name} ({len(w.sessions)} sessions) | {run} | {n:,} "
                f"| {min(cpu):.2f} / {statistics.median(cpu):.2f} "
                f"| {min(wall):.2f} / {statistics.median(wall):.2f} "
                f"| {rates[run]:,.0f} | {size / min(cpu):,.1f} "
                f"| {'' if share is None else f'{share:.1%}'} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
