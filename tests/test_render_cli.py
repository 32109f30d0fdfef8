"""``ctxrules render``: the body as sent, ``--json``, ``--explain``, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxrules.cli import main
from ctxrules.commit import ensure_latest_commit
from ctxrules.importers import import_paths
from ctxrules.providers import get_provider
from ctxrules.render import render, session_defaults
from ctxrules.situation import MAIN_SITUATION, commit_situation
from ctxrules.store import open_store

SESSION = "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"


@pytest.fixture
def imported(corpus: Path, tmp_path: Path) -> tuple[str, str]:
    store_dir = tmp_path / "store"
    (res,) = import_paths(open_store(store_dir), [str(corpus / SESSION)])
    return str(store_dir), res.id


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "openai-responses", "gemini"])
def test_prints_the_body_exactly(imported, provider, capsysbinary):
    store_dir, sid = imported
    assert main(["render", sid, "--provider", provider, "--store", store_dir, "--now", "0"]) == 0
    out = capsysbinary.readouterr().out
    store = open_store(store_dir)
    commit = ensure_latest_commit(sid, store=store, now=0)
    defaults = session_defaults(store.get_session(sid).metadata)
    situation = commit_situation(store, commit)
    expected = render(commit, provider, situation=situation, **defaults)
    assert out == expected.body + b"\n"
    # The situation layer (L1) came from the call tree: a main-conversation head.
    assert MAIN_SITUATION.encode() in out
    assert get_provider(provider).validate(json.loads(out)) == []


def test_json_and_explain(imported, capsys, corpus):
    store_dir, sid = imported
    args = ["render", sid, "--provider", "anthropic", "--store", store_dir, "--json", "--explain"]
    assert main([*args, "--now", "0"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["endpoint"] == "/v1/messages"
    assert doc["body"]["messages"][0]["role"] == "user"
    ex = doc["explain"]
    assert 1 <= len(ex["breakpoints"]) <= 4
    # Tool results in the session file, counted here with plain JSON: all rendered paired.
    lines = [json.loads(x) for x in (corpus / SESSION).read_text().splitlines()]
    results = sum(
        1
        for e in lines
        if isinstance(e.get("message", {}).get("content"), list)
        for b in e["message"]["content"]
        if b.get("type") == "tool_result"
    )
    body_results = sum(
        1 for m in doc["body"]["messages"] for b in m["content"] if b["type"] == "tool_result"
    )
    assert body_results == results == 12
    assert ex["degraded_tool_items"] == 0
    p = ex["predicted_cache"]
    assert 0 <= p["shared_tokens"] <= p["total_tokens"]


def test_a_later_clock_shrinks_the_predicted_hit(imported, capsys):
    """Aging old tool results (a later --now) rewrites early items: less prefix is shared."""
    store_dir, sid = imported
    base = ["render", sid, "--provider", "anthropic", "--store", store_dir, "--json", "--explain"]
    assert main([*base, "--now", "0", "--config", _config(store_dir, tail_turns=100)]) == 0
    wide = json.loads(capsys.readouterr().out)["explain"]
    assert main([*base, "--now", "0", "--config", _config(store_dir, tail_turns=1)]) == 0
    narrow = json.loads(capsys.readouterr().out)["explain"]
    assert narrow["states"].get("aged", {}).get("items", 0) > 0
    assert narrow["tokens"]["L2_task"]["tool"] < wide["tokens"]["L2_task"]["tool"]


def _config(folder: str, *, tail_turns: int) -> str:
    path = Path(folder) / f"ctxrules-{tail_turns}.toml"
    path.write_text(f"[rules.tool_aging]\ntail_turns = {tail_turns}\n")
    return str(path)


def test_errors_are_one_line(imported, capsys):
    store_dir, sid = imported
    assert main(["render", sid, "--provider", "nope", "--store", store_dir]) == 1
    assert main(["render", "s_missing", "--provider", "gemini", "--store", store_dir]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("ctxrules render: error:") for e in err)


def test_demo_shows_request_sizes_and_cache_hits(tmp_path, capsys):
    assert main(["demo", "--store", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "rendered requests per turn" in out
    table = out[out.index("rendered requests per turn") :]
    rows = [line for line in table.splitlines() if "%" in line]
    assert rows, table
    for row in rows:
        hit = int(row.split("│")[-2].strip().rstrip("%"))
        assert 0 <= hit <= 100
        cached, sent = row.split("│")[-3].split("/")
        assert int(cached.replace(",", "")) <= int(sent.replace(",", ""))
