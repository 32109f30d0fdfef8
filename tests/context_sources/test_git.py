"""The ``git_status`` context source on real git repositories made in the test: what it
reports, the 2,000-character cap with its note, no changes to the repository, and
``None`` outside a repository, without git, or when switched off."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ctxrules.context_sources import SourceRequest, SourcesConfig, get_context_source
from ctxrules.context_sources.git_status import NOTE

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

NOW = 1767225600.0
SUBJECTS = [f"commit number {i}" for i in range(1, 8)]


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Git sees neither the machine's nor the user's configuration, nor a repository
    above the test's directory."""
    empty = tmp_path / "empty-gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_AUTHOR_NAME", "EMAIL"):
        monkeypatch.delenv(var, raising=False)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout


def make_repo(path: Path, commits: list[str] = SUBJECTS) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Ada Lovelace")
    git(path, "config", "user.email", "ada@example.org")
    git(path, "config", "commit.gpgsign", "false")
    for name in ("a.txt", "b.txt", "old.txt"):
        (path / name).write_text(f"{name}\n")
    for i, subject in enumerate(commits):
        (path / "log.txt").write_text(f"{i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", subject)
    return path


def collect(cwd: Path, **config) -> str | None:
    request = SourceRequest(
        session_id="s_git", working_directory=str(cwd), now=NOW, config=SourcesConfig(**config)
    )
    return get_context_source("git_status").collect(request)


def test_branch_main_branch_user_changes_and_the_last_five_commits(tmp_path):
    repo = make_repo(tmp_path / "repo")
    git(repo, "switch", "-q", "-c", "feature/parser")
    (repo / "a.txt").write_text("a changed and staged\n")
    (repo / "new.py").write_text("print('new')\n")
    git(repo, "add", "a.txt", "new.py")
    git(repo, "mv", "old.txt", "renamed.txt")
    (repo / "b.txt").write_text("b changed, not staged\n")
    (repo / "notes.md").write_text("untracked\n")
    (repo / "sub").mkdir()
    text = collect(repo / "sub", git_user=True, git_files=True)  # any directory inside
    assert text is not None
    lines = text.splitlines()
    assert "Current branch: feature/parser" in lines
    assert "Main branch (the usual target of pull requests): main" in lines
    assert "Git user: Ada Lovelace <ada@example.org>" in lines

    def section(title: str) -> list[str]:
        start = lines.index(title) + 1
        end = next(
            (i for i in range(start, len(lines)) if not lines[i].startswith("  ")), len(lines)
        )
        return lines[start:end]

    assert section("Staged changes:") == [
        "  modified: a.txt",
        "  added: new.py",
        "  renamed: old.txt -> renamed.txt",
    ]
    assert section("Unstaged changes:") == ["  modified: b.txt"]
    assert section("Untracked files:") == ["  notes.md"]
    expected_log = [
        f"  {git(repo, 'rev-parse', '--short', f'HEAD~{i}').strip()} {SUBJECTS[-1 - i]}"
        for i in range(5)
    ]
    assert section("Recent commits:") == expected_log
    assert "commit number 2" not in text  # the sixth most recent is not shown
    assert len(text) <= 2000


def test_by_default_neither_the_user_nor_the_file_names_are_sent(tmp_path):
    """A library inside a service must not send who runs it, nor the files of the
    machine, unless asked: the status then gives the numbers only."""
    repo = make_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("changed\n")
    git(repo, "add", "a.txt")
    (repo / "b.txt").write_text("changed, not staged\n")
    (repo / "secret-plans.md").write_text("untracked\n")
    text = collect(repo)
    assert text is not None and "Current branch: main" in text
    for private in ("Ada", "ada@example.org", "Git user", "a.txt", "b.txt", "secret-plans"):
        assert private not in text
    assert "Status: 1 staged, 1 unstaged and 1 untracked (run `git status` for the files)" in text
    assert "commit number 7" in text  # the history of the project is still there


def test_a_clean_repository_and_one_without_commits(tmp_path):
    repo = make_repo(tmp_path / "clean", commits=["only commit"])
    text = collect(repo)
    assert text is not None and "Status: clean" in text and "Staged" not in text
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q", "-b", "trunk")
    text = collect(fresh, git_user=True)
    assert text is not None
    assert "Current branch: trunk" in text
    assert text.endswith("Recent commits:\n  (none yet)")
    assert "Git user: (not configured)" in text


def test_detached_head_names_the_commit(tmp_path):
    repo = make_repo(tmp_path / "repo", commits=["one", "two"])
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    short = git(repo, "rev-parse", "--short", "HEAD").strip()
    text = collect(repo)
    assert text is not None and f"Current branch: (detached HEAD at {short})" in text


def test_the_text_is_cut_to_the_cap_with_a_note_and_keeps_the_rest(tmp_path):
    repo = make_repo(tmp_path / "repo")
    names = [f"untracked-file-with-a-long-name-{i:04d}.txt" for i in range(300)]
    for name in names:
        (repo / name).write_text("x\n")
    text = collect(repo, git_user=True, git_files=True)
    assert text is not None
    assert len(text) <= 2000
    assert NOTE in text and "`git status`" in NOTE
    # What is cut is the change list: the header and the commits are all there.
    assert "Current branch: main" in text and "Git user: Ada Lovelace <ada@example.org>" in text
    assert text.splitlines()[-6:][0] == "Recent commits:"
    shown = [n for n in names if f"  {n}" in text.splitlines()]
    assert 0 < len(shown) < len(names)
    assert shown == names[: len(shown)]  # a prefix, in git's order
    # A larger cap shows more, and with room for everything nothing is cut.
    assert len(collect(repo, git_max_chars=4000, git_files=True) or "") > 2000
    whole = collect(repo, git_max_chars=100_000, git_files=True) or ""
    assert NOTE not in whole and all(f"  {n}" in whole.splitlines() for n in names)


def test_collecting_changes_nothing_in_the_repository(tmp_path):
    """No index refresh, no config write: with stat data made stale (a tracked file's
    mtime moved), a plain ``git status`` would rewrite the index; ours must not."""
    repo = make_repo(tmp_path / "repo")
    for name in ("a.txt", "b.txt", "log.txt"):
        st = (repo / name).stat()
        os.utime(repo / name, (st.st_atime + 1000, st.st_mtime + 1000))

    def fingerprint() -> dict[str, str]:
        git_dir = repo / ".git"
        return {
            str(p.relative_to(git_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(git_dir.rglob("*"))
            if p.is_file()
        }

    before = fingerprint()
    text = collect(repo)
    assert text is not None and "Status: clean" in text
    assert fingerprint() == before


def test_none_outside_a_repository_when_disabled_or_without_git(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert collect(plain) is None
    assert collect(tmp_path / "does-not-exist") is None
    repo = make_repo(tmp_path / "repo", commits=["one"])
    assert collect(repo, git_status=False) is None
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert collect(repo) is None


def test_a_git_that_does_not_answer_is_cut_off(tmp_path, monkeypatch):
    """Every git command runs under the timeout: a hanging ``git status`` is reported,
    the rest of the text is still given."""
    real = shutil.which("git")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do [ "$arg" = status ] && exec sleep 60; done\n'
        f'exec {real} "$@"\n'
    )
    fake.chmod(0o755)
    repo = make_repo(tmp_path / "repo", commits=["one"])
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    text = collect(repo, git_timeout_seconds=0.5)
    assert text is not None
    assert "git status did not finish within 0.5s; run `git status`" in text
    assert "Current branch: main" in text
    assert text.endswith("Recent commits:\n  " + git(repo, "log", "--format=%h %s").strip())
