"""The layouts and encodings no public file of the corpus shows, built at test time from
real corpus files in the shape the tools' own writers give them:

* Claude Code 2.1's ``<session id>/subagents/agent-<agentId>.jsonl`` with its
  ``agent-<agentId>.meta.json``, written from the sub-agent's ``agent_progress`` lines
  of a real session (the same message records, as the sub-agent's own transcript
  holds them), and a compaction call's ``agent-acompact-<id>.jsonl``;
* Gemini CLI's JSONL recording (a metadata line, message lines, a message written
  again, ``$rewindTo``, ``$set``) from a real session JSON file, as its
  ``ChatRecordingService`` appends them;
* an OpenAI Responses request body (what Codex sends: its instructions and the items
  of a real rollout);
* cassette bodies ``deflate`` / ``br`` encoded from a real plain one.

No public sample of the first three was found (SOURCES.md); the oracle of each is the
real file it was built from, read with plain json.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.corpus import CORPUS
from tests.importers import corpus_oracle

from ctxrules.errors import ImportFormatError
from ctxrules.importers import _streams, import_report, parse_file
from ctxrules.model import CompactionBlock, ThinkingBlock, ToolUseBlock

SESSION_21 = CORPUS / "claude-code-jsonl/entirecli/10_a740e118e0_0_full.jsonl"
COMPACTED = CORPUS / "claude-code-jsonl/packmind/95_cc2ca9e65d_2_full.jsonl"
GEMINI_JSON = CORPUS / "gemini-cli/entirecli/9c_53780d06b7_0_full.json"
ROLLOUT = CORPUS / "codex-rollouts/agentv/a3_92ff332928_0_full.jsonl"
CASSETTE = CORPUS / "vcr-cassettes-yaml/anthropic/ddtrace__anthropic_completion_thinking.yaml"


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def write_lines(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


# -- Claude Code 2.1: sub-agents and compaction calls in their own files ---------------


def progress_agent(entries: list[dict[str, Any]]) -> tuple[str, str, list[dict[str, Any]]]:
    """(agentId, Task tool_use id, the sub-agent's transcript lines) from the
    agent_progress lines of a session: each mirrored message as its own line, chained."""
    lines: list[dict[str, Any]] = []
    agent = task = ""
    for e in entries:
        data = e.get("data") or {}
        if e.get("type") != "progress" or data.get("type") != "agent_progress":
            continue
        agent, task, msg = data["agentId"], e["parentToolUseID"], data["message"]
        lines.append(
            {
                "parentUuid": lines[-1]["uuid"] if lines else None,
                "isSidechain": True,
                "userType": e["userType"],
                "cwd": e["cwd"],
                "sessionId": e["sessionId"],
                "version": e["version"],
                "agentId": agent,
                **msg,
            }
        )
    return agent, task, lines


def subagent_tree(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What a sub-agent holds: its API requests and tool calls (plain json)."""
    msgs = [e["message"] for e in entries if e["type"] == "assistant"]
    return {
        "requests": {m["id"] for m in msgs if m.get("usage")},
        "tool_uses": {b["id"] for m in msgs for b in m["content"] if b.get("type") == "tool_use"},
    }


def under(nodes: list[Any], root: str) -> list[Any]:
    """The nodes of the sub-tree that starts at ``root`` (edges: predecessor, caller)."""
    kids: dict[str, list[Any]] = {}
    for n in nodes:
        for parent in {n.predecessor, n.caller} - {None}:
            kids.setdefault(parent, []).append(n)
    out, todo = [], [root]
    by_id = {n.id: n for n in nodes}
    while todo:
        nid = todo.pop()
        out.append(by_id[nid])
        todo.extend(k.id for k in kids.get(nid, []))
    return out


@pytest.mark.parametrize("mirrored", [True, False], ids=["progress-too", "file-only"])
def test_a_21_subagent_file_is_read_into_its_session_under_its_task(tmp_path, store, mirrored):
    entries = lines_of(SESSION_21)
    agent, task, sub = progress_agent(entries)
    sid = entries[1]["sessionId"]
    project = tmp_path / "projects" / "-work-cli"
    main = entries if mirrored else [e for e in entries if e.get("type") != "progress"]
    write_lines(project / f"{sid}.jsonl", main)
    folder = project / sid / "subagents"
    agent_file = write_lines(folder / f"agent-{agent}.jsonl", sub)
    meta_file = folder / f"agent-{agent}.meta.json"
    meta_file.write_text(json.dumps({"agentType": "reviewer"}))

    report = import_report(store, [str(tmp_path / "projects")])
    (res,) = report.sessions
    assert {s.path: s.reason.split(" (")[0] for s in report.skipped} == {
        str(agent_file): f"read with {project / f'{sid}.jsonl'}",
        str(meta_file): f"read with {project / f'{sid}.jsonl'}",
    }
    nodes = store.nodes(res.id)
    (root,) = [n for n in nodes if n.metadata.get("task_tool_use_id")]
    assert root.metadata["task_tool_use_id"] == task
    assert root.metadata["agent_meta"] == {"agentType": "reviewer"}
    assert store.get_node(root.caller).metadata["tool_use_id"] == task
    want = subagent_tree(sub)
    tree = under(nodes, root.id)
    assert {n.metadata["message_id"] for n in tree if n.metadata.get("usage")} == want["requests"]
    blocks = [b for n in tree if isinstance(n.output, list) for b in n.output]
    assert {b.id for b in blocks if isinstance(b, ToolUseBlock)} == want["tool_uses"]
    # Read once, from the progress mirror or the file: every line one node at most.
    uuids = [
        u for n in tree for u in n.metadata.get("uuids") or [n.metadata["claude_code"]["uuid"]]
    ]
    assert len(uuids) == len(set(uuids))


def test_a_compaction_call_file_hangs_under_no_task_and_names_its_boundary(tmp_path, store):
    """``agent-acompact-*.jsonl``: the conversation it summarised repeated (same
    uuids, read once), then the summarising request and its answer — the summary the
    session records after its boundary."""
    entries = lines_of(COMPACTED)
    sid = entries[1]["sessionId"]
    at = next(i for i, e in enumerate(entries) if e.get("subtype") == "compact_boundary")
    summary = entries[at + 1]
    assert summary.get("isCompactSummary")
    before = [e for e in entries[:at] if e.get("type") in ("user", "assistant")][-3:]
    asked = {
        "parentUuid": None,
        "isSidechain": True,
        "sessionId": sid,
        "agentId": "acompact-7f3a",
        "type": "user",
        "uuid": "compact-ask-1",
        "timestamp": before[-1]["timestamp"],
        "message": {"role": "user", "content": "Summarise the conversation so far."},
    }
    answer = {
        **asked,
        "parentUuid": "compact-ask-1",
        "type": "assistant",
        "uuid": "compact-answer-1",
        "message": {
            "id": "msg_compact_1",
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": [{"type": "text", "text": summary["message"]["content"]}],
            "usage": {"input_tokens": 178144, "output_tokens": 3700},
        },
    }
    project = tmp_path / "p"
    write_lines(project / f"{sid}.jsonl", entries)
    (alone,) = import_report(store, [str(project / f"{sid}.jsonl")]).sessions
    count = len(store.nodes(alone.id))
    write_lines(
        project / sid / "subagents" / "agent-acompact-7f3a.jsonl",
        [{**e, "isSidechain": True, "agentId": "acompact-7f3a"} for e in before] + [asked, answer],
    )
    other = open_store_of(tmp_path / "other")
    (res,) = import_report(other, [str(project)]).sessions
    nodes = other.nodes(res.id)
    assert len(nodes) == count + 2  # the request and its answer; the repeated lines once
    (ask,) = [n for n in nodes if n.metadata.get("compaction_call")]
    assert ask.caller is None and "task_tool_use_id" not in ask.metadata
    boundary = next(n for n in nodes if "compaction" in n.metadata)
    assert ask.metadata["compaction_boundary"] == boundary.id
    (made,) = [n for n in nodes if n.metadata.get("message_id") == "msg_compact_1"]
    assert made.predecessor == ask.id and made.metadata["usage"]["input_tokens"] == 178144
    other.close()


def open_store_of(path: Path) -> Any:
    from ctxrules.store import open_store

    return open_store(path)


def test_a_21_transcript_starting_with_a_snapshot_line_is_detected(tmp_path):
    entries = lines_of(SESSION_21)
    assert entries[0]["type"] == "file-history-snapshot" and "sessionId" not in entries[0]
    fmt, (s,) = parse_file(str(SESSION_21))
    assert fmt == "claude-code" and s.nodes


# -- Gemini CLI: the JSONL recording ----------------------------------------------------


def test_a_gemini_cli_recording_rewinds_into_a_branch(tmp_path, store):
    doc = json.loads(GEMINI_JSON.read_text())
    msgs = doc["messages"]
    user_ids = [m["id"] for m in msgs if m["type"] == "user"]
    assert msgs[0]["type"] == "user" and len(msgs) >= 4
    first_answer = msgs[1]
    head = {k: v for k, v in doc.items() if k != "messages"}
    lines: list[dict[str, Any]] = [head]
    # The CLI appends each message, then writes it again once its tokens come.
    lines.append(msgs[0])
    lines.append({k: v for k, v in first_answer.items() if k != "tokens"})
    lines.append({"$set": {"lastUpdated": "2026-01-10T02:09:00.000Z"}})
    lines.append(first_answer)
    lines += msgs[2:]
    # /rewind to the first model answer: it and everything after are removed...
    lines.append({"$rewindTo": first_answer["id"]})
    # ...and the conversation goes on from the first prompt.
    again = {
        "id": "again-1",
        "timestamp": "2026-01-10T03:00:00.000Z",
        "type": "gemini",
        "content": "A shorter answer.",
        "tokens": {"input": 9001, "output": 5, "cached": 0, "thoughts": 0, "total": 9006},
        "model": "gemini-2.5-pro",
    }
    lines.append(again)
    lines.append({"$set": {"summary": "rewound once"}})
    path = write_lines(tmp_path / "session-2026-01-10T02-08-abcd1234.jsonl", lines)
    (res,) = import_report(store, [str(path)]).sessions
    nodes = {n.id: n for n in store.nodes(res.id)}
    info = store.get_session(res.id)
    assert info.metadata["format"] == "gemini-cli"
    # HEAD: the new answer, right after the first prompt.
    tip = nodes[info.head]
    assert tip.metadata["gemini_cli"]["id"] == "again-1" and tip.name == "gemini-2.5-pro"
    assert tip.metadata["usage"]["promptTokenCount"] == 9001
    assert nodes[tip.predecessor].metadata["gemini_cli"]["id"] == user_ids[0]
    # The rewound messages stay, a branch of their own from the same prompt; the
    # answer written twice is one node, with its tokens.
    answer_id = first_answer["id"]
    kept = [n for n in nodes.values() if n.metadata.get("gemini_cli", {}).get("id") == answer_id]
    assert len(kept) == 1 and kept[0].predecessor == tip.predecessor
    assert kept[0].metadata["usage"]["promptTokenCount"] == first_answer["tokens"]["input"]
    turns = corpus_oracle.gemini_cli(GEMINI_JSON)["turns"]  # user messages and answers
    assert sum(n.caller is None for n in nodes.values()) == turns + 1
    assert info.metadata["rewinds"] == [{"line": len(lines) - 2, "to": first_answer["id"]}]
    assert info.metadata["gemini_cli_session"]["summary"] == "rewound once"


# -- OpenAI Responses: a request body ---------------------------------------------------


def test_a_responses_request_body_keeps_reasoning_opaque_and_its_calls_paired(tmp_path, store):
    records = lines_of(ROLLOUT)
    meta = records[0]["payload"]
    items = [r["payload"] for r in records if r["type"] == "response_item"]
    cut = max(i for i, it in enumerate(items) if it["type"] == "function_call_output") + 1
    items = items[:cut]
    items.append({"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque"})
    body = {
        "model": "gpt-5.4",
        "instructions": meta["base_instructions"]["text"],
        "input": items,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body))
    (res,) = import_report(store, [str(path)]).sessions
    info = store.get_session(res.id)
    assert info.metadata["format"] == "openai-responses"
    assert info.metadata["system"] == body["instructions"]
    assert info.metadata["params"] == {"store": False, "include": ["reasoning.encrypted_content"]}
    nodes = store.nodes(res.id)
    blocks = [b for n in nodes if isinstance(n.output, list) for b in n.output]
    reasoning = [it for it in items if it["type"] == "reasoning"]
    thinking = [b for b in blocks if isinstance(b, ThinkingBlock)]
    assert [b.signature for b in thinking] == [it.get("encrypted_content", "") for it in reasoning]
    assert all(b.vendor == "openai" for b in thinking)
    calls = [it["call_id"] for it in items if it["type"] in ("function_call", "custom_tool_call")]
    assert [b.id for b in blocks if isinstance(b, ToolUseBlock)] == calls
    outputs = [it["call_id"] for it in items if it["type"].endswith("_output")]
    assert sorted(n.metadata["tool_use_id"] for n in nodes if n.role == "tool") == sorted(outputs)
    (compaction,) = [b for b in blocks if isinstance(b, CompactionBlock)]
    assert compaction.vendor == "openai" and compaction.encrypted_content == "gAAAA-opaque"
    # Every item is kept as it came, to be sent back as recorded.
    kept = [it for n in nodes for it in n.metadata.get("responses_items", [])]
    assert kept == items


