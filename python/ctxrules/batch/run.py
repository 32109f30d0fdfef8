"""``rerender``: replay many recorded sessions under a rule set, on all cores or on Dask.

Sessions are handed out in batches of consecutive session ids.  A worker receives
bytes (each session's ``SessionData``) and the plain options (a dict) and returns one
JSON line per session (``run_batch``, the one task function of every backend); the
main process reads the sources, writes the lines and reports progress.  Nothing of a
worker's result depends on which worker ran it or when, so the lines are the same
whatever ``jobs`` or backend.

Backends:

* ``local`` — a process pool (``concurrent.futures``, forkserver processes where the
  platform has them, else spawn) of ``jobs`` workers (default: every core);
  ``jobs=1`` runs in this process.  On Ctrl-C the workers finish the session they
  are on and return what they finished; nothing else starts.  Every worker watches
  the command (``_lifeline``) and ends when it does, however it ended (SIGKILL
  included), so no worker, fork server or resource tracker outlives it; an error
  that ends the run stops the workers before it is reported.
* ``dask`` — the same task function on a Dask ``distributed`` cluster: the scheduler at
  ``scheduler``, else a ``LocalCluster`` of ``jobs`` worker processes (one thread each,
  on 127.0.0.1) started for the run and stopped after it.  Every worker needs this
  package (and the plugins the rules come from) installed.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..commit import Pipeline
from ..errors import ConfigError, CtxrulesError
from ..importers import Skipped
from ._lifeline import watch_parent
from .output import OutFile, encode_record, totals
from .requests import SessionData
from .session import ReplayOptions, check_options, replay_session
from .sources import Sources, open_sources

__all__ = [
    "BACKENDS",
    "MAX_JOBS",
    "RerenderResult",
    "check_jobs",
    "local_cluster",
    "rerender",
    "run_batch",
]

BACKENDS = ("local", "dask")
#: The most sessions one batch holds: small enough that progress and a stop come soon.
MAX_BATCH = 16
#: The most worker processes a run starts (each holds an interpreter and the rules).
MAX_JOBS = 256

#: Set in a local pool's workers: the main process sets it to stop them (Ctrl-C).
_stop: Any = None


def run_batch(batch: Sequence[bytes], options: Mapping[str, Any]) -> list[tuple[str, bytes]]:
    """Replay every session of ``batch`` (``SessionData`` as MessagePack bytes) under
    ``options`` (``ReplayOptions`` as a dict); returns each session's id and line.

    In a local pool's worker, a stop asked for by the main process ends the batch
    between two sessions: what was finished is returned.
    """
    opts = msgspec.convert(options, ReplayOptions)
    out: list[tuple[str, bytes]] = []
    for raw in batch:
        if _stop is not None and _stop.is_set():
            break
        data = msgspec.msgpack.decode(raw, type=SessionData)
        out.append((data.id, encode_record(replay_session(data, opts))))
    return out


def _init_worker(stop: Any, command: int) -> None:
    global _stop
    _stop = stop
    watch_parent(command)  # a command killed outright takes its workers with it
    # Ctrl-C reaches the whole process group: only the main process decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass(frozen=True)
class RerenderResult:
    """What ``rerender`` did: every session's record (those resumed from ``out`` too),
    in session order, their ``totals``, how many sessions the sources hold
    (``sessions``), how many this run replayed (``replayed``) and found done already
    (``resumed``), and whether it was stopped before the end (``interrupted``: run it
    again with the same ``out`` to finish); ``skipped``: the files of the transcript
    folders no importer reads, with why; ``excluded``: the sessions left out."""

    records: list[dict[str, Any]]
    totals: dict[str, Any]
    sessions: int
    replayed: int
    resumed: int
    interrupted: bool
    skipped: list[Skipped] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)


Deliver = Callable[[list[tuple[str, bytes]]], None]


def rerender(
    sources: Sequence[str],
    options: ReplayOptions,
    *,
    jobs: int | None = None,
    backend: str = "local",
    scheduler: str | None = None,
    out: str | os.PathLike[str] | None = None,
    sessions: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
    force: bool = False,
    format: str = "auto",
    exclude: Sequence[str] = (),
) -> RerenderResult:
    """Replay every session of ``sources`` (``batch.sources``) under ``options``.

    ``jobs``: worker processes (default: every core); ``backend``: ``local`` or
    ``dask`` (``scheduler``: a Dask scheduler's address, else a local cluster is
    started); ``out``: the results file, resumed when it exists (``batch.output``;
    checked before anything is read: an existing file that is no results file is
    refused unless ``force``); ``sessions``: only these session ids; ``format``: the
    importer of the transcripts (``auto``: detected); ``exclude``: sessions left out, by
    id or transcript file;
    ``progress(done, total)`` is called as sessions finish.  Ctrl-C
    (``KeyboardInterrupt``) stops the run cleanly: the result says ``interrupted`` and
    ``out`` keeps every session that finished.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}", where="--backend", hint="local or dask")
    check_jobs(jobs)
    if scheduler and backend != "dask":
        raise ConfigError("a scheduler address needs --backend dask", where="--scheduler")
    workers = jobs or os.cpu_count() or 1
    check_options(options)
    plain = msgspec.to_builtins(options)
    expect = {
        "rules_version": _rules_version(options),
        "provider": options.provider,
        "model": options.model,
    }
    lines: dict[str, bytes] = {}
    # The output is checked (and locked) before any source is read or imported.
    outfile = OutFile(out, expect, force=force) if out is not None else None
    try:
        with open_sources(sources, sessions=sessions, format=format, exclude=exclude) as src:
            wanted = src.session_ids
            done_before = (
                {k: v for k, v in outfile.lines.items() if k in set(wanted)} if outfile else {}
            )
            lines.update(done_before)
            todo = [s for s in wanted if s not in done_before]
            finished = 0

            def deliver(results: list[tuple[str, bytes]]) -> None:
                nonlocal finished
                for session, line in results:
                    if outfile is not None:
                        outfile.add(session, line)
                    lines[session] = line
                finished += len(results)
                if progress is not None:
                    progress(finished, len(todo))

            if progress is not None:
                progress(0, len(todo))
            size = max(1, min(MAX_BATCH, math.ceil(len(todo) / (workers * 4))))
            batches = [todo[i : i + size] for i in range(0, len(todo), size)]
            try:
                if backend == "dask":
                    interrupted = _dask(batches, src, plain, workers, scheduler, deliver)
                else:
                    interrupted = _local(batches, src, plain, workers, deliver)
            finally:
                if outfile is not None:  # whatever ended the run: what finished is kept
                    outfile.finish(src.holds)
    finally:
        if outfile is not None:
            outfile.close()
    records = [msgspec.json.decode(lines[k]) for k in sorted(lines)]
    return RerenderResult(
        records=records,
        totals=totals(records),
        sessions=len(wanted),
        replayed=finished,
        resumed=len(done_before),
        interrupted=interrupted,
        skipped=src.skipped,
        excluded=src.excluded,
    )


