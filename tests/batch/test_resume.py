"""``--out`` keeps every session that finished and resumes from it: a run stopped after
some sessions (Ctrl-C in the library, SIGINT to the command's process group) and run
again leaves the same bytes as one uninterrupted run; a last line cut short is dropped;
results made under other rules are refused.  (A run killed outright, the journal it
leaves, and what --out does to other files: tests/reliability/test_output_files.py.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import default_sigint

from ctxrules.batch import ReplayOptions, rerender
from ctxrules.config import PipelineConfig
from ctxrules.errors import ConfigError, ValidationError

from .conftest import OPTIONS, TAU, TAU_KEPT


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


@pytest.fixture(scope="module")
def longer(subset, corpus, tmp_path_factory) -> tuple[Path, int]:
    """``subset`` and 60 more tau-bench runs: long enough (some seconds) that a SIGINT
    sent once the first session is written always lands before the run ends."""
    root = tmp_path_factory.mktemp("longer")
    shutil.copytree(subset, root, dirs_exist_ok=True)
    runs = json.loads((corpus / TAU).read_text())[TAU_KEPT : TAU_KEPT + 60]
    (root / "more" / "tau_more.json").parent.mkdir(parents=True)
    (root / "more" / "tau_more.json").write_text(json.dumps(runs))
    return root, 19 + len(runs)


def test_ctrl_c_stops_the_workers_and_keeps_what_finished(longer, tmp_path):
    folder, sessions = longer
    out = tmp_path / "out.jsonl"
    argv = [sys.executable, "-m", "ctxrules", "rerender", str(folder), "--preset", "aggressive"]
    argv += ["--jobs", "2", "--out", str(out)]
    # Its own process group, as a terminal's: SIGINT reaches the workers too.
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=default_sigint,
    )
    # Finished sessions go to the journal beside --out; --out is replaced when the run ends.
    journal = tmp_path / ".out.jsonl.partial"
    try:
        deadline = time.monotonic() + 120
        while not (journal.exists() and journal.read_bytes().count(b"\n")) and proc.poll() is None:
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
    assert 0 < len(kept) < sessions and not journal.exists()
    whole = tmp_path / "whole.jsonl"
    reference = rerender([str(folder)], OPTIONS, jobs=2, out=whole)
    assert set(kept) <= set(whole.read_bytes().splitlines())  # whole records, as one run makes
    result = rerender([str(folder)], OPTIONS, jobs=2, out=out)
    assert result.resumed == len(kept) and result.replayed == sessions - len(kept)
    assert out.read_bytes() == whole.read_bytes()
    assert not reference.interrupted and reference.replayed == sessions
    assert all(json.loads(line)["violations"] == [] for line in out.read_bytes().splitlines())