# -- compressed bodies ------------------------------------------------------------------


def recoded(path: Path, encoding: str, encode: Any, out: Path) -> Path:
    """The cassette with its response bodies re-encoded (as bytes, the header set)."""
    doc = yaml.safe_load(path.read_text())
    for it in doc["interactions"]:
        body = it["response"]["body"]["string"]
        raw = body if isinstance(body, bytes) else body.encode()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        it["response"]["body"]["string"] = encode(raw)
        headers = it["response"]["headers"]
        kept = {k: v for k, v in headers.items() if k.lower() != "content-encoding"}
        it["response"]["headers"] = {**kept, "Content-Encoding": [encoding]}
    out.write_text(yaml.safe_dump(doc))
    return out


def test_deflate_and_br_bodies_keep_their_usage(tmp_path):
    _, (plain,) = parse_file(str(CASSETTE))
    usage = plain.metadata["usage"]
    assert usage["input_tokens"] > 0
    deflated = recoded(CASSETTE, "deflate", zlib.compress, tmp_path / "deflate.yaml")
    assert parse_file(str(deflated))[1][0].metadata["usage"] == usage
    brotli = pytest.importorskip("brotli")
    br = recoded(CASSETTE, "br", brotli.compress, tmp_path / "br.yaml")
    assert parse_file(str(br))[1][0].metadata["usage"] == usage


def test_a_br_body_without_brotli_is_refused_saying_what_to_install(tmp_path, monkeypatch):
    br = recoded(CASSETTE, "br", lambda raw: b"\x1b\x03not-brotli" + raw[:8], tmp_path / "br.yaml")
    monkeypatch.setattr(_streams, "_brotli", lambda: None)
    with pytest.raises(ImportFormatError, match=r"br \(Brotli\).*ctxrules\[brotli\]"):
        parse_file(str(br))