def check_jobs(jobs: int | None) -> None:
    """``ConfigError`` unless ``jobs`` is ``None`` (every core) or 1 to ``MAX_JOBS``."""
    if jobs is not None and not 1 <= jobs <= MAX_JOBS:
        raise ConfigError(
            f"jobs must be between 1 and {MAX_JOBS}, got {jobs}",
            where="--jobs",
            hint="leave --jobs out for one worker per core",
        )


def _rules_version(options: ReplayOptions) -> str:

    return Pipeline.from_config(options.pipeline_config()).version


def _payloads(src: Sources, batches: list[list[str]]) -> Iterator[list[bytes]]:
    for batch in batches:
        yield [src.data(s) for s in batch]


def _local(
    batches: list[list[str]],
    src: Sources,
    options: dict[str, Any],
    jobs: int,
    deliver: Deliver,
) -> bool:
    """Run the batches on a local process pool (in this process for one job); returns
    whether Ctrl-C stopped it."""
    if jobs == 1:
        try:
            for payload in _payloads(src, batches):
                for one in payload:  # a session at a time: Ctrl-C loses at most one
                    deliver(run_batch([one], options))
        except KeyboardInterrupt:
            return True
        return False
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    stop = ctx.Event()
    pool = ProcessPoolExecutor(
        jobs, mp_context=ctx, initializer=_init_worker, initargs=(stop, os.getpid())
    )
    pending: set[Future[list[tuple[str, bytes]]]] = set()
    payloads = _payloads(src, batches)

    def submit() -> None:
        while len(pending) < 2 * jobs:
            payload = next(payloads, None)
            if payload is None:
                return
            pending.add(pool.submit(run_batch, payload, options))

    try:
        submit()
        while pending:
            done, still = wait(pending, return_when=FIRST_COMPLETED)
            pending.clear()
            pending.update(still)
            for future in done:
                deliver(future.result())
            submit()
    except BrokenProcessPool as exc:  # a worker killed (out of memory, a signal)
        _end(pool, stop)
        raise CtxrulesError(
            f"a worker process stopped unexpectedly: {exc}",
            hint="the sessions that finished are kept in --out: run again to resume",
        ) from None
    except KeyboardInterrupt:
        stop.set()
        try:
            for future in pending:
                if future.cancel():
                    continue
                deliver(future.result())  # the sessions its worker finished
        except KeyboardInterrupt:  # a second Ctrl-C: do not wait for them
            _end(pool, stop)
        pool.shutdown(wait=True, cancel_futures=True)
        return True
    except BaseException:  # e.g. --out could not be written: stop now, leave no process
        _end(pool, stop)
        raise
    pool.shutdown(wait=True)
    return False


