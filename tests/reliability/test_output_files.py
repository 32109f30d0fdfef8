"""Probes: what ``rerender --out``, ``tune --out`` and ``view --export`` do to files
that exist.  A file that is not one the command wrote (recognised by its content,
whatever its name) is refused untouched unless ``--force``; a device, a folder or a
link is refused before any work; a missing folder is one line; a second writer of the
same results file is refused while the first runs; a killed run leaves the results
file as it was and its journal resumes; duplicate and stale lines are dropped.

Each ran against the code before issue 25 and failed there (the unrelated file was
truncated and overwritten, /dev/zero was read until the memory limit, tune measured
everything and then died with a traceback, two runs interleaved their lines)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _cli import ctxrules, one_line_error, tau_sessions

PRECIOUS = b'{"api_key_file": "~/.keys", "retries": 3, "endpoint": "https://x"}'  # no newline
BLOB = bytes(range(256)) * 40


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return tau_sessions(tmp_path_factory.mktemp("src"), 3)


@pytest.fixture(scope="module")
def store(tmp_path_factory, source) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("store")
    proc = ctxrules("import", str(source), "--store", str(root / "s"), "--json")
    assert proc.returncode == 0, proc.stderr
    return str(root / "s"), json.loads(proc.stdout)["sessions"][0]["id"]


# -- rerender --out ----------------------------------------------------------------------------


@pytest.mark.parametrize("content", [PRECIOUS, BLOB], ids=["one-line-json", "binary"])
def test_rerender_refuses_a_file_that_is_not_its_results(tmp_path, source, content):
    target = tmp_path / "precious.json"
    target.write_bytes(content)
    proc = ctxrules("rerender", str(source), "--jobs", "1", "--quiet", "--out", str(target))
    one_line_error(proc, str(target), "not a rerender results file", "--force")
    assert target.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious.json"]  # no lock, no temp


def test_force_replaces_it(tmp_path, source):
    target = tmp_path / "precious.json"
    target.write_bytes(PRECIOUS)
    proc = ctxrules(
        "rerender", str(source), "--jobs", "1", "--quiet", "--out", str(target), "--force"
    )
    assert proc.returncode == 0, proc.stderr
    lines = target.read_bytes().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["session"] for line in lines)


@pytest.mark.parametrize("device", ["/dev/full", "/dev/zero", "/dev/null"])
def test_rerender_refuses_a_device_before_reading_anything(source, device):
    proc = ctxrules("rerender", str(source), "--jobs", "1", "--quiet", "--out", device, timeout=120)
    one_line_error(proc, device, "character device")


def test_rerender_refuses_a_folder_and_a_missing_folder(tmp_path, source):
    one_line_error(
        ctxrules("rerender", str(source), "--quiet", "--out", str(tmp_path)), "a directory"
    )
    missing = tmp_path / "no" / "such" / "out.jsonl"
    one_line_error(
        ctxrules("rerender", str(source), "--quiet", "--out", str(missing)), "folder does not exist"
    )


def test_duplicate_and_stale_lines_are_dropped(tmp_path, source):
    out = tmp_path / "out.jsonl"
    assert (
        ctxrules("rerender", str(source), "--jobs", "1", "--quiet", "--out", str(out)).returncode
        == 0
    )
    good = out.read_bytes().splitlines()
    stale = json.loads(good[0])
    stale["session"] = "s_not_in_the_source"
    stale_line = json.dumps(stale, sort_keys=True, separators=(",", ":")).encode()
    out.write_bytes(b"\n".join([good[0], good[0], good[1], stale_line, good[1], good[2]]) + b"\n")
    proc = ctxrules("rerender", str(source), "--jobs", "1", "--quiet", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["resumed"] == 3
    assert out.read_bytes().splitlines() == good


def _journal_has_a_line(
    journal: Path, proc: subprocess.Popen[bytes], *, poll: float = 0.02
) -> None:
    deadline = time.monotonic() + 180
    while not (journal.exists() and journal.read_bytes().count(b"\n")):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "no session finished in 180 s"
        time.sleep(poll)


def _start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ctxrules", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


@pytest.fixture(scope="module")
def longer(tmp_path_factory) -> Path:
    return tau_sessions(tmp_path_factory.mktemp("longer"), 40, start=10)


def test_a_second_writer_of_one_results_file_is_refused(tmp_path, longer):
    out = tmp_path / "out.jsonl"
    first = _start("rerender", str(longer), "--jobs", "1", "--quiet", "--out", str(out))
    try:
        _journal_has_a_line(tmp_path / ".out.jsonl.partial", first, poll=0.001)
        # Held still while the second writer tries: a fast replay could otherwise
        # finish the whole run first, and the second would find a finished journal.
        os.killpg(first.pid, signal.SIGSTOP)
        assert first.poll() is None, "the first run finished before it could be held"
        try:
            second = ctxrules("rerender", str(longer), "--jobs", "1", "--quiet", "--out", str(out))
        finally:
            os.killpg(first.pid, signal.SIGCONT)
        one_line_error(second, str(out), "is writing it now")
        assert first.wait(timeout=300) == 0, first.communicate()[1][-2000:]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    sessions = [json.loads(line)["session"] for line in out.read_bytes().splitlines()]
    assert len(sessions) == len(set(sessions)) == 40


def test_a_killed_run_leaves_the_results_file_whole_and_its_journal_resumes(tmp_path, longer):
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"")  # a results file with nothing in it yet
    run = _start("rerender", str(longer), "--jobs", "2", "--quiet", "--out", str(out))
    journal = tmp_path / ".out.jsonl.partial"
    try:
        _journal_has_a_line(journal, run)
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert out.read_bytes() == b""  # never written in place: the old file, whole
    done = {json.loads(line)["session"] for line in journal.read_bytes().splitlines()[:-1]}
    proc = ctxrules("rerender", str(longer), "--jobs", "1", "--quiet", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["resumed"] >= len(done) >= 1
    assert not journal.exists()
    assert len(out.read_bytes().splitlines()) == 40


# -- tune --out ---------------------------------------------------------------------------------

TUNE = ["--param", "tool_aging.tail_turns=1..2", "--preset", "default", "--jobs", "1"]


def test_tune_refuses_an_unrelated_file_of_its_names_before_measuring(tmp_path, source):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "results.csv").write_text("name,amount\nrent,1200\n")
    proc = ctxrules("tune", str(source), *TUNE, "--out", str(folder))
    one_line_error(proc, "results.csv", "not a file of ctxrules tune", "--force")
    assert (folder / "results.csv").read_text() == "name,amount\nrent,1200\n"
    assert sorted(p.name for p in folder.iterdir()) == ["results.csv"]  # nothing measured


@pytest.mark.parametrize("target", ["FILE", "/dev/full", "/proc/self"])
def test_tune_refuses_what_is_no_folder_before_measuring(tmp_path, source, target):
    if target == "FILE":
        target = str(tmp_path / "a-file")
        Path(target).write_text("keep me")
    proc = ctxrules("tune", str(source), *TUNE, "--out", target, timeout=120)
    line = one_line_error(proc, target)
    assert "not a folder" in line or "cannot" in line
    if target.endswith("a-file"):
        assert Path(target).read_text() == "keep me"


def test_a_second_tune_replaces_its_own_files(tmp_path, source):
    out = tmp_path / "t"
    for _ in range(2):
        proc = ctxrules("tune", str(source), *TUNE, "--out", str(out), "--json")
        assert proc.returncode == 0, proc.stderr
    assert {"results.json", "results.csv", "chosen.toml"} <= {p.name for p in out.iterdir()}
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no lock or temp left


# -- view --export ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["folder", "missing-folder", "/dev/full"])
def test_export_refuses_what_it_cannot_write_in_one_line(tmp_path, store, case):
    path, sid = store
    target = {
        "folder": str(tmp_path),
        "missing-folder": str(tmp_path / "nope" / "x.html"),
        "/dev/full": "/dev/full",
    }[case]
    proc = ctxrules("view", sid, "--store", path, "--export", target, timeout=120)
    one_line_error(proc, target)


def test_export_neither_follows_a_link_nor_overwrites_a_stranger(tmp_path, store):
    path, sid = store
    victim = tmp_path / "victim.txt"
    victim.write_text("important")
    link = tmp_path / "view.html"
    link.symlink_to(victim)
    one_line_error(ctxrules("view", sid, "--store", path, "--export", str(link)), "symbolic link")
    one_line_error(ctxrules("view", sid, "--store", path, "--export", str(victim)), "--force")
    assert victim.read_text() == "important" and link.is_symlink()
    page = tmp_path / "page.html"
    for _ in range(2):  # its own page is replaced
        proc = ctxrules("view", sid, "--store", path, "--export", str(page))
        assert proc.returncode == 0, proc.stderr
    assert page.read_bytes().startswith(b"<!doctype html>")
