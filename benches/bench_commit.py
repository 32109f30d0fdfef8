"""Commits: append one turn and generate its commit, for sessions of 1k, 10k and 100k calls.

Three ways, same sessions, same run:

* ``store_incremental``: ``dag.append`` × 3 (user, assistant, tool result — durable
  SQLite appends) then ``make_commit`` (indexed ancestor lookup, derive from
  the parent, save the delta).  Target: t(100k) ≤ 2 × t(1k).
* ``derive_incremental``: the pure step alone, in memory (parent commit + the turn's
  three calls → new commit), to show what generation itself costs.
* ``store_from_scratch``: the same turn, but the commit regenerated from the whole
  branch each time (``branch_path`` + ``derive_commit(None, …)`` + save) — what a
  layer without incremental commits does.

``extra_info`` records the item count, memory of the session's commit (tracemalloc:
items and their strings) and bytes stored per commit.  Under ``make test`` (benchmarks
disabled) only the 1k and 10k sizes run, once each.
"""

from __future__ import annotations

import itertools
import tracemalloc

import pytest

from ctxrules import dag
from ctxrules.commit import (
    Pipeline,
    derive_commit,
    derive_with_summaries,
    make_commit,
    persist,
)
from ctxrules.commit.plan import graph_marks
from ctxrules.config import PipelineConfig
from ctxrules.model import Node, TextBlock, ToolUseBlock
from ctxrules.store import open_store

SIZES = [1_000, 10_000, 100_000]
PIPELINE = Pipeline.from_config(PipelineConfig.preset("default"))
_ids = itertools.count()


def _turn_calls(i: int, prev: str | None, start_seq: int) -> list[Node]:
    u, a, t = f"u{i}", f"a{i}", f"t{i}"
    return [
        Node(
            id=u,
            seq=start_seq,
            created_at=float(i),
            role="user",
            output=f"please look at module {i % 97} and fix issue #{i}",
            predecessor=prev,
        ),
        Node(
            id=a,
            seq=start_seq + 1,
            created_at=float(i),
            role="assistant",
            predecessor=u,
            output=[
                TextBlock(text=f"Reading module {i % 97}."),
                ToolUseBlock(id=f"tu{i}", name="Read", input={"path": f"src/m{i % 97}.py"}),
            ],
        ),
        Node(
            id=t,
            seq=start_seq + 2,
            created_at=float(i),
            role="tool",
            name="Read",
            caller=a,
            input={"path": f"src/m{i % 97}.py"},
            output="".join(f"line {k}: value_{i}_{k} = compute({k})\n" for k in range(12)),
            metadata={"tool_use_id": f"tu{i}"},
        ),
    ]


def _session(tmp_path_factory, n_calls: int):
    store = open_store(tmp_path_factory.mktemp(f"commit-{n_calls}"))
    nodes: list[Node] = []
    prev = None
    for i in range(n_calls // 3):
        nodes += _turn_calls(i, prev, len(nodes) + 1)
        prev = nodes[-2].id
    info = store.create_session(session_id=f"s{n_calls}", nodes=nodes, head=prev)
    # The starting commit comes from the same derive as every other one (from scratch).
    # ``_marks`` records the graph's seq watermark, as make_commit does; without
    # it the first measured step would (correctly) rebuild from scratch.
    gen = derive_with_summaries(  # the fold of the long history included, as in real use
        None,
        dag.branch_path(store, info.id),
        session_id=info.id,
        head_node_id=prev,
        pipeline=PIPELINE,
        now=float(n_calls),
        marks=graph_marks(store.get_session(info.id)),
    )
    persist.save(store, gen)
    return store, info.id, gen.commit


def _append_turn(store, sid: str) -> None:
    i = next(_ids)
    dag.append(store, sid, "user", f"please look at module {i % 97} and fix issue #{i}")
    a = dag.append(
        store,
        sid,
        "assistant",
        [
            TextBlock(text=f"Reading module {i % 97}."),
            ToolUseBlock(id=f"x{i}", name="Read", input={"path": f"src/m{i % 97}.py"}),
        ],
    )
    dag.append(
        store,
        sid,
        "tool",
        "".join(f"line {k}: value_{i}_{k} = compute({k})\n" for k in range(12)),
        name="Read",
        input={"path": f"src/m{i % 97}.py"},
        caller=a.id,
        metadata={"tool_use_id": f"x{i}"},
    )


def _skip_large(benchmark, n: int) -> None:
    if benchmark.disabled and n > 10_000:
        pytest.skip("100k-call sessions only under `make bench`")


@pytest.mark.parametrize("n", SIZES)
def test_store_incremental(benchmark, tmp_path_factory, n):
    _skip_large(benchmark, n)
    store, sid, first = _session(tmp_path_factory, n)
    made = []

    def step():
        _append_turn(store, sid)
        made.append(make_commit(sid, now=1e9, store=store, config=PIPELINE))

    benchmark.pedantic(step, rounds=30, warmup_rounds=2)
    last = made[-1]
    assert last.parent_ids == (made[-2].id,) if len(made) > 1 else last.parent_ids == (first.id,)
    sizes = [persist.stored_bytes(store, c.id) for c in made]
    benchmark.extra_info.update(items=len(last.items), bytes_per_commit=sum(sizes) / len(sizes))
    store.close()


@pytest.mark.parametrize("n", SIZES)
def test_derive_incremental(benchmark, tmp_path_factory, n):
    _skip_large(benchmark, n)
    store, sid, first = _session(tmp_path_factory, n)
    store.close()
    state = {"parent": first, "i": 10**7}

    def step():
        i = state["i"] = state["i"] + 1
        parent = state["parent"]
        calls = _turn_calls(i, parent.head_node_id, 10**8 + 3 * i)
        gen = derive_commit(
            parent, calls, session_id=sid, head_node_id=calls[1].id, pipeline=PIPELINE, now=1e9
        )
        assert not gen.requests  # the pure step alone: nothing waits for a summarizer
        state["parent"] = gen.commit

    benchmark.pedantic(step, rounds=200, warmup_rounds=5)
    benchmark.extra_info.update(items=len(state["parent"].items))


@pytest.mark.parametrize("n", SIZES)
def test_store_from_scratch(benchmark, tmp_path_factory, n):
    _skip_large(benchmark, n)
    store, sid, _ = _session(tmp_path_factory, n)

    def step():
        _append_turn(store, sid)
        head = store.get_session(sid).head
        gen = derive_with_summaries(
            None,
            dag.branch_path(store, sid),
            session_id=sid,
            head_node_id=head,
            pipeline=PIPELINE,
            now=1e9,
        )
        persist.save(store, gen)

    rounds = 3 if n >= 100_000 else 10
    benchmark.pedantic(step, rounds=rounds, warmup_rounds=1)
    store.close()


@pytest.mark.parametrize("n", SIZES)
def test_memory_of_a_session_commit(benchmark, n):
    """Memory the commit of an n-call session holds (items, their texts), by tracemalloc."""
    _skip_large(benchmark, n)
    nodes: list[Node] = []
    prev = None
    for i in range(n // 3):
        nodes += _turn_calls(i, prev, len(nodes) + 1)
        prev = nodes[-2].id
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    commit = derive_with_summaries(
        None, nodes, session_id="m", head_node_id=prev, pipeline=PIPELINE, now=0.0
    ).commit
    held = tracemalloc.get_traced_memory()[0] - base
    child = derive_with_summaries(
        commit,
        _turn_calls(10**6, prev, 10**7),
        session_id="m",
        head_node_id="a1000000",
        pipeline=PIPELINE,
        now=1.0,
    ).commit
    per_commit = tracemalloc.get_traced_memory()[0] - base - held
    tracemalloc.stop()
    assert len(child.items) == len(commit.items) + 3
    benchmark.extra_info.update(
        items=len(commit.items),
        bytes_held=held,
        bytes_per_item=held / len(commit.items),
        bytes_per_next_commit=per_commit,
    )
    benchmark.pedantic(lambda: None, rounds=1)
