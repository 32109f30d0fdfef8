"""Every file of the corpus imports, and what it imports is what the file holds.

The counts are read from each file by ``corpus_oracle`` (standard library and PyYAML,
no ctxrules code) and compared with the sessions the importers make: per recorded
call, the call itself, its billed prompt and its tool calls; per transcript, its API
requests and their usage, tool calls and results, sub-agents and the Task calls that
started them, compaction boundaries, models.  The files are those MANIFEST.json lists
(tests/corpus.py); a file that holds no conversation is refused, saying why, and the
oracle confirms it holds none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.corpus import CORPUS, entries, files
from tests.importers import corpus_oracle as oracle

from ctxrules.commit import make_commit
from ctxrules.errors import EmptyTranscriptError
from ctxrules.importers import ImportedSession, detect_formats, import_report, parse_file
from ctxrules.model import ImageBlock, ThinkingBlock, ToolUseBlock
from ctxrules.providers import get_provider
from ctxrules.render import render
from ctxrules.store import open_store

RECORDINGS = ("cassette-yaml", "cassette-yaml-ruby-vcr", "cassette-yaml-pydantic-ai", "httprr")
#: The importer auto detection picks for each kind of file.
FORMAT = {
    **dict.fromkeys(RECORDINGS, "cassette"),
    "claude-code": "claude-code",
    "codex-rollout": "codex",
    "gemini-cli": "gemini-cli",
    "openai-chat-json": "openai-chat",
    "swe-agent": "swe-agent",
    "openhands": "openhands",
}


def _rel(path: Path) -> str:
    return str(path.relative_to(CORPUS))


def tool_uses(session: ImportedSession) -> list[ToolUseBlock]:
    return [
        b
        for n in session.nodes
        if n.role == "assistant" and isinstance(n.output, list)
        for b in n.output
        if isinstance(b, ToolUseBlock)
    ]


def _refusal(path: Path) -> str | None:
    """Why the oracle says a file holds no conversation (``None``: it holds one)."""
    entry = next(e for e in entries() if e["path"] == _rel(path))
    if entry["kind"] in RECORDINGS:
        return None if oracle.calls(path) else "no model call"
    if entry["kind"] == "gemini-cli":
        return None if oracle.gemini_cli(path)["conversation"] else "no conversation"
    return None


@pytest.mark.parametrize("path", files(), ids=_rel)
def test_every_corpus_file_is_detected_and_imports_or_says_why_not(path):
    entry = next(e for e in entries() if e["path"] == _rel(path))
    assert detect_formats(str(path))[0] == FORMAT[entry["kind"]]
    why = _refusal(path)
    if why is not None:
        with pytest.raises(EmptyTranscriptError, match=why):
            parse_file(str(path))
        return
    fmt, sessions = parse_file(str(path))
    assert fmt == FORMAT[entry["kind"]] and sessions
    for s in sessions:
        assert s.nodes and s.head in {n.id for n in s.nodes}


def test_the_corpus_folder_imports_with_each_skip_explained(tmp_path):
    store = open_store(tmp_path / "store")
    report = import_report(store, [str(CORPUS)])
    refused = sorted(str(p) for p in files() if _refusal(p) is not None)
    skipped = {s.path: s.reason for s in report.skipped}
    not_transcripts = [str(CORPUS / "MANIFEST.json"), str(CORPUS / "SOURCES.md")]
    assert sorted(skipped) == sorted([*not_transcripts, *refused])
    assert all(skipped[p].startswith(("no model call", "no conversation")) for p in refused)
    imported = {r.source for r in report.sessions}
    assert imported == {str(p) for p in files()} - set(refused)
    for r in report.sessions:
        info = store.get_session(r.id)
        assert r.calls > 0 and info.head is not None and store.is_visible(r.id, info.head)
    store.close()


# -- recorded traffic -----------------------------------------------------------------


def _prompt(wire: str, usage: Any) -> int | None:
    if not isinstance(usage, dict):
        return None
    key = {"gemini": "promptTokenCount", "openai": "prompt_tokens"}.get(wire, "input_tokens")
    return usage.get(key)


@pytest.mark.parametrize("path", files(kind=RECORDINGS), ids=_rel)
def test_every_recorded_call_is_a_session_with_its_bill(path):
    expected = oracle.calls(path)
    if not expected:
        with pytest.raises(EmptyTranscriptError):
            parse_file(str(path), format="cassette-all")
        return
    _, sessions = parse_file(str(path), format="cassette-all")
    assert [s.metadata["interaction"] for s in sessions] == [c["index"] for c in expected]
    for s, call in zip(sessions, expected):
        meta = s.metadata
        assert meta["provider"] == call["wire"]
        # What was billed for exactly this request, a stream's too.
        assert _prompt(meta["wire"], meta.get("usage")) == call["billed"], meta["interaction"]
        if call["billed"]:
            usage = get_provider(meta["provider"]).parse_usage(meta["response"])
            assert usage is not None and usage.prompt_tokens > 0
        # The request as recorded, to send it again as it was.
        assert json.loads(meta["request_body"]) == call["body"]
        assert meta["request"] == {
            k: v for k, v in call["body"].items() if k not in ("messages", "contents", "input")
        }
        if "previous_response_id" not in call["body"]:
            assert len(tool_uses(s)) == oracle.request_tool_calls(call["wire"], call["body"])


def test_snake_case_gemini_parts_are_read_like_camel_case_ones():
    """ruby_llm's Vertex AI requests send ``inline_data`` / ``mime_type``: each is an
    image of the session, not an empty turn."""
    checked = 0
    for path in files(wire="gemini"):
        for call, s in zip(oracle.calls(path), _all(path)):
            parts = [p for c in call["body"]["contents"] for p in c["parts"]]
            snake = [p["inline_data"] for p in parts if "inline_data" in p]
            if not snake:
                continue
            images = [
                b
                for n in s.nodes
                if isinstance(n.output, list)
                for b in n.output
                if isinstance(b, ImageBlock)
            ]
            assert [i.source.media_type for i in images][: len(snake)] == [
                d["mime_type"] for d in snake
            ]
            checked += 1
    assert checked >= 2


def _all(path: Path) -> list[ImportedSession]:
    try:
        return parse_file(str(path), format="cassette-all")[1]
    except EmptyTranscriptError:
        return []


def test_a_responses_request_chained_on_a_recorded_answer_holds_that_conversation():
    """ruby-openai's follow-up: the second request names the first answer by
    ``previous_response_id``; its session holds the first request, the first answer,
    then its own input."""
    path = (
        CORPUS
        / "ruby-vcr-cassettes-yaml/openai-responses/rubyopenai__responses_create_with_followup.yml"
    )
    first, second = oracle.calls(path)[:2]
    assert second["body"]["previous_response_id"]
    sessions = _all(path)
    chained = sessions[1]
    assert chained.metadata["chained_interactions"] == [first["index"]]
    texts = [_text(n) for n in chained.nodes]
    own = second["body"]["input"]
    earlier = first["body"]["input"]
    want_first = earlier if isinstance(earlier, str) else earlier[0]["content"]
    want_own = own if isinstance(own, str) else own[-1]["content"]
    assert texts.index(_flat(want_first)) < texts.index(_flat(want_own))
    assert any(n.role == "assistant" for n in chained.nodes[: texts.index(_flat(want_own))])


def _flat(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content)


def _text(node: Any) -> str:
    out = node.output
    if isinstance(out, str):
        return out
    return "\n".join(getattr(b, "text", "") for b in out if getattr(b, "text", None) is not None)


# -- Claude Code ----------------------------------------------------------------------


@pytest.mark.parametrize("path", files(kind="claude-code"), ids=_rel)
def test_claude_code_transcripts_hold_what_the_file_holds(path):
    want = oracle.claude_code(path)
    _, (s,) = parse_file(str(path), format="claude-code")
    measured = {
        n.metadata["message_id"]: n
        for n in s.nodes
        if n.role == "assistant" and n.metadata.get("usage") and n.name != "<synthetic>"
    }
    # One node per API request, with the usage the request was billed.
    assert set(measured) == set(want["requests"])
    for mid, node in measured.items():
        billed = want["requests"][mid]["usage"]["input_tokens"]
        assert node.metadata["usage"]["input_tokens"] == billed
    assert {n.name for n in measured.values()} == want["models"]
    # Every tool call, and a tool node for every result.
    assert {b.id for b in tool_uses(s)} == want["tool_uses"]
    answered = {
        n.metadata["tool_use_id"]
        for n in s.nodes
        if n.role == "tool" and not n.metadata.get("result_missing")
    }
    assert answered == want["results"]
    # Sub-agents: one root each, under the Task call that started it.
    roots = [n for n in s.nodes if n.metadata.get("task_tool_use_id")]
    assert len(roots) == len(want["agents"])
    for agent, task in want["agents"].items():
        if task is not None:  # named by its progress lines
            (root,) = [n for n in roots if n.metadata["claude_code"].get("agentId") == agent]
            assert root.metadata["task_tool_use_id"] == task
            assert root.caller == next(
                n.id for n in s.nodes if n.role == "tool" and n.metadata.get("tool_use_id") == task
            )
    # Compaction boundaries, each after the line it names or, absent, the one before.
    boundaries = [n for n in s.nodes if "compaction" in n.metadata]
    assert len(boundaries) == len(want["boundaries"])
    for node, line in zip(boundaries, want["boundaries"]):
        source = node.metadata["compaction"]["source"]
        absent = line.get("logicalParentUuid") not in want["uuids"]
        assert bool(source.get("logical_parent_absent") or source.get("parent_absent")) == absent
        assert node.predecessor is not None
    assert s.metadata.get("glued_lines", []) == oracle.glued_lines(path)


def test_a_boundary_whose_logical_parent_is_absent_keeps_the_recorded_summary(tmp_path):
    """PackmindHub's session compacted with a ``logicalParentUuid`` the file does not
    hold: the request after the boundary carries the summary Claude Code recorded (it
    rendered as one placeholder message, 549 tokens where 36,081 were billed)."""
    path = CORPUS / "claude-code-jsonl/packmind/95_cc2ca9e65d_2_full.jsonl"
    (summary,) = oracle.claude_code(path)["summaries"]
    store = open_store(tmp_path / "store")
    (res,) = import_report(store, [str(path)], format="claude-code").sessions
    nodes = store.nodes(res.id)
    boundary = next(n for n in nodes if "compaction" in n.metadata)
    after = next(n for n in nodes if n.role == "assistant" and n.created_at > boundary.created_at)
    commit = make_commit(res.id, after.predecessor, store=store, now=after.created_at)
    body = render(commit, "anthropic", model="claude-opus-4-6").body.decode()
    assert json.dumps(summary[:200])[1:-1] in body
    # The boundary follows the conversation before it (whose units it folds).
    assert boundary.predecessor is not None
    store.close()


# -- Codex and Gemini CLI --------------------------------------------------------------


@pytest.mark.parametrize("path", files(kind="codex-rollout"), ids=_rel)
def test_codex_rollouts_hold_what_the_file_holds(path):
    want = oracle.codex(path)
    _, (s,) = parse_file(str(path))
    measured = sorted(
        (n for n in s.nodes if n.metadata.get("usage")),
        key=lambda n: n.metadata["token_count_line"],
    )
    # One request per token_count snapshot that is not a repeat; input_tokens as written
    # (cached tokens included, as the Responses usage counts them).
    assert [n.metadata["usage"]["input_tokens"] for n in measured] == want["prompts"]
    assert all(n.role == "assistant" for n in measured)
    assert len(tool_uses(s)) == want["calls"]
    assert sum(n.role == "tool" for n in s.nodes) == want["outputs"]
    assert sum("codex_compacted" in n.metadata for n in s.nodes) == want["compacted"]
    assert {n.name for n in s.nodes if n.role == "assistant"} == want["models"]
    blocks = [b for n in s.nodes if isinstance(n.output, list) for b in n.output]
    assert all(b.vendor == "openai" for b in blocks if isinstance(b, ThinkingBlock))


@pytest.mark.parametrize("path", files(kind="gemini-cli"), ids=_rel)
def test_gemini_cli_sessions_hold_what_the_file_holds(path):
    want = oracle.gemini_cli(path)
    if not want["conversation"]:
        with pytest.raises(EmptyTranscriptError, match="notice"):
            parse_file(str(path))
        return
    _, (s,) = parse_file(str(path))
    measured = [n for n in s.nodes if n.metadata.get("usage")]
    assert [n.metadata["usage"]["promptTokenCount"] for n in measured] == want["prompts"]
    assert len(tool_uses(s)) == want["calls"]
    assert sum(n.role == "tool" for n in s.nodes) == want["answered"]
    assert {n.name for n in measured} == want["models"]
    assert [m["type"] for m in s.metadata.get("notices", [])] == want["notices"]


def test_gemini_cli_usage_is_each_requests_recorded_prompt(tmp_path):
    """The usage a Gemini CLI model message recorded is what a replay compares with."""
    from ctxrules.config import PipelineConfig
    from ctxrules.requests import compare_usage

    path = CORPUS / "gemini-cli/entirecli/ab_2b9748b105_0_full.json"
    store = open_store(tmp_path / "store")
    (res,) = import_report(store, [str(path)]).sessions
    rows = compare_usage(store, res.id, "gemini", config=PipelineConfig.preset("off"))
    assert [r.recorded_input for r in rows] == oracle.gemini_cli(path)["prompts"]
    store.close()
