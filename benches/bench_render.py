"""Rendering a 10k-item commit to request bytes, per provider, against the floors.

The commit is built from real conversations: the 200 tau-bench Chat Completions
sessions of the corpus, imported and committed with the ``off`` preset (every item
full), concatenated with ids made unique until 10,000 items (text, tool calls with
JSON arguments, tool results).

Compared in the same run, on the same conversation:

- ``ours``: ``render_body(commit, provider)`` — one crossing into Rust with the
  commit's item tuple, body bytes back.  Items the core has prepared before (each
  decoded once, its strings kept JSON-escaped) are found by identity, as in a session
  where each commit shares all but its newest items with the last one rendered;
- ``ours, cold``: the same after ``ctxrules.render.clear_cache()``: every item is encoded
  with msgspec, decoded and prepared again (a commit the process has never seen);
- ``orjson``: ``orjson.dumps`` of the already-built request dict (the same body,
  decoded beforehand) — the fastest any renderer that builds dicts can be;
- ``json.dumps``: the same with the standard library — the usual floor;
- ``langchain``: ``langchain_core.messages.convert_to_openai_messages`` on the same
  conversation as LangChain message objects (built beforehand), then ``json.dumps`` of
  the result — what a LangChain user does to get Chat Completions bytes.

``make bench`` runs them for real; under ``make test`` each runs once as a check.
pytest-benchmark runs all rounds of one function before the next, so the figures in
benches/README.md come from ``python benches/bench_render.py``, which alternates all of
them round by round and reports CPU and wall time, minimum and median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from ctxrules.commit import Pipeline, make_commit
from ctxrules.config import PipelineConfig
from ctxrules.importers import import_paths
from ctxrules.model import ContextCommit, ContextItem
from ctxrules.providers import get_provider
from ctxrules.render import clear_cache, render_batch, render_body
from ctxrules.store import open_store

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
N_ITEMS = 10_000


def _unique(it: ContextItem, k: str) -> ContextItem:
    return msgspec.structs.replace(
        it,
        source_node_id=f"{it.source_node_id}.{k}",
        caller=f"{it.caller}.{k}" if it.caller else None,
        tool_use_id=f"{it.tool_use_id}.{k}" if it.tool_use_id else None,
    )


@pytest.fixture(scope="module")
def big_commit(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> ContextCommit:
    """A 10,000-item commit of real tau-bench turns (see the module docstring)."""
    return build_big_commit(corpus, tmp_path_factory.mktemp("bench-render"))


def build_big_commit(corpus: Path, store_dir: Path) -> ContextCommit:
    """Import the tau-bench sessions into a store at ``store_dir`` and build the commit."""
    store = open_store(store_dir)
    results = import_paths(store, [str(corpus / "openai-chat-json/taubench_gpt-4o-airline.json")])
    off = Pipeline.from_config(PipelineConfig.preset("off"))
    # tau-bench reuses its mock call ids across trajectories: suffix each session's
    # ids so the big conversation has unique ones, as one real session would.
    pool = [
        _unique(it, f"{i}")
        for i, r in enumerate(results)
        for it in make_commit(r.id, store=store, now=0, config=off).items
        if it.role != "system"  # one system prompt per request, not one per session
    ]
    items: list[ContextItem] = []
    k = 0
    while len(items) < N_ITEMS:
        items.extend(_unique(it, f"r{k}") for it in pool[: N_ITEMS - len(items)])
        k += 1
    # Never end on a dangling tool group boundary: the slice may cut inside one, which
    # the renderer would then degrade; keep whole groups only.
    while items[-1].role == "tool":
        items.pop()
    return ContextCommit(
        id="cc_bench", session_id="s", head_node_id="h", rules_version="rv", items=tuple(items)
    )


def _batch_commits(commit: ContextCommit) -> list[ContextCommit]:
    """Four commits of one session for the batch comparison: the 10k-item commit and
    three earlier ones (its first 9,000, 8,000, 7,000 items: the same item objects)."""
    return [commit] + [
        msgspec.structs.replace(commit, id=f"cc_{n}", items=commit.items[:n])
        for n in (9_000, 8_000, 7_000)
    ]


def _one_by_one(commits: list[ContextCommit]) -> list[bytes]:
    return [render_body(c, p) for c in commits for p in PROVIDERS]


def _batched(commits: list[ContextCommit], threads: int | None) -> list[bytes]:
    return [r.body for row in render_batch(commits, PROVIDERS, threads=threads) for r in row]


@pytest.mark.parametrize("threads", [1, None])
def test_render_batch(benchmark, big_commit, threads):
    benchmark.group = "render 4 commits x 4 providers"
    commits = _batch_commits(big_commit)
    assert benchmark(_batched, commits, threads) == _one_by_one(commits)


def test_render_one_by_one(benchmark, big_commit):
    benchmark.group = "render 4 commits x 4 providers"
    benchmark(_one_by_one, _batch_commits(big_commit))


def _langchain_messages(commit: ContextCommit) -> list[Any]:
    """The same conversation as LangChain messages (built outside the timed part)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    last_ai: Any = None
    for it in commit.items:
        if it.role == "user":
            out.append(HumanMessage(content=it.rendered))
        elif it.role == "assistant":
            last_ai = AIMessage(content=it.rendered, tool_calls=[])
            out.append(last_ai)
        elif it.role == "tool":
            args = json.loads(it.tool_input) if it.tool_input else {}
            last_ai.tool_calls.append(
                {"name": it.name, "args": args, "id": it.tool_use_id, "type": "tool_call"}
            )
            out.append(ToolMessage(content=it.rendered, tool_call_id=it.tool_use_id))
    return out


