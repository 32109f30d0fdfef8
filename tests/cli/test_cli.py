"""The CLI's first contact: version, count, plugins, demo, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import ctxrules
from ctxrules.tokenizers import get_tokenizer


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxrules", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_version_names_the_installed_version():
    out = run_cli("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"ctxrules {ctxrules.__version__}"


def test_count_stdin_json_matches_the_oracle():
    text = "Hello, world! 日本語 🙂\n" * 10
    out = run_cli("count", "--json", "--encoding", "cl100k_base", stdin=text)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    oracle = get_tokenizer("tiktoken:cl100k_base").count(text)
    assert data["encoding"] == "cl100k_base"
    assert data["tokens"] == oracle
    assert data["files"] == [{"path": "<stdin>", "tokens": oracle}]


def test_count_files_prints_total(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("one two three")
    b.write_text("four five")
    out = run_cli("count", str(a), str(b))
    assert out.returncode == 0, out.stderr
    oracle = get_tokenizer("tiktoken:o200k_base")
    expected = oracle.count("one two three") + oracle.count("four five")
    assert out.stdout.strip().splitlines()[-1] == str(expected)


def test_missing_file_is_one_line_error_without_traceback(tmp_path):
    out = run_cli("count", str(tmp_path / "nope.txt"))
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "nope.txt" in out.stderr and "no such file" in out.stderr


def test_unknown_encoding_is_a_clear_error():
    out = run_cli("count", "--encoding", "gpt2", stdin="x")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert "gpt2" in out.stderr and "o200k_base" in out.stderr


def test_plugins_json_lists_builtins_with_their_hooks():
    out = run_cli("plugins", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    builtin = {r["name"]: r for r in rows if r["builtin"]}
    assert "builtin_tokenizers" in builtin
    row = builtin["builtin_tokenizers"]
    assert row["distribution"] == "ctxrules"
    assert "register_tokenizers" in row["hooks"]
    assert "o200k_base" in row["provides"]["tokenizers"]


def test_demo_runs_on_the_bundled_session():
    out = run_cli("demo")
    assert out.returncode == 0, out.stderr
    assert "claude_code_init.jsonl" in out.stdout
