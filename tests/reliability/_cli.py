"""Helpers of the reliability probes: the command line run as a real process (so a
hang, a traceback or an unbounded allocation shows as what it is), small real
transcripts, and the check that an error is one line."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "corpus"
TAU = CORPUS / "openai-chat-json" / "taubench_gpt-4o-airline.json"

#: Address space a probed command may use: past it an unbounded allocation fails fast
#: (MemoryError) instead of swapping the machine for minutes.
MEMORY_LIMIT = 3 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    os.setsid()  # its own process group: the test can stop it and all it started


def ctxrules(
    *args: str, timeout: float = 300, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``ctxrules ARGS…`` in a process of its own (memory-limited, own process
    group, stdin empty); a run past ``timeout`` is killed with its group and fails."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxrules", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
        preexec_fn=_limited,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        raise AssertionError(
            f"ctxrules {' '.join(args)} still ran after {timeout} s: {err[-2000:]}"
        ) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def one_line_error(proc: subprocess.CompletedProcess[str], *says: str) -> str:
    """Assert ``proc`` failed with exit 1 and one ``ctxrules …: error:`` line (no
    traceback) containing every one of ``says``; returns the line."""
    err = proc.stderr
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert proc.returncode == 1 and len(lines) == 1, (proc.returncode, err[-3000:])
    for text in says:
        assert text in lines[0], lines[0]
    return lines[0]


def tau_sessions(folder: Path, count: int, start: int = 0) -> Path:
    """A transcript file of ``count`` real tau-bench runs (one session each)."""
    runs = json.loads(TAU.read_text())[start : start + count]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"tau_{start}_{count}.json"
    path.write_text(json.dumps(runs))
    return path


WORKERS = Path(__file__).with_name("_workers.py")


def together(count: int, *args: str) -> list[str]:
    """Run ``ctxrules ARGS…`` in ``count`` processes released at one moment (each waits
    for a line on stdin, ``_workers.py cli``); their outputs, each asserted exit 0."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKERS), "cli", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    for p in procs:
        p.stdin.write("go\n")  # type: ignore[union-attr]
    for p in procs:
        p.stdin.flush()  # type: ignore[union-attr]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(out)
    return outs