@pytest.mark.parametrize("provider", PROVIDERS)
def test_render_ours(benchmark, big_commit, provider):
    benchmark.group = f"render 10k items: {provider}"
    prov = get_provider(provider)
    body = benchmark(render_body, big_commit, prov)
    assert b"[tool " not in body  # every call went out paired
    # Valid as sent, with the tools it calls declared (Anthropic refuses tool blocks
    # without declarations); the declarations are not part of what is timed.
    names = sorted({it.name for it in big_commit.items if it.role == "tool" and it.name})
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in names]
    declared = render_body(big_commit, prov, tools=tools)
    assert prov.validate(json.loads(declared)) == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_render_ours_cold(benchmark, big_commit, provider):
    benchmark.group = f"render 10k items: {provider}"
    prov = get_provider(provider)
    warm = render_body(big_commit, prov)
    body = benchmark(_cold, big_commit, prov)
    assert body == warm


def _cold(commit: ContextCommit, prov: Any) -> bytes:
    clear_cache()
    return render_body(commit, prov)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_render_orjson_floor(benchmark, big_commit, provider):
    benchmark.group = f"render 10k items: {provider}"
    built = json.loads(render_body(big_commit, provider))
    out = benchmark(orjson.dumps, built)
    assert json.loads(out) == built


@pytest.mark.parametrize("provider", PROVIDERS)
def test_render_json_dumps_floor(benchmark, big_commit, provider):
    benchmark.group = f"render 10k items: {provider}"
    built = json.loads(render_body(big_commit, provider))
    out = benchmark(json.dumps, built)
    assert json.loads(out) == built


def test_render_langchain_openai(benchmark, big_commit):
    pytest.importorskip("langchain_core")
    from langchain_core.messages import convert_to_openai_messages

    benchmark.group = "render 10k items: openai-chat"
    messages = _langchain_messages(big_commit)

    def langchain() -> str:
        return json.dumps(convert_to_openai_messages(messages))

    out = json.loads(benchmark(langchain))
    ours = json.loads(render_body(big_commit, "openai-chat"))["messages"]

    # Same conversation: the same tool calls and results in the same order (we also
    # merge same-role neighbours, which LangChain leaves apart, so roles are not compared).
    def calls(msgs: list[dict[str, Any]]) -> list[Any]:
        return [c["id"] for m in msgs for c in m.get("tool_calls") or []]

    def results(msgs: list[dict[str, Any]]) -> list[Any]:
        return [(m["tool_call_id"], m["content"]) for m in msgs if m["role"] == "tool"]

    # tau-bench reuses call ids even inside one session; we send repeats as `{id}_{n}`
    # (vendors want unique ids), LangChain sends them as they are.
    def same(theirs: Any, mine: Any) -> bool:
        return mine == theirs or mine.startswith(f"{theirs}_")

    assert len(calls(out)) == len(calls(ours))
    assert all(same(a, b) for a, b in zip(calls(out), calls(ours)))
    assert [c for _, c in results(out)] == [c for _, c in results(ours)]
    assert all(same(a, b) for (a, _), (b, _) in zip(results(out), results(ours)))


