"""``ctxrules render`` options that override what the session recorded: ``--system-file``,
``--tools-file``, ``--max-tokens``, ``--model``; and their errors."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from ctxrules.cli import main
from ctxrules.importers import import_paths
from ctxrules.providers import get_provider
from ctxrules.store import open_store

SESSION = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
TOOLS = [  # one tool in each vendor's shape
    {"name": "Read", "description": "read a file", "input_schema": {"type": "object"}},
    {"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}}},
    {"functionDeclarations": [{"name": "Grep", "parameters": {"type": "object"}}]},
]


@pytest.fixture
def base(corpus: Path, tmp_path: Path) -> list[str]:
    """``render`` of the session's last answer, as argv."""
    store_dir = tmp_path / "store"
    store = open_store(store_dir)
    (res,) = import_paths(store, [str(corpus / SESSION)])
    last = [n.id for n in store.nodes(res.id) if n.role == "assistant" and not n.caller][-1]
    store.close()
    return ["render", res.id, "--store", str(store_dir), "--for", last]


def _json(argv: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--json", "--explain"]) == 0
    return json.loads(out.getvalue())


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "gemini"])
def test_each_option_overrides_the_session_default(base, tmp_path, provider):
    system = tmp_path / "prompt.md"
    system.write_text("You are ctxrules' test agent.\nBe brief.", encoding="utf-8")
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS), encoding="utf-8")
    argv = [*base, "--provider", provider, "--system-file", str(system)]
    argv += ["--tools-file", str(tools), "--max-tokens", "777"]
    doc = _json(argv)
    body, ex = doc["body"], doc["explain"]
    text = json.dumps(body)
    assert "You are ctxrules' test agent.\\nBe brief." in text
    assert '"Read"' in text and '"Bash"' in text and '"Grep"' in text
    assert "TodoWrite" not in json.dumps(body.get("tools"))  # the inferred ones are replaced
    limit = {
        "anthropic": body.get("max_tokens"),
        "openai-chat": body.get("max_completion_tokens"),
        "gemini": body.get("generationConfig", {}).get("maxOutputTokens"),
    }[provider]
    assert limit == 777
    assert ex["system_source"] == "option"
    assert ex["tools"] == {"declared": 3, "inferred": [], "source": "option"}
    assert ex["params"]["added"] == {}
    if provider == "anthropic":
        assert get_provider(provider).validate(body) == []
    model = {"anthropic": "claude-opus-4-5", "openai-chat": "gpt-4.1", "gemini": "gemini-3-pro"}
    doc = _json([*base, "--provider", provider, "--model", model[provider]])
    assert doc["body"].get("model", doc["model"]) == model[provider]
    assert doc["explain"]["model_choice"] == {"source": "option"}


def _error(argv: list[str], capsys) -> str:
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_unreadable_and_invalid_files_are_clear_errors(base, tmp_path, capsys):
    argv = [*base, "--provider", "anthropic"]
    missing = str(tmp_path / "nope.json")
    err = _error([*argv, "--tools-file", missing], capsys)
    assert missing in err and "--tools-file: no such file" in err and "JSON list" in err
    err = _error([*argv, "--system-file", str(tmp_path)], capsys)
    assert "--system-file: is a directory" in err and "UTF-8 file" in err
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe not text")
    err = _error([*argv, "--system-file", str(bad)], capsys)
    assert str(bad) in err and "not UTF-8" in err
    for content, what in (
        ("{not json", "not JSON"),
        ('{"name": "Read"}', "a JSON dict, not a list of tools"),
        ('[{"name": "Read"}, {"nameless": true}]', "entry 1 is not a tool declaration"),
    ):
        path = tmp_path / "tools.json"
        path.write_text(content, encoding="utf-8")
        err = _error([*argv, "--tools-file", str(path)], capsys)
        assert str(path) in err and what in err, err
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--max-tokens", "0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--max-tokens: 0 is not positive" in err and len(err.splitlines()) == 1
    # A request body's ``tools`` list is taken as it is.
    path = tmp_path / "body.json"
    path.write_text(json.dumps({"model": "x", "tools": TOOLS[:1]}), encoding="utf-8")
    doc = _json([*argv, "--tools-file", str(path)])
    assert [t["name"] for t in doc["body"]["tools"]] == ["Read"]
