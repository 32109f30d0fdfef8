"""A live session grown turn by turn to ~134k tokens: what one turn costs as it grows.

One agent session on a SQLite store with the default rules, the Anthropic wire and a
Claude-Code-like tool set: the user's task, then round after round the model asks for
a file and the file's text comes back (3.6 KB of code a round, so the request grows by
about a thousand tokens a round and never folds: the whole session is one user turn,
which the rules keep).  A *turn* is what the agent pays per request: ``prepare`` (the
tool result appended, the commit derived, the request rendered and estimated, usage
fused) plus ``record`` (the answer appended with its usage).

The figure at 10k, 50k and 134k tokens is the median time of the five turns whose
request estimate is nearest that size.  Target (issue 24): ≤ 5 ms at 134k tokens and
flat, t(134k) ≤ 1.5 × t(10k).  Under the default rules the session is folded once it
passes the summarize threshold, so the request stays between ~90k and ~140k tokens and
a size no longer says how long the session is: the turns are also timed by their
number (the median of the five turns around round 10, 100, 1,000 and 2,000).

How to reproduce (CPU and wall time per turn; the session is built the same way every
run, so runs compare)::

    .venv/bin/python benches/bench_live_turn.py --rounds 3

``--way full`` renders every request whole (the engine without its session renderer,
as before incremental rendering), ``--way incremental`` as the engine does;
giving both alternates them round by round and prints a table for each.

Under ``make test`` (benchmarks disabled) the session grows to ~10k tokens once, as a
check that it runs.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.context_sources import SourcesConfig
from ctxrules.engine import Engine, EngineConfig, ToolResult
from ctxrules.model import ToolSpec
from ctxrules.render import clear_cache as clear_render_cache
from ctxrules.store import open_store
from ctxrules.tokenizers import clear_cache as clear_token_cache

#: The sizes the figures are read at (request estimate, tokens).
SIZES = (10_000, 50_000, 134_000)
#: The rounds the figures are also read at (turn count: the session's length).
ROUNDS = (10, 100, 1_000, 2_000)
#: The turns around each size whose median is its figure.
WINDOW = 5

_SCHEMA = {
    "type": "object",
    "properties": {
        "file_path": {"type": "string", "description": "The absolute path of the file"},
        "offset": {"type": "integer", "description": "The line to start reading at"},
        "limit": {"type": "integer", "description": "How many lines to read"},
    },
    "required": ["file_path"],
}
TOOLS = tuple(
    ToolSpec(name=name, description=f"{name}: {what}", input_schema=_SCHEMA)
    for name, what in [
        ("Read", "Reads a file from the local filesystem. " * 6),
        ("Edit", "Performs exact string replacements in files. " * 6),
        ("Write", "Writes a file to the local filesystem. " * 6),
        ("Grep", "A powerful search tool built on ripgrep. " * 6),
        ("Glob", "Fast file pattern matching tool. " * 6),
        ("Bash", "Executes a given bash command in a persistent shell. " * 6),
    ]
)
CONFIG = EngineConfig(
    provider="anthropic",
    model="claude-sonnet-4-5",
    system="You are a coding agent. Read before you edit; keep changes small.",
    tools=TOOLS,
    sources=SourcesConfig(git_status=False, instruction_files=False, date=False),
)
PIPELINE = Pipeline.from_config(PipelineConfig.preset("default"))

_WORDS = (
    "self value result index items parser token config handler buffer state "
    "request response session commit render count error path line offset limit"
).split()


def file_text(i: int, size: int = 3_600) -> str:
    """A deterministic file of Python-like code, different for every round."""
    rng = random.Random(i)
    lines, n = [], 0
    while n < size:
        w = rng.sample(_WORDS, 4)
        line = f"    {w[0]}_{i} = {w[1]}.{w[2]}({w[3]}, {rng.randint(0, 9999)})  # {w[1]} {w[3]}"
        lines.append(line)
        n += len(line) + 1
    return f"def module_{i}():\n" + "\n".join(lines) + "\n"


def answer(i: int, prompt: int) -> dict[str, Any]:
    """The model's answer of round ``i``: a sentence and the next Read, with usage."""
    return {
        "id": f"msg_{i}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "text", "text": f"Module {i} reads fine; next I look at module {i + 1}."},
            {
                "type": "tool_use",
                "id": f"r{i}",
                "name": "Read",
                "input": {"file_path": f"/m{i}.py"},
            },
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": prompt, "output_tokens": 40},
    }


