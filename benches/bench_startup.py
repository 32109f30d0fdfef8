"""Start-up, side by side in one run: ``import ctxrules`` against importing its own
required dependencies together, and ``ctxrules --version`` / ``ctxrules count FILE`` as
whole processes against ``python -c "import msgspec, pluggy"``.

Targets (issue "the house"): ``import ctxrules`` within 2× the import time of its
required dependencies together; ``ctxrules --version`` and ``ctxrules count`` on a
small file within 2× ``python -c "import msgspec, pluggy"``.  Each figure is the
median of fresh processes, the sides alternating round by round so machine noise falls
on both; benches/README.md ("Start-up") has the figures.  Under ``make test``
(benchmarks disabled) each case runs once, as a check that it works.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: The runtime dependencies in pyproject.toml, as modules.
DEPENDENCIES = "msgspec, pluggy, tiktoken, rich, yaml"


def _import_seconds(modules: str) -> float:
    """Seconds a fresh interpreter spends importing ``modules`` (measured inside it, so
    the interpreter's own start-up is left out)."""
    code = f"import time; t = time.perf_counter(); import {modules}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def _process_seconds(argv: list[str]) -> float:
    """Wall seconds of a whole process, start to exit."""
    t = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True)
    return time.perf_counter() - t


def _ctxrules() -> str:
    found = shutil.which("ctxrules", path=str(Path(sys.executable).parent))
    assert found, "the ctxrules command is not installed beside this interpreter"
    return found


def _side_by_side(benchmark, ours, theirs, rounds: int) -> dict[str, float]:
    """Alternate ``ours`` and ``theirs`` for ``rounds`` rounds; medians and their ratio."""
    a: list[float] = []
    b: list[float] = []

    def once() -> None:
        a.append(ours())
        b.append(theirs())

    benchmark.pedantic(once, rounds=rounds, iterations=1, warmup_rounds=1)
    out = {"ours": statistics.median(a), "baseline": statistics.median(b)}
    out["ratio"] = out["ours"] / out["baseline"]
    benchmark.extra_info.update(out)
    return out


def _rounds(benchmark) -> int:
    return 1 if benchmark.disabled else 15


def test_import_against_the_dependencies(benchmark):
    got = _side_by_side(
        benchmark,
        lambda: _import_seconds("ctxrules"),
        lambda: _import_seconds(DEPENDENCIES),
        _rounds(benchmark),
    )
    assert got["ours"] > 0 and got["baseline"] > 0


@pytest.mark.parametrize("command", ["--version", "count"])
def test_a_command_against_bare_python(benchmark, command, tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("hello world\n" * 10)
    argv = [_ctxrules(), command] + ([str(small)] if command == "count" else [])
    got = _side_by_side(
        benchmark,
        lambda: _process_seconds(argv),
        lambda: _process_seconds([sys.executable, "-c", "import msgspec, pluggy"]),
        _rounds(benchmark),
    )
    assert got["ours"] > 0 and got["baseline"] > 0
