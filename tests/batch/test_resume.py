"""``--out`` keeps every session that finished and resumes from it: a run stopped after
some sessions (Ctrl-C in the library, SIGINT to the command's process group) and run
again leaves the same bytes as one uninterrupted run; a last line cut short is dropped;
results made under other rules are refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ctxrules.batch import ReplayOptions, rerender
from ctxrules.config import PipelineConfig
from ctxrules.errors import ConfigError, ValidationError

from .conftest import OPTIONS


def test_a_run_stopped_after_three_sessions_resumes_to_the_same_file(subset, reference, tmp_path):
    out = tmp_path / "out.jsonl"

    def stop_after_three(done: int, total: int) -> None:
        if done >= 3:
            raise KeyboardInterrupt

    first = rerender([str(subset)], OPTIONS, jobs=1, out=out, progress=stop_after_three)
    assert first.interrupted and first.replayed == 3
    assert out.read_bytes() == b"".join(line + b"\n" for line in reference.splitlines()[:3])
    second = rerender([str(subset)], OPTIONS, jobs=1, out=out)
    assert (second.resumed, second.replayed, second.interrupted) == (3, 16, False)
    assert out.read_bytes() == reference
    assert len(second.records) == 19 and second.totals["sessions"] == 19


def test_a_cut_last_line_is_dropped_and_the_order_restored(subset, reference, tmp_path):
    lines = reference.splitlines()
    out = tmp_path / "out.jsonl"
    # Finished out of order (as workers finish), then a write cut short.
    out.write_bytes(lines[5] + b"\n" + lines[2] + b"\n" + lines[9] + b"\n" + lines[11][:40])
    result = rerender([str(subset)], OPTIONS, jobs=1, out=out)
    assert (result.resumed, result.replayed) == (3, 16)
    assert out.read_bytes() == reference


def test_results_of_other_rules_are_refused(subset, reference, tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_bytes(reference)
    other = ReplayOptions.of(PipelineConfig.preset("default"))
    with pytest.raises(ConfigError, match="rules_version"):
        rerender([str(subset)], other, jobs=1, out=out)
    assert out.read_bytes() == reference


def test_a_broken_line_before_the_last_is_an_error(subset, reference, tmp_path):
    out = tmp_path / "out.jsonl"
    lines = reference.splitlines()
    out.write_bytes(lines[0] + b"\n{oops\n" + lines[1] + b"\n")
    with pytest.raises(ValidationError, match=r"out\.jsonl:2"):
        rerender([str(subset)], OPTIONS, jobs=1, out=out)


def test_ctrl_c_stops_the_workers_and_keeps_what_finished(subset, reference, tmp_path):
    out = tmp_path / "out.jsonl"
    argv = [sys.executable, "-m", "ctxrules", "rerender", str(subset), "--preset", "aggressive"]
    argv += ["--jobs", "2", "--out", str(out)]
    # Its own process group, as a terminal's: SIGINT reaches the workers too.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.read_bytes().count(b"\n")) and proc.poll() is None:
            assert time.monotonic() < deadline, "no session finished in 120 s"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err.decode()
    assert b"interrupted after" in err and b"again to resume" in err
    kept = out.read_bytes().splitlines()
    assert 0 < len(kept) < 19
    assert set(kept) <= set(reference.splitlines())  # whole records, as one run makes them
    result = rerender([str(subset)], OPTIONS, jobs=2, out=out)
    assert result.resumed == len(kept) and result.replayed == 19 - len(kept)
    assert out.read_bytes() == reference
    assert all(json.loads(line)["violations"] == [] for line in reference.splitlines())
