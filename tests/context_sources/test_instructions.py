"""The ``instruction_files`` context source on a temporary tree: which files, in which
order, where the search stops, the size cap and its notes, unreadable files skipped."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from ctxrules.context_sources import SourceRequest, SourcesConfig, get_context_source
from ctxrules.context_sources.instruction_files import instruction_paths

NOW = 1767225600.0


def collect(cwd: Path, *added: Path, **config) -> str | None:
    request = SourceRequest(
        session_id="s_instr",
        working_directory=str(cwd),
        added_directories=tuple(str(a) for a in added),
        now=NOW,
        config=SourcesConfig(**config),
    )
    return get_context_source("instruction_files").collect(request)


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """A repository ``ws`` (with files at three depths), a file above it that belongs to
    no one, and a second repository ``extra`` to add."""
    (tmp_path / "AGENTS.md").write_text("ABOVE THE REPOSITORY")
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "AGENTS.md").write_text("root agents")
    (ws / "CLAUDE.md").write_text("root claude")
    (ws / "pkg" / "sub").mkdir(parents=True)
    (ws / "pkg" / "AGENTS.md").write_text("pkg agents")
    (ws / "pkg" / "sub" / "CLAUDE.md").write_text("sub claude")
    extra = tmp_path / "extra"
    (extra / ".git").mkdir(parents=True)
    (extra / "AGENTS.md").write_text("extra agents")
    return {"root": tmp_path, "ws": ws, "cwd": ws / "pkg" / "sub", "extra": extra}


def test_files_from_the_repository_root_down_then_the_added_directories(tree):
    ws, extra = tree["ws"], tree["extra"]
    expected = [
        ws / "AGENTS.md",
        ws / "CLAUDE.md",
        ws / "pkg" / "AGENTS.md",
        ws / "pkg" / "sub" / "CLAUDE.md",
        extra / "AGENTS.md",
    ]
    # ws/pkg is added too, but its files were already reached: shown once, first place.
    dirs = [str(tree["cwd"]), str(extra), str(ws / "pkg")]
    assert instruction_paths(dirs, ("AGENTS.md", "CLAUDE.md")) == expected
    text = collect(tree["cwd"], extra, ws / "pkg")
    assert text is not None
    assert "ABOVE THE REPOSITORY" not in text  # the search stops at the repository root
    bodies = ["root agents", "root claude", "pkg agents", "sub claude", "extra agents"]
    positions = [text.index(f"# {p}\n\n{body}") for p, body in zip(expected, bodies)]
    assert positions == sorted(positions)
    assert text.count("pkg agents") == 1
    assert text.startswith("Instructions from the workspace's instruction files (AGENTS.md, ")


def test_configured_names_and_their_order(tree):
    ws = tree["ws"]
    (ws / "TEAM.md").write_text("team rules")
    names = ("CLAUDE.md", "TEAM.md", "AGENTS.md")
    assert instruction_paths([str(ws)], names) == [ws / n for n in names]
    text = collect(ws, instruction_file_names=("TEAM.md",))
    assert text is not None and "team rules" in text
    assert "root agents" not in text and "root claude" not in text


def test_switched_off_or_nothing_found_is_none(tree, tmp_path):
    assert collect(tree["cwd"], instruction_files=False) is None
    empty = tmp_path / "elsewhere"
    (empty / ".git").mkdir(parents=True)
    assert collect(empty) is None


def test_outside_a_repository_the_search_goes_to_the_filesystem_root(tmp_path):
    if any((p / ".git").exists() for p in tmp_path.parents):
        pytest.skip("the temporary directory is inside a git repository")
    name = f"NOTES-{uuid.uuid4().hex}.md"  # no stray file on the machine can match
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    (tmp_path / name).write_text("top")
    (deep / name).write_text("deep")
    assert instruction_paths([str(deep)], (name,)) == [tmp_path / name, deep / name]


def test_unreadable_files_are_skipped(tree):
    ws = tree["ws"]
    (ws / "pkg" / "CLAUDE.md").mkdir()  # a directory with the name
    (ws / "pkg" / "sub" / "AGENTS.md").write_bytes(b"\xff\xfe not utf-8 \x80")
    (ws / "pkg" / "sub" / "TEAM.md").symlink_to(ws / "missing.md")  # dangling link
    (ws / "pkg" / "sub" / "EMPTY.md").write_text("   \n")
    names = ("AGENTS.md", "CLAUDE.md", "TEAM.md", "EMPTY.md")
    text = collect(tree["cwd"], instruction_file_names=names)
    assert text is not None
    shown = [line[2:] for line in text.splitlines() if line.startswith("# /")]
    assert shown == [
        str(ws / "AGENTS.md"),
        str(ws / "CLAUDE.md"),
        str(ws / "pkg" / "AGENTS.md"),
        str(ws / "pkg" / "sub" / "CLAUDE.md"),
    ]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_a_file_without_read_permission_is_skipped(tree):
    locked = tree["ws"] / "CLAUDE.md"
    locked.chmod(0)
    try:
        text = collect(tree["ws"])
    finally:
        locked.chmod(0o644)
    assert text is not None and "root agents" in text and "root claude" not in text


def test_a_symlinked_file_is_shown_once(tree):
    ws = tree["ws"]
    (ws / "pkg" / "CLAUDE.md").symlink_to(ws / "CLAUDE.md")
    text = collect(tree["cwd"])
    assert text is not None and text.count("root claude") == 1


def test_the_contents_are_capped_with_notes(tree, tmp_path):
    ws = tmp_path / "capped"
    (ws / ".git").mkdir(parents=True)
    (ws / "a").mkdir()
    first, second, third = "α" * 400, "β" * 400, "γ" * 400  # in no path or note
    (ws / "AGENTS.md").write_text(first)
    (ws / "CLAUDE.md").write_text(second)
    (ws / "a" / "AGENTS.md").write_text(third)
    text = collect(ws / "a", instruction_max_chars=500)
    assert text is not None
    assert first in text
    assert "β" * 100 in text and "β" * 101 not in text  # the 500 characters are used up
    assert f"read {ws / 'CLAUDE.md'} for the rest" in text
    assert "γ" not in text
    assert f"over the 500-character limit: {ws / 'a' / 'AGENTS.md'}" in text
    shown = sum(text.count(c) for c in "αβγ")
    assert shown == 500
    # A cap that fits everything shows everything and no note.
    whole = collect(ws / "a", instruction_max_chars=1200) or ""
    assert all(body in whole for body in (first, second, third)) and "cut here" not in whole


def test_a_cut_never_splits_a_character(tmp_path):
    ws = tmp_path / "utf8"
    (ws / ".git").mkdir(parents=True)
    (ws / "AGENTS.md").write_text("é" * 300)  # two bytes each
    text = collect(ws, instruction_max_chars=201)
    assert text is not None and "é" * 201 in text and "é" * 202 not in text
    assert "\ufffd" not in text
