"""Every request of the corpus rendered incrementally, against rendering each in full.

Every corpus session with an answer (210) is replayed request by request under the
default rules (``ctxrules.requests.session_requests``: the request of every answer, 2,523
in all, commits made beforehand), and every request body is materialised for one
provider with the options ``render --for`` sends (``render_defaults``: the recorded or
inferred tools, system text, model and parameters; Anthropic's cache breakpoints).
Compared in the same run, on the same requests:

- ``incremental``: ``render_sessions(sessions, [provider], options=…, threads=T)`` —
  one crossing, each body the previous body's bytes up to what changed, then the rest;
- ``full``: ``render_batch(requests, [provider], options=…, threads=T)`` — the same
  crossing and threads, every body written whole.

``warm``: the core has prepared the items before (the previous call); ``cold``: right
after ``clear_cache()`` and ``token_cache_clear()``, every item encoded and prepared
again.  ``T`` is 1 or 2 threads (this VM has two cores).

The corpus's sessions are short (at most 30 requests, 11.7 KB a body on average), so a
second workload is one long session: the 10,000-item conversation of
``bench_render.py`` cut into 100 successive requests (every 100 items; ~195 MB of
bodies per provider), warm, the same two ways.  Both give the same bodies
(checked).  ``make bench`` runs them for real (pytest-benchmark, ``extra_info`` holds
the bytes and requests); under ``make test`` each runs once as a check.  The figures in
benches/README.md come from ``python benches/bench_render_session.py``, which alternates
every variant round by round (load changes hit them alike) and reports CPU and wall
time, minimum and median, with GB/s and requests/s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests.corpus import FIRST

from bench_render import build_big_commit  # the long session's conversation
from ctxrules import _core
from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.model import ContextCommit
from ctxrules.render import clear_cache, render_batch, render_sessions
from ctxrules.requests import render_defaults, session_requests, session_tool_names
from ctxrules.store import open_store

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
VARIANTS = [
    (how, cache, threads)
    for how in ("incremental", "full")
    for cache in ("warm", "cold")
    for threads in (1, 2)
]


class Workload(msgspec.Struct):
    """One provider's requests: per session its commits and each request's options."""

    sessions: list[list[ContextCommit]]
    options: list[list[dict[str, Any]]]
    requests: int = 0
    bytes: int = 0


def build(corpus: Path, store_dir: Path) -> dict[str, Workload]:
    """Import the corpus, make the commit of every request under the default rules, and
    choose each request's options per provider (equal options: one mapping object, as
    ``replay.render_requests`` hands them over)."""
    store = open_store(store_dir)
    files = [str(corpus / f) for f in FIRST]
    pipeline = Pipeline.from_config(PipelineConfig.preset("default"))
    sessions = [session_requests(store, r.id, config=pipeline) for r in import_paths(store, files)]
    sessions = [s for s in sessions if s]
    out: dict[str, Workload] = {}
    for provider in PROVIDERS:
        options: list[list[dict[str, Any]]] = []
        for requests in sessions:
            used = session_tool_names(store, requests[0].session_id)
            shared: dict[bytes, dict[str, Any]] = {}
            per_request = []
            for r in requests:
                kw = render_defaults(store, r, provider, used_tools=used).options
                per_request.append(shared.setdefault(msgspec.json.encode(kw), kw))
            options.append(per_request)
        w = Workload([[r.commit for r in s] for s in sessions], options)
        bodies = incremental(w, provider, 2)
        w.requests, w.bytes = len(bodies), sum(map(len, bodies))
        assert bodies == full(w, provider, 2)
        out[provider] = w
    return out


def incremental(w: Workload, provider: str, threads: int) -> list[bytes]:
    """Every body, rendered incrementally (``render_sessions``)."""
    got = render_sessions(w.sessions, [provider], options=w.options, threads=threads, meta=False)
    return [r.body for per_session in got for r in per_session[0]]


def full(w: Workload, provider: str, threads: int) -> list[bytes]:
    """Every body, each rendered whole (``render_batch``)."""
    commits = [c for s in w.sessions for c in s]
    options = [o for s in w.options for o in s]
    return [
        row[0].body for row in render_batch(commits, [provider], options=options, threads=threads)
    ]


def run(w: Workload, provider: str, how: str, cache: str, threads: int) -> list[bytes]:
    """One call of a variant (the caches cleared first when ``cold``)."""
    if cache == "cold":
        clear_cache()
        _core.token_cache_clear()
    return (incremental if how == "incremental" else full)(w, provider, threads)


@pytest.fixture(scope="module")
def workloads(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Workload]:
    """Every provider's workload (see ``build``)."""
    return build(corpus, tmp_path_factory.mktemp("bench-render-session"))


@pytest.mark.parametrize(("how", "cache", "threads"), VARIANTS)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_corpus_requests(benchmark, workloads, provider, how, cache, threads):
    benchmark.group = f"every corpus request: {provider}"
    w = workloads[provider]
    benchmark.extra_info.update(bytes=w.bytes, requests=w.requests)
    bodies = benchmark(run, w, provider, how, cache, threads)
    assert len(bodies) == w.requests and sum(map(len, bodies)) == w.bytes


