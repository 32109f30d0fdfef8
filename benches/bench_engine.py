"""The turn engine: one agent turn — ``prepare`` (user message), ``record`` (an answer with
a tool call and usage), ``prepare`` (the tool result), ``record`` (the final answer) —
on sessions of 1k, 10k and 100k calls (SQLite store, default rules, Anthropic wire).

Target: flat in history length, t(100k) ≤ 2 × t(1k); the absolute time per turn is in
benches/README.md ("Turn engine").  The sessions are those of ``bench_commit`` (the same
turns, committed from scratch first, the long history folded by ``summarize``), so the
work measured is what a live agent pays per turn.  ``extra_info`` records the request
size and level.  Under ``make test`` (benchmarks disabled) only 1k and 10k run, once.
"""

from __future__ import annotations

import itertools

import pytest
from tests.engine.scripted import CONFIG  # the scripted agent's configuration

from bench_commit import PIPELINE, SIZES, _session, _skip_large
from ctxrules.engine import Engine, ToolResult

_ids = itertools.count()


def _answer(i: int, *, call: bool, prompt: int) -> dict:
    content: list[dict] = [{"type": "text", "text": f"Looking at module {i % 97}."}]
    if call:
        content.append(
            {"type": "tool_use", "id": f"e{i}", "name": "Read", "input": {"path": f"m{i}.py"}}
        )
    return {
        "id": f"msg_{i}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "usage": {"input_tokens": prompt, "output_tokens": 20},
    }


@pytest.mark.parametrize("n", SIZES)
def test_turn(benchmark, tmp_path_factory, n):
    _skip_large(benchmark, n)
    store, sid, _ = _session(tmp_path_factory, n)
    engine = Engine(store, CONFIG, pipeline=PIPELINE)
    seen = []

    def turn():
        i = next(_ids)
        now = 1e9 + i
        prep = engine.prepare(sid, f"please fix issue #{i} in module {i % 97}", now=now)
        engine.record(prep, _answer(i, call=True, prompt=prep.tokens.estimate), now=now + 1)
        result = "".join(f"line {k}: value_{i}_{k}\n" for k in range(12))
        prep = engine.prepare(sid, tool_results=[ToolResult(f"e{i}", result)], now=now + 2)
        engine.record(prep, _answer(i, call=False, prompt=prep.tokens.fused), now=now + 3)
        seen.append(prep)

    benchmark.pedantic(turn, rounds=20 if n < 100_000 else 10, warmup_rounds=2)
    last = seen[-1]
    assert last.tokens.measured is not None  # the fusion found the previous answer
    assert last.budget.level in ("ok", "warn", "compact", "critical")
    benchmark.extra_info.update(
        body_bytes=len(last.request.body),
        items=len(last.commit.items),
        estimate=last.tokens.estimate,
        level=last.budget.level,
    )
    store.close()