class Grown:
    """One session grown round by round; each round's CPU and wall time and size."""

    def __init__(self, directory: Path, *, incremental: bool = True) -> None:
        self.store = open_store(directory / "store")
        self.session = self.store.create_session().id
        self.engine = Engine(self.store, CONFIG, pipeline=PIPELINE)
        if not incremental:
            # Every request rendered whole: no session renderer.
            self.engine._renderer = lambda session: None  # type: ignore[method-assign]
        self.rounds: list[tuple[int, int, float, float]] = []  # estimate, bytes, cpu, wall
        self.now = 1e9
        self.i = 0
        prep = self.engine.prepare(self.session, "Read every module and fix the bug.", now=self.now)
        self.engine.record(prep, answer(0, prep.tokens.estimate), now=self.now + 1)

    def round(self) -> int:
        """One turn: the file asked for comes back, the next answer is recorded."""
        self.i += 1
        self.now += 2
        results = [ToolResult(f"r{self.i - 1}", file_text(self.i))]
        c0, w0 = time.process_time(), time.perf_counter()
        prep = self.engine.prepare(self.session, tool_results=results, now=self.now)
        self.engine.record(prep, answer(self.i, prep.tokens.estimate), now=self.now + 1)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        self.rounds.append((prep.tokens.estimate, len(prep.request.body), cpu, wall))
        return prep.tokens.estimate

    def grow(self, tokens: int, rounds: int = 0) -> None:
        """Rounds until the request estimate passes ``tokens`` and ``rounds`` turns are
        made (and a window beyond both)."""
        passed = max((r[0] for r in self.rounds), default=0) >= tokens
        while not passed or len(self.rounds) < rounds:
            passed = self.round() >= tokens or passed
        for _ in range(WINDOW // 2 + 1):
            self.round()

    @staticmethod
    def _median(near: list[tuple[int, int, float, float]]) -> dict[str, float]:
        return {
            "estimate": statistics.median(r[0] for r in near),
            "body_kb": statistics.median(r[1] for r in near) / 1024,
            "cpu_ms": statistics.median(r[2] for r in near) * 1000,
            "wall_ms": statistics.median(r[3] for r in near) * 1000,
        }

    def at(self, tokens: int) -> dict[str, float]:
        """The median turn of the ``WINDOW`` rounds nearest ``tokens``."""
        return self._median(sorted(self.rounds, key=lambda r: abs(r[0] - tokens))[:WINDOW])

    def at_round(self, n: int) -> dict[str, float]:
        """The median turn of the ``WINDOW`` rounds around round ``n`` (1-based)."""
        first = max(0, n - 1 - WINDOW // 2)
        return self._median(self.rounds[first : first + WINDOW])

    def close(self) -> None:
        self.store.close()


def test_live_turn_grows_and_stays_usable(benchmark, tmp_path):
    """Under ``make test``: a session grown to ~10k tokens, once."""
    g = Grown(tmp_path)
    try:
        benchmark.pedantic(g.grow, args=(10_000 if benchmark.disabled else SIZES[-1],), rounds=1)
        first = g.at(SIZES[0])
        assert first["estimate"] > 5_000
        benchmark.extra_info.update({str(s): g.at(s) for s in SIZES if g.rounds[-1][0] >= s})
        benchmark.extra_info.update(
            {f"round {n}": g.at_round(n) for n in ROUNDS if len(g.rounds) > n + WINDOW // 2}
        )
    finally:
        g.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="sessions grown (figures: min)")
    ap.add_argument("--way", choices=["incremental", "full"], action="append")
    args = ap.parse_args(argv)
    ways = args.way or ["incremental"]
    runs: dict[str, list[dict[int, dict[str, float]]]] = {w: [] for w in ways}
    by_round: dict[str, list[dict[int, dict[str, float]]]] = {w: [] for w in ways}
    for _ in range(args.rounds):
        for way in ways:  # alternating, so each way sees the same machine
            # Each session from cold caches: the rounds grow the same text.
            clear_render_cache()
            clear_token_cache()
            with tempfile.TemporaryDirectory() as d:
                g = Grown(Path(d), incremental=way == "incremental")
                try:
                    g.grow(SIZES[-1], ROUNDS[-1])
                    runs[way].append({s: g.at(s) for s in SIZES})
                    by_round[way].append({n: g.at_round(n) for n in ROUNDS})
                finally:
                    g.close()
    for way in ways:
        print(f"\n{way}:\n")
        _table("request", runs[way], lambda s, first: f"{first['estimate']:,.0f} tokens")
        print()
        _table("round", by_round[way], lambda n, first: f"{n:,} ({first['estimate']:,.0f} tokens)")
    return 0


def _table(what: str, runs: list[dict[int, dict[str, float]]], label: Any) -> None:
    """A markdown table: per key (size or round) CPU and wall ms, min / median of runs."""
    print(f"| {what} | body | CPU ms per turn (min / median of runs) | wall ms | ÷ first (CPU) |")
    print("|---|---|---|---|---|")
    keys = list(runs[0])
    base = min(r[keys[0]]["cpu_ms"] for r in runs)
    for k in keys:
        cpu = [r[k]["cpu_ms"] for r in runs]
        wall = [r[k]["wall_ms"] for r in runs]
        first = runs[0][k]
        print(
            f"| {label(k, first)} | {first['body_kb']:,.0f} KB "
            f"| {min(cpu):.2f} / {statistics.median(cpu):.2f} "
            f"| {min(wall):.2f} / {statistics.median(wall):.2f} | {min(cpu) / base:.2f} |"
        )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