def _time(fn: Callable[[], object]) -> tuple[float, float]:
    """One call's (CPU seconds, wall seconds)."""
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def alternate(commit: ContextCommit, rounds: int) -> list[dict[str, Any]]:
    """Per provider: ours (warm and cold), orjson and json.dumps (and LangChain for
    openai-chat), one call each per round, in turn, so load changes hit them alike; CPU
    and wall samples kept."""
    rows = []
    for provider in PROVIDERS:
        prov = get_provider(provider)
        built = json.loads(render_body(commit, prov))
        fns: dict[str, Callable[[], object]] = {
            "ours": lambda prov=prov: render_body(commit, prov),
            "cold": lambda prov=prov: _cold(commit, prov),
            "orjson": lambda built=built: orjson.dumps(built),
            "floor": lambda built=built: json.dumps(built),
        }
        if provider == "openai-chat":
            try:
                from langchain_core.messages import convert_to_openai_messages
            except ImportError:
                pass
            else:
                messages = _langchain_messages(commit)
                fns["langchain"] = lambda m=messages: json.dumps(convert_to_openai_messages(m))
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                samples[name].append(_time(fn))
        rows.append({"provider": provider, "samples": samples})
    return rows


def alternate_batch(commit: ContextCommit, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """16 bodies (4 commits × 4 providers): one by one, and in one batch on 1 thread and
    on rayon's default pool, alternating round by round."""
    commits = _batch_commits(commit)
    fns: dict[str, Callable[[], object]] = {
        "one by one": lambda: _one_by_one(commits),
        "batch, 1 thread": lambda: _batched(commits, 1),
        "batch, default pool": lambda: _batched(commits, None),
    }
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(_time(fn))
    return samples


def _ms(xs: list[float]) -> str:
    return f"{min(xs) * 1e3:.2f} / {statistics.median(xs) * 1e3:.2f}"


def main() -> None:
    """Print the alternating comparison (ms, min / median) as a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batch", type=int, default=0, metavar="ROUNDS", help="also the batch")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from conftest import CORPUS  # the same corpus path the tests use

    with tempfile.TemporaryDirectory() as tmp:
        commit = build_big_commit(CORPUS, Path(tmp))
    rows = alternate(commit, args.rounds)
    print(f"{len(commit.items)} items, {args.rounds} alternating rounds; ms, min / median")
    print(
        "| provider | clock | ours | ours, cold | orjson | json.dumps "
        "| orjson ÷ ours (min / median) | json.dumps ÷ ours | LangChain |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        s = row["samples"]
        for i, clock in enumerate(["CPU", "wall"]):
            col = {k: [x[i] for x in v] for k, v in s.items()}

            def ratio(k: str, col: dict[str, list[float]] = col) -> str:
                return (
                    f"{min(col[k]) / min(col['ours']):.2f}× / "
                    f"{statistics.median(col[k]) / statistics.median(col['ours']):.2f}×"
                )

            lc = _ms(col["langchain"]) if "langchain" in col else "–"
            print(
                f"| {row['provider']} | {clock} | {_ms(col['ours'])} | {_ms(col['cold'])} "
                f"| {_ms(col['orjson'])} | {_ms(col['floor'])} | {ratio('orjson')} "
                f"| {ratio('floor')} | {lc} |"
            )
    if args.batch:
        print("\n16 bodies (4 commits of the session × 4 providers); ms, min / median")
        print("| how | CPU | wall |")
        print("|---|---|---|")
        for name, xs in alternate_batch(commit, args.batch).items():
            print(f"| {name} | {_ms([x[0] for x in xs])} | {_ms([x[1] for x in xs])} |")


if __name__ == "__main__":
    main()