def build_long(corpus: Path, store_dir: Path) -> dict[str, Workload]:
    """One long session per provider: the 10k-item conversation cut every 100 items
    (never inside a tool group), no options."""
    big = build_big_commit(corpus, store_dir)
    commits = []
    for k in range(100, len(big.items) + 1, 100):
        while k < len(big.items) and big.items[k - 1].role == "tool":
            k += 1
        commits.append(msgspec.structs.replace(big, id=f"cc_{k}", items=big.items[:k]))
    out = {}
    for provider in PROVIDERS:
        w = Workload([commits], [[{}] * len(commits)])
        bodies = incremental(w, provider, 2)
        w.requests, w.bytes = len(bodies), sum(map(len, bodies))
        assert bodies == full(w, provider, 2)
        out[provider] = w
    return out


@pytest.fixture(scope="module")
def long_session(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Workload]:
    """Every provider's long session (see ``build_long``)."""
    return build_long(corpus, tmp_path_factory.mktemp("bench-long-session"))


@pytest.mark.parametrize(
    ("how", "threads"), [(h, t) for h in ("incremental", "full") for t in (1, 2)]
)
@pytest.mark.parametrize("provider", ["anthropic", "openai-chat"])
def test_long_session(benchmark, long_session, provider, how, threads):
    benchmark.group = f"one long session: {provider}"
    w = long_session[provider]
    benchmark.extra_info.update(bytes=w.bytes, requests=w.requests)
    bodies = benchmark(run, w, provider, how, "warm", threads)
    assert len(bodies) == w.requests and sum(map(len, bodies)) == w.bytes


# -- the alternating run behind benches/README.md -----------------------------------------


def _time(fn: Callable[[], object]) -> tuple[float, float]:
    """One call's (CPU seconds, wall seconds)."""
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def reused_share(w: Workload, provider: str) -> float:
    """The share of the body bytes taken from the previous body (as the core reports)."""
    seen: list[int] = []
    real = _core.render_sessions

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        seen.extend(n for _, _, reused, _ in out for n in reused)
        return out

    _core.render_sessions = spy  # type: ignore[assignment]
    try:
        incremental(w, provider, 1)
    finally:
        _core.render_sessions = real  # type: ignore[assignment]
    return sum(seen) / w.bytes


def alternate(
    workloads: dict[str, Workload], rounds: int, variants: list[tuple[str, str, int]]
) -> dict[str, dict[Any, list[Any]]]:
    """Per provider and variant, (CPU, wall) samples of one call each per round, the
    variants in turn."""
    samples: dict[str, dict[Any, list[Any]]] = {p: {v: [] for v in variants} for p in workloads}
    for _ in range(rounds):
        for provider, w in workloads.items():
            for v in variants:
                samples[provider][v].append(
                    _time(lambda w=w, provider=provider, v=v: run(w, provider, *v))
                )
    return samples


def report(workloads: dict[str, Workload], samples: dict[str, dict[Any, list[Any]]]) -> None:
    """Print each provider's variants: CPU and wall ms, GB/s and requests/s."""
    for provider, w in workloads.items():
        share = reused_share(w, provider)
        print(
            f"\n{provider}: {w.requests} requests, {w.bytes / 1e6:.1f} MB of bodies, "
            f"{share:.0%} of them reused from the previous body"
        )
        for v, xs in samples[provider].items():
            cpu = [c * 1e3 for c, _ in xs]
            wall = [t for _, t in xs]
            best, med = min(wall), statistics.median(wall)
            name = " / ".join(map(str, v))
            print(
                f"  {name:<22} cpu {min(cpu):6.1f} / {statistics.median(cpu):6.1f}"
                f"  wall {best * 1e3:6.1f} / {med * 1e3:6.1f}"
                f"  {w.bytes / best / 1e9:5.2f} GB/s ({w.bytes / med / 1e9:.2f})"
                f"  {w.requests / best:8,.0f} req/s ({w.requests / med:,.0f})"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--long-rounds", type=int, default=10)
    args = ap.parse_args()
    corpus = Path(__file__).resolve().parents[1] / "tests" / "data" / "corpus"
    with tempfile.TemporaryDirectory() as tmp:
        workloads = build(corpus, Path(tmp) / "store")
        long = build_long(corpus, Path(tmp) / "long")
    print(f"{args.rounds} alternating rounds; CPU and wall ms, min / median; GB/s and requests/s")
    print("from the wall minimum (median in brackets)")
    report(workloads, alternate(workloads, args.rounds, VARIANTS))
    print(f"\none long session, {args.long_rounds} alternating rounds")
    long_variants = [(h, "warm", t) for h in ("incremental", "full") for t in (1, 2)]
    report(long, alternate(long, args.long_rounds, long_variants))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
