"""What issue 19 found going wrong, each on a real corpus file read the way it failed:

* a Codex rollout forced through ``--format claude-code`` was stored as an empty
  session (exit 0): it is refused, and nothing is stored;
* Gemini parts in snake_case (``function_call`` / ``function_response``, as Google's
  Python SDK logs them) became empty turns: they are tool calls and their answers,
  like the camelCase parts of the same request;
* a Claude Code projects folder: every file skipped is printed with its reason in the
  normal output, and a 2.1 sub-agent file is read with its session, never imported
  as a session of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.corpus import CORPUS
from tests.importers import corpus_oracle as oracle

from ctxrules.cli import main
from ctxrules.errors import EmptyTranscriptError, ImportFormatError
from ctxrules.importers import import_report
from ctxrules.model import ToolUseBlock
from ctxrules.store import open_store

ROLLOUT = CORPUS / "codex-rollouts/agentv/a3_92ff332928_0_full.jsonl"
GEMINI_TOOLS = CORPUS / "httprr/gemini/langchaingo__TestGoogleAIToolCallResponse.httprr"
SESSION_21 = CORPUS / "claude-code-jsonl/entirecli/10_a740e118e0_0_full.jsonl"


def test_a_codex_rollout_forced_as_claude_code_is_refused_and_nothing_stored(tmp_path):
    store = open_store(tmp_path / "store")
    with pytest.raises(EmptyTranscriptError, match="no conversation") as err:
        import_report(store, [str(ROLLOUT)], format="claude-code")
    assert err.value.where is not None and str(ROLLOUT) in err.value.where
    assert "--format" in (err.value.hint or "")
    assert store.list_sessions() == []
    store.close()


def test_the_import_command_refuses_a_codex_rollout_forced_as_claude_code(tmp_path, capsys):
    store = tmp_path / "store"
    code = main(["import", "--store", str(store), "--format", "claude-code", str(ROLLOUT)])
    assert code != 0
    err = capsys.readouterr().err
    assert str(ROLLOUT) in err and "no conversation" in err
    code = main(["import", "--store", str(store), "--format", "codex", str(ROLLOUT)])
    assert code == 0


def _snake(value: Any) -> Any:
    """Gemini's camelCase part fields as the Python SDK writes them."""
    names = {
        "functionCall": "function_call",
        "functionResponse": "function_response",
        "inlineData": "inline_data",
        "mimeType": "mime_type",
        "thoughtSignature": "thought_signature",
    }
    if isinstance(value, dict):
        return {names.get(k, k): _snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


def _cassette(path: Path, call: dict[str, Any], body: dict[str, Any]) -> Path:
    doc = {
        "interactions": [
            {
                "request": {"method": "POST", "uri": call["uri"], "body": json.dumps(body)},
                "response": {"status": {"code": 200}, "body": {"string": "{}"}},
            }
        ]
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def _read(store: Any, path: Path) -> list[Any]:
    (res,) = import_report(store, [str(path)], format="cassette").sessions
    return store.nodes(res.id)


def test_snake_case_function_parts_are_calls_and_answers_like_camel_case_ones(tmp_path):
    """langchaingo's Gemini request that answers a function call, its parts written as
    Google's Python SDK logs them."""
    call = next(
        c
        for c in oracle.calls(GEMINI_TOOLS)
        if any("functionResponse" in p for m in c["body"]["contents"] for p in m["parts"])
    )
    parts = [p for m in call["body"]["contents"] for p in m["parts"]]
    calls = [p["functionCall"] for p in parts if "functionCall" in p]
    answers = [p["functionResponse"] for p in parts if "functionResponse" in p]
    assert calls and answers
    store = open_store(tmp_path / "store")
    camel = _read(store, _cassette(tmp_path / "camel.yaml", call, call["body"]))
    snake = _read(store, _cassette(tmp_path / "snake.yaml", call, _snake(call["body"])))
    for nodes in (camel, snake):
        uses = [b for n in nodes if isinstance(n.output, list) for b in n.output]
        uses = [b for b in uses if isinstance(b, ToolUseBlock)]
        assert [(u.name, u.input) for u in uses] == [(c["name"], c["args"]) for c in calls]
        tools = [n for n in nodes if n.role == "tool"]
        assert [json.loads(n.output) for n in tools] == [a["response"] for a in answers]
        assert all(n.output for n in nodes if n.role in ("user", "assistant"))
    assert [(n.role, n.output) for n in snake] == [(n.role, n.output) for n in camel]
    store.close()


def test_a_projects_folder_prints_every_skip_and_reads_sub_agents_with_their_session(
    tmp_path, capsys
):
    """A 2.1 session file, its sub-agent transcript in ``<session>/subagents/``, and a
    file that is no transcript: one session; both others printed as skipped, with why."""
    entries = [json.loads(x) for x in SESSION_21.read_text().splitlines() if x.strip()]
    sid = next(e["sessionId"] for e in entries if "sessionId" in e)
    progress = [
        e
        for e in entries
        if e.get("type") == "progress" and (e.get("data") or {}).get("type") == "agent_progress"
    ]
    assert progress
    agent = progress[0]["data"]["agentId"]
    sub: list[dict[str, Any]] = []
    for e in progress:
        msg = e["data"]["message"]
        sub.append(
            {
                "parentUuid": sub[-1]["uuid"] if sub else None,
                "isSidechain": True,
                "sessionId": sid,
                "agentId": agent,
                **msg,
            }
        )
    project = tmp_path / "projects" / "-work-cli"
    project.mkdir(parents=True)
    session_file = project / f"{sid}.jsonl"
    session_file.write_text(SESSION_21.read_text())
    agent_file = project / sid / "subagents" / f"agent-{agent}.jsonl"
    agent_file.parent.mkdir(parents=True)
    agent_file.write_text("".join(json.dumps(e) + "\n" for e in sub))
    notes = project / "notes.txt"
    notes.write_text("not a transcript\n")
    store = tmp_path / "store"
    assert main(["import", "--store", str(store), str(tmp_path / "projects")]) == 0
    lines = capsys.readouterr().out.splitlines()
    imported = [line for line in lines if line.startswith("imported ")]
    assert len(imported) == 1 and str(session_file) in imported[0]
    shown = [line for line in lines if line.startswith("skipped ")]
    skipped = {line.split(": ", 1)[0][len("skipped ") :]: line for line in shown}
    assert set(skipped) == {str(agent_file), str(notes)}
    assert f"read with {session_file}" in skipped[str(agent_file)]
    assert "not a transcript format" in skipped[str(notes)]
    opened = open_store(store)
    (info,) = opened.list_sessions()
    roots = [n for n in opened.nodes(info.id) if n.metadata.get("task_tool_use_id")]
    assert len(roots) == 1
    opened.close()


def test_a_claude_code_line_of_a_type_never_seen_is_kept_not_refused(tmp_path):
    """A line type a later Claude Code adds is kept in the session metadata."""
    lines = SESSION_21.read_text().splitlines(keepends=True)
    novel = {"type": "worktree-state", "uuid": "novel-1", "parentUuid": None, "state": {"a": 1}}
    path = tmp_path / "s.jsonl"
    path.write_text(lines[0] + json.dumps(novel) + "\n" + "".join(lines[1:]))
    store = open_store(tmp_path / "store")
    try:
        (res,) = import_report(store, [str(path)], format="claude-code").sessions
    except ImportFormatError as exc:  # pragma: no cover - the failure this test is about
        pytest.fail(f"refused: {exc}")
    extra = store.get_session(res.id).metadata["extra_lines"]
    assert {"line": 2, **novel} in extra
    store.close()
