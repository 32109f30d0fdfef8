"""Import cost grows with the input, not faster — checked without clocks.

Work is counted as the Python and C function calls an import makes (deterministic for
the same input); memory as tracemalloc's peak of Python allocations.  The figures
against their targets (time at 1k / 8k Task calls, peak ÷ file size) are measured in
benches/bench_import.py.
"""

from __future__ import annotations

import cProfile
import pstats
import tracemalloc

from ctxrules.importers import import_paths, parse_file

REAL = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def calls_to_parse(path) -> int:
    profile = cProfile.Profile()
    profile.runcall(parse_file, str(path))
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined]


def test_work_is_linear_in_task_sub_agent_calls(claude_code_generator, tmp_path):
    # Each sidechain used to scan every tool call seen so far for its Task.  The calls
    # added by each doubling must double too (a quadratic part would quadruple them);
    # a first parse pays the one-time costs (plugin loading) before anything is counted.
    sizes = (150, 300, 600)
    paths = [claude_code_generator.tasks(tmp_path / f"t{n}.jsonl", n) for n in sizes]
    parse_file(str(paths[0]))
    small, middle, large = (calls_to_parse(p) for p in paths)
    growth = (large - middle) / (middle - small)
    assert 1.8 < growth < 2.3, f"calls {small}, {middle}, {large}: growth {growth:.2f}"


def test_sidechains_find_their_task_call(claude_code_generator, tmp_path, store):
    path = claude_code_generator.tasks(tmp_path / "t.jsonl", 50)
    (res,) = import_paths(store, [str(path)])
    nodes = {n.id: n for n in store.nodes(res.id)}
    roots = [n for n in nodes.values() if n.role == "user" and n.caller is not None]
    assert len(roots) == 50
    for root in roots:
        task = nodes[root.caller]
        assert task.name == "Task" and task.input["prompt"] == root.output


def test_a_sidechain_takes_the_latest_open_task_with_its_prompt(tmp_path, store):
    """Parallel Task calls with the same prompt are claimed newest first; a sidechain
    whose prompt no open Task has takes the newest open one."""
    import json

    def line(n, kind, parent, content, **extra):
        return json.dumps(
            {
                "parentUuid": parent,
                "isSidechain": extra.pop("side", False),
                "sessionId": "s",
                "type": kind,
                "uuid": f"u{n}",
                "timestamp": "2025-09-07T09:52:03Z",
                "message": {"role": kind, "content": content, **extra},
            }
        )

    def task(tid, prompt):
        return {"type": "tool_use", "id": tid, "name": "Task", "input": {"prompt": prompt}}

    lines = [
        line(1, "user", None, "go"),
        line(2, "assistant", "u1", [task("A", "p"), task("B", "q"), task("C", "p")], id="m1"),
        line(3, "user", None, "p", side=True),
        line(4, "user", None, "p", side=True),
        line(5, "user", None, "other", side=True),
        line(6, "user", None, "q", side=True),
    ]
    path = tmp_path / "parallel.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (res,) = import_paths(store, [str(path)])
    nodes = store.nodes(res.id)
    claimed = {
        n.metadata["claude_code"]["uuid"]: n.metadata.get("task_tool_use_id")
        for n in nodes
        if n.role == "user" and n.metadata["claude_code"].get("isSidechain")
    }
    assert claimed == {"u3": "C", "u4": "A", "u5": "B", "u6": None}


def peak_ratio(store, path) -> float:
    tracemalloc.start()
    try:
        import_paths(store, [str(path)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / path.stat().st_size


def test_a_jsonl_transcript_is_streamed(claude_code_generator, corpus, tmp_path, store):
    # Reading the file whole (bytes, text, a list of lines) took 13-16x its size; the
    # bench measures this shape against the 4x target.
    path = claude_code_generator.replicated(tmp_path / "big.jsonl", corpus / REAL, 20)
    assert path.stat().st_size > 2_000_000
    assert peak_ratio(store, path) < 5.5


def test_a_single_long_line_is_not_copied(claude_code_generator, tmp_path, store):
    # Reading it whole, as text and as a list of lines took 7.5x its size (with escapes
    # and non-ASCII text: the decoder's scratch and the string's UTF-8 copy remain).
    path = claude_code_generator.single_line(tmp_path / "one.jsonl", 8_000_000)
    assert peak_ratio(store, path) < 4
