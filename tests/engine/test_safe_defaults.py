"""Safe defaults for a library inside a service: nothing private reaches a model unless
the author switched it on.  ``@path`` references are off (and, when on, never read a
hidden file or a version control system's internals, however named or linked); the
system prompt carries neither the git user's name and e-mail nor the file names of the
working tree; each comes back with its switch."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from ctxrules import dag
from ctxrules.context_sources import SourcesConfig
from ctxrules.engine import Engine, EngineConfig

from .conftest import QUIET

NOW = 1_767_225_600.0


def _prep(store, text: str, **config):
    config.setdefault("sources", QUIET)
    engine = Engine(store, EngineConfig(model="claude-sonnet-4-5", **config))
    return engine.prepare(dag.create_session(store).id, text, now=NOW)


def test_references_are_off_unless_enabled(store, tmp_path):
    (tmp_path / "app.py").write_text("print('the source')\n")
    off = _prep(store, "look at @app.py", working_directory=str(tmp_path))
    assert off.references == () and "the source" not in json.dumps(off.body)
    on = _prep(store, "look at @app.py", working_directory=str(tmp_path), references=True)
    assert [r.mention for r in on.references] == ["app.py"]
    assert "the source" in json.dumps(on.body)


def test_hidden_files_and_vcs_internals_are_never_read(store, tmp_path):
    work = tmp_path / "work"
    for path, text in {
        ".git/config": "[user] email = ada@example.org",
        ".env": "API_KEY=sk-live-secret",
        ".ssh/id_ed25519": "PRIVATE KEY",
        "CVS/Root": ":pserver:ada@cvs.example.org",
        "src/.hidden.py": "hidden source",
        "src/app.py": "the source",
    }.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    (work / "notes.txt").symlink_to(work / ".git" / "config")  # a plain name, a private target
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    (work / ".cache").mkdir()
    (work / ".cache" / "out.txt").symlink_to(outside)  # a private name, linking out
    text = "see @.git/config @.env @.ssh/id_ed25519 @CVS/Root @src/.hidden.py @notes.txt "
    text += "@.cache/out.txt and @src/app.py"
    prep = _prep(store, text, working_directory=str(work), references=True)
    assert [r.mention for r in prep.references] == ["src/app.py"]
    body = json.dumps(prep.body)
    for secret in ("ada@example.org", "sk-live-secret", "PRIVATE KEY", "hidden source", "outside"):
        assert secret not in body


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_git_user_and_the_file_tree_are_off_unless_enabled(store, tmp_path, monkeypatch):
    empty = tmp_path / "gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.name", "Ada Lovelace")
    git("config", "user.email", "ada@example.org")
    (repo / "tracked.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "commit.gpgsign=false", "commit", "-q", "-m", "first commit")
    (repo / "customer-list.csv").write_text("untracked\n")
    (repo / "tracked.py").write_text("x = 2\n")
    sources = SourcesConfig(instruction_files=False, date=False)
    default = json.dumps(_prep(store, "hi", working_directory=str(repo), sources=sources).body)
    assert "Current branch: main" in default and "first commit" in default
    for private in ("Ada Lovelace", "ada@example.org", "customer-list.csv", "tracked.py"):
        assert private not in default
    both = SourcesConfig(instruction_files=False, date=False, git_user=True, git_files=True)
    enabled = json.dumps(_prep(store, "hi", working_directory=str(repo), sources=both).body)
    for private in ("Ada Lovelace <ada@example.org>", "customer-list.csv", "tracked.py"):
        assert private in enabled
