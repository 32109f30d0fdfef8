"""Probe: a UTF-8 byte-order mark does not make a valid transcript unreadable.

Editors and tools on Windows (Notepad, PowerShell's ``Out-File``, .NET writers) start a
UTF-8 file with the mark ``EF BB BF``.  Before issue 25 such a copy of a valid file was
"not a transcript format" under auto-detection, and with ``--format`` forced "bad
JSON: invalid character (column 1)", never naming the mark.  Now the readers skip the
mark: for every format (JSON Lines, JSON documents, YAML cassettes, auto-detected or
forced) the copy with the mark imports the same sessions as the file without it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxrules.cli import main
from ctxrules.importers import detect_formats
from ctxrules.store import open_store

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
BOM = b"\xef\xbb\xbf"

#: One real file per reader: JSON Lines (two formats), JSON documents (four) and the
#: YAML of a VCR cassette.
FILES = [
    "claude-code-jsonl/entirecli/53_0a376fb9e2_0_full.jsonl",
    "codex-rollouts/agentv/a3_92ff332928_0_full.jsonl",
    "gemini-cli/entirecli/9c_53780d06b7_0_full.json",
    "openai-chat-json/taubench_gpt-4o-airline.json",
    "openhands-trajectory/basic_gui_mode.json",
    "swe-agent-traj/gpt4_swe-agent__test-repo-i1.traj",
    "vcr-cassettes-yaml/anthropic/chatlas__test_anthropic_tool_variations.yaml",
]


def _conversations(store_path: Path) -> list[list[tuple[str, str]]]:
    """Every session's nodes as (role, text), sessions in a stable order."""
    store = open_store(str(store_path))
    try:
        found = [
            [(n.role, str(n.output)) for n in store.nodes(s.id)] for s in store.list_sessions()
        ]
    finally:
        store.close()
    return sorted(found)


@pytest.mark.parametrize("forced", [False, True], ids=["auto", "forced"])
@pytest.mark.parametrize("rel", FILES, ids=[f.split("/")[0] for f in FILES])
def test_a_byte_order_mark_imports_as_the_file_without_it(tmp_path, capsys, rel, forced):
    original = CORPUS / rel
    formats = detect_formats(str(original))
    assert len(formats) == 1, formats
    marked = tmp_path / "marked" / original.name
    marked.parent.mkdir()
    marked.write_bytes(BOM + original.read_bytes())
    if not forced:
        assert detect_formats(str(marked)) == formats  # auto-detection sees the same format
    fmt = ["--format", formats[0]] if forced else []
    assert main(["import", str(original), "--store", str(tmp_path / "plain"), *fmt]) == 0
    capsys.readouterr()
    code = main(["import", str(marked), "--store", str(tmp_path / "bom"), *fmt])
    err = capsys.readouterr().err
    assert code == 0, err
    expected = _conversations(tmp_path / "plain")
    assert expected and _conversations(tmp_path / "bom") == expected


def test_a_byte_order_mark_inside_the_file_is_still_an_error(tmp_path, capsys):
    """Only the mark at the very start is skipped: one in the middle of a JSONL file
    (two files glued together) is a broken line, named as such."""
    original = CORPUS / FILES[0]
    lines = original.read_bytes().splitlines(keepends=True)
    glued = tmp_path / original.name
    glued.write_bytes(b"".join(lines[:2]) + BOM + b"".join(lines[2:]))
    code = main(["import", str(glued), "--store", str(tmp_path / "store")])
    err = capsys.readouterr().err
    assert code == 1 and f"{glued}:3" in err, err
