"""Only ``import`` and ``demo`` create a store: every other command, given a location
holding none (a mistyped ``--store``, ``$CTXRULES_STORE``, the default ``./.ctxrules``,
an unknown ``memory:`` name), fails on one line naming it and how to make one, and
leaves nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxrules.cli import main
from ctxrules.errors import StoreError
from ctxrules.store import memory, open_store

CC = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"

NEEDS_A_STORE = [
    ["sessions"],
    ["sessions", "--json"],
    ["log", "s_x"],
    ["log", "s_x", "--json"],
    ["commit", "s_x", "--preset", "off"],
    ["commit", "s_x", "--now", "5", "--json"],
    ["render", "s_x", "--provider", "anthropic"],
    ["checkout", "s_x", "n_x"],
    ["fork", "s_x", "n_x"],
    ["quality", "s_x"],
    ["stats", "s_x"],
    ["stats", "s_x", "--json"],
    ["compact", "s_x"],
]


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _refused(capsys, argv: list[str], location: str) -> None:
    assert main(argv) == 1, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert location in err and "no ctxrules store" in err, err
    assert "ctxrules import" in err, err


@pytest.mark.parametrize("argv", NEEDS_A_STORE, ids=" ".join)
def test_a_mistyped_store_is_an_error_and_nothing_appears(tmp_path, capsys, argv):
    (tmp_path / "empty-dir").mkdir()
    before = _tree(tmp_path)
    for location in ("typo", "typo.db", "deep/er/typo", "empty-dir"):
        path = str(tmp_path / location)
        _refused(capsys, [*argv, "--store", path], path)
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("argv", NEEDS_A_STORE[:3], ids=" ".join)
def test_the_environment_and_the_default_location_are_not_created_either(
    tmp_path, capsys, monkeypatch, argv
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTXRULES_STORE", raising=False)
    _refused(capsys, argv, ".ctxrules")
    monkeypatch.setenv("CTXRULES_STORE", str(tmp_path / "from-env"))
    _refused(capsys, argv, str(tmp_path / "from-env"))
    assert _tree(tmp_path) == []


def test_an_unknown_memory_store_is_not_created(capsys):
    name = "never-made-by-test_cli_store_required"
    _refused(capsys, ["sessions", "--store", f"memory:{name}"], f"memory:{name}")
    assert not memory.exists(name)
    with pytest.raises(StoreError, match="no ctxrules store of that name"):
        open_store(f"memory:{name}", create=False)
    assert open_store("memory:", create=False).list_sessions() == []  # private: nothing to find


def test_import_creates_the_store_and_then_the_others_use_it(tmp_path, corpus, capsys):
    store = str(tmp_path / "new" / "store")
    assert main(["import", str(corpus / CC), "--store", store, "--json"]) == 0
    (s,) = json.loads(capsys.readouterr().out)["sessions"]
    assert (tmp_path / "new" / "store" / "ctxrules.db").is_file()
    assert main(["sessions", "--store", store]) == 0
    assert s["id"] in capsys.readouterr().out
    assert main(["sessions", "--store", store, "--json"]) == 0
    head = json.loads(capsys.readouterr().out)[0]["head"]  # the recorded final answer
    assert (
        main(["render", s["id"], "--provider", "anthropic", "--store", store, "--for", head]) == 0
    )


def test_open_store_without_create_opens_an_existing_store(tmp_path):
    made = open_store(tmp_path / "s")
    made.create_session(session_id="kept")
    made.close()
    again = open_store(tmp_path / "s", create=False)
    try:
        assert [x.id for x in again.list_sessions()] == ["kept"]
    finally:
        again.close()
    db = open_store(tmp_path / "s" / "ctxrules.db", create=False)  # the file itself
    db.close()