def _end(pool: ProcessPoolExecutor, stop: Any) -> None:
    """Stop every worker now and wait for the pool's processes to be gone."""
    stop.set()
    for process in list(getattr(pool, "_processes", {}).values()):
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def _dask(
    batches: list[list[str]],
    src: Sources,
    options: dict[str, Any],
    jobs: int,
    scheduler: str | None,
    deliver: Deliver,
) -> bool:
    """Run the batches on a Dask cluster (the one at ``scheduler``, else a local one of
    ``jobs`` worker processes); returns whether Ctrl-C stopped it."""
    try:
        # deferred: Dask is the optional extra ctxrules[dask]
        from distributed import Client, as_completed
    except ImportError:
        raise _no_dask() from None
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = local_cluster(jobs)
        client = Client(cluster)
    pending: set[Any] = set()
    try:
        payloads = _payloads(src, batches)
        queue = as_completed()

        def submit() -> None:
            while len(pending) < 2 * jobs:
                payload = next(payloads, None)
                if payload is None:
                    return
                future = client.submit(run_batch, payload, options, pure=False)
                pending.add(future)
                queue.add(future)

        submit()
        for future in queue:
            pending.discard(future)
            deliver(future.result())
            submit()
    except KeyboardInterrupt:
        client.cancel(list(pending))
        return True
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return False


def _no_dask() -> ConfigError:
    return ConfigError(
        "--backend dask needs Dask's distributed package",
        where="--backend",
        hint="pip install 'ctxrules[dask]'",
    )


def local_cluster(workers: int) -> Any:
    """A Dask ``LocalCluster`` of ``workers`` worker processes, one thread each, listening
    on 127.0.0.1 only (its HTTP server on a free port: two runs never collide): what
    ``--backend dask`` starts without a scheduler.  Close it after use."""
    try:
        # deferred: Dask is the optional extra ctxrules[dask]
        from distributed import LocalCluster
    except ImportError:
        raise _no_dask() from None
    return LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )
