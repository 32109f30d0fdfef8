"""The README's tour runs as written: every shell line and the Python example, in a
fresh directory holding only the README and the test data."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOUR = "## A short tour"


def _blocks(lang: str) -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    tour = text.split(TOUR, 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"^```{lang}\n(.*?)^```", tour, re.M | re.S)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A directory that looks like a clone to the tour: README.md and tests/data."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(REPO / "tests" / "data")
    (tmp_path / "README.md").write_bytes((REPO / "README.md").read_bytes())
    return tmp_path


def test_the_tour_commands_run(clone):
    (block,) = _blocks("sh")
    lines = [x for x in block.splitlines() if x.strip() and not x.lstrip().startswith("#")]
    assert sum(x.startswith("ctxrules ") for x in lines) >= 15
    for needed in ("import", "sessions", "log", "fork", "commit", "render", "demo"):
        assert any(x.startswith(f"ctxrules {needed} ") for x in lines), needed
    # The ctxrules of this interpreter, whatever PATH the tour's first line sets.
    script = f'ctxrules() {{ "{sys.executable}" -m ctxrules "$@"; }}\n'
    for i, line in enumerate(lines):
        # the line alone inside the group, so its trailing comment ends with it
        script += f"{{\n{line}\n}} > out.{i} 2> err.{i} || {{ echo {i} > failed; exit 1; }}\n"
    done = subprocess.run(["bash", "-c", script], cwd=clone, timeout=600)
    if done.returncode:
        i = int((clone / "failed").read_text())
        err = (clone / f"err.{i}").read_text()
        pytest.fail(f"README line {lines[i]!r} failed: {err}")
    outputs = [(clone / f"out.{i}").read_text() for i in range(len(lines))]
    errors = [(clone / f"err.{i}").read_text() for i in range(len(lines))]
    assert not any(errors), [e for e in errors if e]
    silent = [line for line, out in zip(lines, outputs) if not out]
    assert silent == ["export PATH=$PWD/.venv/bin:$PATH"]  # every command prints something
    assert (clone / ".ctxrules" / "ctxrules.db").is_file()


def test_the_tour_python_example_runs(clone):
    (block,) = _blocks("python")
    store = clone / ".ctxrules"
    imported = subprocess.run(
        [sys.executable, "-m", "ctxrules", "import", "--store", str(store)]
        + [str(p) for p in sorted((clone / "tests/data/corpus/claude-code-jsonl").glob("*.jsonl"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr
    done = subprocess.run(
        [sys.executable, "-c", block + "\nassert body.startswith(b'{')\n"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
