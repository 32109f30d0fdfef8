"""Hostile files on the command line: one error line naming file:line, a non-zero exit,
and the store byte-for-byte as it was (every file of the store directory hashed before
and after).  Python's own limits (nesting, integer digits, float overflow), YAML
aliases and content repeated by reference are all refused the same way — in format
detection as well as in parsing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ctxrules.cli import main
from ctxrules.errors import ImportFormatError
from ctxrules.importers import detect_formats, import_paths
from ctxrules.plugins import registry
from ctxrules.store import open_store

BASE = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
CC_LINE = {
    "parentUuid": None,
    "isSidechain": False,
    "sessionId": "s-1",
    "version": "1.0.98",
    "type": "user",
    "message": {"role": "user", "content": "hello"},
    "uuid": "u-1",
    "timestamp": "2025-09-07T09:52:03.071Z",
}


@pytest.fixture
def store_dir(corpus, tmp_path) -> Path:
    """A store that already holds a session (closed, so its files are at rest)."""
    path = tmp_path / "store"
    store = open_store(path)
    import_paths(store, [str(corpus / BASE)])
    store.close()
    return path


def digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def refused(store_dir: Path, path: Path, capsys, *args: str) -> str:
    """Run ``ctxrules import PATH``; assert it failed cleanly; return its one line."""
    before = digest(store_dir)
    code = main(["import", str(path), "--store", str(store_dir), *args])
    err = capsys.readouterr().err
    assert code == 1
    assert len(err.splitlines()) == 1, err
    assert err.startswith("ctxrules import: error: ") and "Traceback" not in err
    assert digest(store_dir) == before
    return err


def cc_line(**changes) -> str:
    return json.dumps({**CC_LINE, **changes})


# -- Python's limits: nesting, digits, overflow --------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("fmt", [None, "openai-chat", "anthropic-messages", "swe-agent"])
def test_json_nested_100000_deep(store_dir, tmp_path, capsys, fmt):
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    err = refused(store_dir, path, capsys, *(["--format", fmt] if fmt else []))
    assert f"{path}:1: JSON nested 100,000 levels deep" in err


def test_jsonl_line_nested_100000_deep(store_dir, tmp_path, capsys):
    path = tmp_path / "deep.jsonl"
    deep_line = cc_line(message={"role": "user", "content": "x"}).replace('"x"', DEEP)
    path.write_text(cc_line() + "\n" + deep_line + "\n")
    err = refused(store_dir, path, capsys)
    assert f"{path}:2: JSON nested 100,00" in err and "levels deep" in err


@pytest.mark.parametrize("name", ["big.json", "big.jsonl", "big.yaml"])
def test_integer_of_5000_digits(store_dir, tmp_path, capsys, name):
    digits = "7" * 5000
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text('[{"role": "user",\n "content": "hi", "n": ' + digits + "}]")
        line = 2
    elif name.endswith(".jsonl"):
        path.write_text(cc_line() + "\n" + cc_line(uuid="u-2")[:-1] + f', "n": {digits}}}\n')
        line = 2
    else:
        path.write_text(
            "interactions:\n- request:\n    uri: https://api.anthropic.com/v1/messages\n"
            f"    parsed_body:\n      max_tokens: {digits}\n"
        )
        line = 5
    err = refused(store_dir, path, capsys)
    assert f"{path}:{line}:" in err
    assert "5,000 digits" in err or "5000 digits" in err


@pytest.mark.parametrize(
    "stamp,shown",
    [("1" + "0" * 400, "10**400"), ("1e999", "1e999"), ("NaN", "NaN"), ("-Infinity", "Infinity")],
)
def test_timestamps_python_cannot_hold(store_dir, tmp_path, capsys, stamp, shown):
    path = tmp_path / "times.jsonl"
    bad = cc_line(uuid="u-2", parentUuid="u-1").replace('"2025-09-07T09:52:03.071Z"', stamp)
    path.write_text(cc_line() + "\n" + bad + "\n")
    err = refused(store_dir, path, capsys)
    assert f"{path}:2:" in err and shown in err


def test_non_finite_timestamps_are_refused_not_stored(store_dir, tmp_path, capsys):
    """A float timestamp that parses (1e308 * 10 overflows only in the arithmetic) is
    the one kind a decoder lets through; it must still not reach the store."""
    from ctxrules.importers._common import parse_time

    for value in (float("nan"), float("inf"), -float("inf"), 10**400):
        with pytest.raises(ImportFormatError, match="not a finite number"):
            parse_time(value, path="t.jsonl", line=3)
    assert parse_time(1.5e9, path="t.jsonl") == 1.5e9


def test_every_detector_answers_or_raises_a_typed_error(tmp_path):
    """``--format auto`` asks each importer; none may let Python's limits escape."""
    files = {
        "deep.json": DEEP,
        "deep.jsonl": cc_line().replace('"hello"', DEEP) + "\n",
        "big.json": '[{"role": "user", "content": 1' + "0" * 5000 + "}]",
        "inf.jsonl": cc_line().replace('"2025-09-07T09:52:03.071Z"', "1e999") + "\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        head = path.read_bytes()[:65536]
        for imp in registry("importers").items.values():
            try:
                imp.detect(str(path), head)
            except ImportFormatError as exc:
                assert str(path) in str(exc)
        try:
            detect_formats(str(path))
        except ImportFormatError as exc:
            assert f"{path}:1" in str(exc)


# -- YAML aliases and content repeated by reference ----------------------------------


def alias_bomb(levels: int) -> str:
    """A cassette whose one message content is ``levels`` of nine-fold aliases: 9**levels
    strings from a few hundred bytes."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + (
        "\ninteractions:\n- request:\n    uri: https://api.anthropic.com/v1/messages\n"
        "    parsed_body:\n      model: claude-x\n      messages:\n      - role: user\n"
        f"        content: *a{levels}\n  response:\n    parsed_body: {{}}\n"
    )


def test_yaml_alias_bomb_is_refused_at_the_first_alias(store_dir, tmp_path, capsys):
    # Six levels: 531,441 strings, small enough that the old loader survives it.
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(6))
    assert len(path.read_bytes()) < 700
    err = refused(store_dir, path, capsys)
    assert f"{path}:2:" in err and "YAML alias" in err


def test_yaml_merge_key_alias_is_refused(store_dir, tmp_path, capsys):
    path = tmp_path / "merge.yaml"
    path.write_text(
        "base: &b {role: user, content: hi}\n"
        "interactions:\n- request:\n    uri: https://api.anthropic.com/v1/messages\n"
        "    parsed_body:\n      model: claude-x\n      messages:\n      - {<<: *b}\n"
    )
    err = refused(store_dir, path, capsys)
    assert f"{path}:8:" in err and "YAML alias" in err


def test_one_tool_call_answered_a_thousand_times_exceeds_the_budget(store_dir, tmp_path, capsys):
    """No alias needed: every tool_result copies its call's input into its node, so a
    small file could store a thousand copies of a big input."""
    big = {"blob": "x" * 20_000}
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": big}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}] * 1000,
        },
    ]
    path = tmp_path / "echo.json"
    path.write_text(json.dumps({"system": "s", "messages": messages}))
    assert len(path.read_bytes()) < 100_000  # would store more than 20 MB
    err = refused(store_dir, path, capsys)
    assert f"{path}" in err and "limits.import_budget" in err and "8x" in err


# -- a session that imports must stay usable: depth on the way in ---------------------


def deep_cassette(path: Path, depth: int) -> Path:
    """A cassette whose tool call's input nests ``depth`` maps (JSON flow inside YAML)."""
    value = '{"k": ' * depth + '"leaf"' + "}" * depth
    body = (
        '{"model": "claude-x", "max_tokens": 10, "messages": ['
        '{"role": "user", "content": "hi"}, '
        '{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", '
        f'"input": {value}}}]}}, '
        '{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", '
        '"content": "ok"}]}]}'
    )
    path.write_text(
        "interactions:\n- request:\n    uri: https://api.anthropic.com/v1/messages\n"
        f"    method: POST\n    parsed_body: {body}\n  response:\n"
        '    parsed_body: {"usage": {"input_tokens": 5, "output_tokens": 1}}\n'
    )
    return path


def test_a_cassette_nested_990_levels_is_refused_at_import(store_dir, tmp_path, capsys):
    path = deep_cassette(tmp_path / "deep.yaml", 990)
    err = refused(store_dir, path, capsys)
    assert f"{path}:5 at interactions[0].request.parsed_body.messages[1]" in err
    assert "nests more than 100 levels" in err and "limits.MAX_NESTING" in err


def test_the_command_in_a_fresh_process_says_one_line(store_dir, tmp_path):
    """A fresh interpreter has far more stack left than a test: encoders get deeper
    before Python's recursion limit, and the depth must still be refused by the check."""
    import subprocess
    import sys

    path = deep_cassette(tmp_path / "deep.yaml", 990)
    before = digest(store_dir)
    run = subprocess.run(
        [sys.executable, "-m", "ctxrules", "import", str(path), "--store", str(store_dir)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and f"{path}:5 at " in run.stderr
    assert digest(store_dir) == before


def test_a_cassette_nested_99_levels_imports_commits_and_renders(tmp_path, capsys):
    path = deep_cassette(tmp_path / "ok.yaml", 99)
    store = str(tmp_path / "store")
    assert main(["import", str(path), "--store", store, "--json"]) == 0
    (session,) = json.loads(capsys.readouterr().out)["sessions"]
    assert main(["commit", session["id"], "--store", store, "--now", "0"]) == 0
    assert "full" in capsys.readouterr().out
    for provider in ("anthropic", "openai-chat", "openai-responses", "gemini"):
        assert main(["render", session["id"], "--store", store, "--provider", provider]) == 0
        body = capsys.readouterr().out
        json.loads(body)
        # The whole input is sent (as JSON text inside the body for the OpenAI formats).
        assert body.replace('\\"', '"').count('"k"') == 99, provider


# -- image sources that are not strings -----------------------------------------------


def test_image_url_that_is_not_a_string(store_dir, tmp_path, capsys):
    path = tmp_path / "img.json"
    part = {"type": "image_url", "image_url": {"url": {"href": "https://x/y.png"}}}
    path.write_text(
        json.dumps(
            [{"role": "system", "content": "s"}, {"role": "user", "content": ["hi", part]}],
            indent=1,
        )
    )
    err = refused(store_dir, path, capsys)
    assert f"{path}:" in err and "at [1].content[1]" in err and "image URL must be a string" in err


def test_gemini_inline_data_that_is_not_a_string(store_dir, tmp_path, capsys):
    path = tmp_path / "gem.yaml"
    path.write_text(
        "interactions:\n- request:\n"
        "    uri: https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5:generate\n"
        "    parsed_body:\n      contents:\n      - role: user\n        parts:\n"
        "        - inlineData: {mimeType: image/png, data: {bytes: [1, 2]}}\n"
    )
    err = refused(store_dir, path, capsys)
    assert f"{path}:8 at interactions[0].request.parsed_body.contents[0].parts[0]" in err
    assert "base64 text" in err
