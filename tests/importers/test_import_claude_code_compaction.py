"""Claude Code's own compactions become boundary nodes with the summary it recorded.

The corpus holds no transcript that compacted, so the test builds one from the real
2.x transcript: after its 25th line (the answer closing the first task) it inserts a
``compact_boundary`` line and the ``isCompactSummary`` message in the shape Claude Code
writes them (``parentUuid`` null, ``logicalParentUuid`` the line before,
``compactMetadata {trigger, preTokens}``; the summary a user line whose parent is the
boundary), with ``preTokens`` the prompt size the transcript records for that answer,
and points the next line at the summary, as Claude Code continues after one.  The
summary text is written for the test.
"""

from __future__ import annotations

import json

import pytest

from ctxrules import dag
from ctxrules.cli import main
from ctxrules.commit import boundary_of, make_commit
from ctxrules.compaction import boundaries
from ctxrules.importers import import_paths
from ctxrules.model import content_text

SOURCE = "claude-code-jsonl/reliability_coverage-test-fix.jsonl"
AFTER_LINE = 25  # the answer that closes the first task
SUMMARY = (
    "This session is being continued from a previous conversation that ran out of "
    "context. The conversation is summarized below:\n"
    "1. Primary request: add a function multiply_numbers(a, b) to src/math_utils.py with "
    "a test.\n2. Done: function and test added, tests pass, committed as 6322cf4."
)


def _compacted(corpus, tmp_path, **metadata):
    lines = [json.loads(x) for x in (corpus / SOURCE).read_text().splitlines()]
    before, after = lines[:AFTER_LINE], lines[AFTER_LINE:]
    last = before[-1]
    usage = last["message"]["usage"]
    pre = (
        usage["input_tokens"]
        + usage.get("cache_read_input_tokens", 0)
        + usage.get("cache_creation_input_tokens", 0)
    )
    common = {k: last[k] for k in ("cwd", "sessionId", "version", "gitBranch", "userType")}
    boundary = {
        "parentUuid": None,
        "logicalParentUuid": last["uuid"],
        "isSidechain": False,
        **common,
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "isMeta": False,
        "timestamp": after[0]["timestamp"],
        "uuid": "b0c0a0d0-0000-4000-8000-000000000001",
        "level": "info",
        "compactMetadata": {"trigger": "auto", "preTokens": pre, **metadata},
    }
    summary = {
        "parentUuid": boundary["uuid"],
        "isSidechain": False,
        **common,
        "type": "user",
        "message": {"role": "user", "content": SUMMARY},
        "isVisibleInTranscriptOnly": True,
        "isCompactSummary": True,
        "uuid": "b0c0a0d0-0000-4000-8000-000000000002",
        "timestamp": after[0]["timestamp"],
    }
    after[0] = {**after[0], "parentUuid": summary["uuid"]}
    path = tmp_path / "compacted.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [*before, boundary, summary, *after]) + "\n")
    return path, last, pre, after[0]


@pytest.mark.parametrize("post", [None, 3_456])
def test_a_compact_boundary_becomes_a_boundary_node_with_its_summary(corpus, store, tmp_path, post):
    extra = {} if post is None else {"postTokens": post}
    path, last, pre, next_line = _compacted(corpus, tmp_path, **extra)
    (res,) = import_paths(store, [str(path)])
    nodes = store.nodes(res.id)
    by_uuid = {
        u: n
        for n in nodes
        for u in n.metadata.get("uuids", [n.metadata.get("claude_code", {}).get("uuid")])
    }
    (boundary,) = [n for n in nodes if boundary_of(n) is not None]
    record = boundary_of(boundary)
    assert boundary.predecessor == by_uuid[last["uuid"]].id  # continues its logical parent
    assert (record.trigger, record.tokens_before, record.tokens_after) == ("auto", pre, post)
    assert record.measured == "recorded" and record.previous == boundary.predecessor
    assert record.summary == SUMMARY and not record.keep_open_turn
    assert record.source["compactMetadata"] == {"trigger": "auto", "preTokens": pre, **extra}
    # the summary message is the boundary's summary, not a node of its own
    assert not any(SUMMARY in content_text(n.output) for n in nodes if n.role == "user")
    follower = by_uuid[next_line["uuid"]]
    assert follower.predecessor == boundary.id
    # one branch from the first line to HEAD, through the boundary
    path_ids = [n.id for n in dag.branch_path(store, res.id)]
    assert path_ids[0] == nodes[0].id and boundary.id in path_ids
    assert boundaries(store, res.id) == [(boundary, record)]

    def no_summarizer(request):
        raise AssertionError(f"a summarizer was asked: {request.rule}")

    commit = make_commit(res.id, now=2e9, store=store, answer=no_summarizer)
    (sm,) = [it for it in commit.items if it.state == "summary"]
    assert sm.rendered == SUMMARY
    cut = [it.source_node_id for it in commit.items].index(sm.source_node_id)
    assert all(it.state == "summarized" for it in commit.items[1:cut])  # all but the task
    assert commit.items[0].is_anchor and commit.items[0].state == "full"
    assert commit.items[cut + 1].source_node_id == follower.id


def test_log_shows_the_imported_boundary(corpus, tmp_path, capsys):
    path, _, pre, _ = _compacted(corpus, tmp_path)
    store = str(tmp_path / "cli-store")
    assert main(["import", str(path), "--store", store, "--json"]) == 0
    sid = json.loads(capsys.readouterr().out)["sessions"][0]["id"]
    assert main(["log", sid, "--store", store]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "compaction" in x]
    assert line.startswith("* ") and f"── compaction (auto): {pre:,} → ? tokens ──" in line
