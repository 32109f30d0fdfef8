"""A directory imports every transcript under it; the files no importer knows are
reported as skipped, not refused."""

from __future__ import annotations

import json
import shutil

import pytest

from ctxrules.cli import main
from ctxrules.errors import ImportFormatError
from ctxrules.importers import import_paths, import_report

CC = [
    "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    "claude-code-jsonl/reliability_coverage-test-fix.jsonl",
]
CASSETTE = "vcr-cassettes-yaml/anthropic/test_anthropic_tool_with_thinking.yaml"


@pytest.fixture
def tree(corpus, tmp_path):
    """A projects folder: two sessions in one project, a cassette in a nested folder,
    files that are not transcripts, and hidden entries."""
    root = tmp_path / "projects"
    (root / "proj-b").mkdir(parents=True)
    (root / "proj-a" / "deep").mkdir(parents=True)
    for name in CC:
        shutil.copy(corpus / name, root / "proj-b" / name.rsplit("/", 1)[1])
    shutil.copy(corpus / CASSETTE, root / "proj-a" / "deep" / "recorded.yaml")
    (root / "proj-a" / "notes.txt").write_text("not a transcript\n")
    (root / "proj-a" / "settings.json").write_text(json.dumps({"theme": "dark"}))
    (root / ".hidden").mkdir()
    shutil.copy(corpus / CC[0], root / ".hidden" / "copy.jsonl")
    (root / ".DS_Store").write_bytes(b"\0\1\2")
    return root


def test_every_transcript_under_it_in_path_order(tree, store):
    report = import_report(store, [str(tree)])
    assert [r.source for r in report.sessions] == [
        str(tree / "proj-a" / "deep" / "recorded.yaml"),
        *(str(tree / "proj-b" / n.rsplit("/", 1)[1]) for n in sorted(CC)),
    ]
    assert [r.format for r in report.sessions] == ["cassette", "claude-code", "claude-code"]
    assert {s.path: s.reason for s in report.skipped} == {
        str(tree / "proj-a" / "notes.txt"): "not a transcript format ctxrules knows",
        str(tree / "proj-a" / "settings.json"): "not a transcript format ctxrules knows",
    }
    assert len(store.list_sessions()) == 3  # nothing from the hidden folder
    again = import_report(store, [str(tree)])
    assert [r.id for r in again.sessions] == [r.id for r in report.sessions]
    assert not any(r.created for r in again.sessions)


def test_a_named_file_that_is_no_transcript_is_still_an_error(tree, store, snapshot):
    with pytest.raises(ImportFormatError, match="not a transcript format"):
        import_paths(store, [str(tree), str(tree / "proj-a" / "notes.txt")])
    assert snapshot(store) == []


def test_a_bad_transcript_in_a_directory_writes_nothing(tree, store, snapshot):
    broken = tree / "proj-b" / "broken.jsonl"
    lines = (tree / "proj-b" / CC[0].rsplit("/", 1)[1]).read_text().splitlines()
    lines[3] = lines[3][:-10]
    broken.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImportFormatError, match=rf"{broken}:4: bad JSON"):
        import_paths(store, [str(tree)])
    assert snapshot(store) == []


def test_a_directory_without_transcripts_is_an_error(tmp_path, store):
    (tmp_path / "empty").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("hello\n")
    for folder in ("empty", "docs"):
        with pytest.raises(ImportFormatError, match="no transcript in the directory") as err:
            import_paths(store, [str(tmp_path / folder)])
        assert str(tmp_path / folder) in str(err.value)


def test_a_forced_format_skips_the_files_it_does_not_read(tree, store):
    report = import_report(store, [str(tree)], format="claude-code")
    assert [r.format for r in report.sessions] == ["claude-code", "claude-code"]
    assert str(tree / "proj-a" / "deep" / "recorded.yaml") in {s.path for s in report.skipped}


def test_the_cli_prints_each_file(tree, tmp_path, capsys):
    store = str(tmp_path / "store")
    assert main(["import", str(tree), "--store", store]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["imported"] * 3 + ["skipped"] * 2
    assert (
        out[-1]
        == f"skipped {tree / 'proj-a' / 'settings.json'}: not a transcript format ctxrules knows"
    )
    assert main(["import", str(tree), "--store", store, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"sessions", "skipped"}
    # The shape a file import has always printed, plus what was skipped.
    assert [set(row) for row in report["sessions"]] == [{"id", "calls", "source"}] * 3
    assert [set(s) for s in report["skipped"]] == [{"path", "reason"}] * 2
