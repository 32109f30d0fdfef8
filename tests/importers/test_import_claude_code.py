"""Claude Code JSONL (1.0.x and 2.x): counts derived from the files with plain json."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ctxrules import dag
from ctxrules.importers import import_paths
from ctxrules.model import ToolUseBlock, content_text

FILES = [
    "ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    "ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    "reliability_coverage-test-fix.jsonl",
]


def expected(path):
    """What the file holds, read with plain json (no ctxrules code)."""
    lines = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
    msgs = [e for e in lines if e.get("type") in ("user", "assistant")]
    usage = {}
    tool_uses = {}
    for e in msgs:
        if e["type"] == "assistant":
            m = e["message"]
            usage[m["id"]] = m.get("usage")
            for b in m["content"]:
                if b.get("type") == "tool_use":
                    tool_uses[b["id"]] = (m["id"], b)
    results, users = [], []
    for e in msgs:
        c = e["message"]["content"]
        if e["type"] != "user":
            continue
        if isinstance(c, str) or any(b.get("type") != "tool_result" for b in c):
            users.append(e)
        if isinstance(c, list):
            results += [(e, b) for b in c if b.get("type") == "tool_result"]
    return {
        "lines": lines,
        "assistants": {e["message"]["id"] for e in msgs if e["type"] == "assistant"},
        "main_assistants": {
            e["message"]["id"] for e in msgs if e["type"] == "assistant" and not e["isSidechain"]
        },
        "users": users,
        "results": results,
        "tool_uses": tool_uses,
        "usage": usage,
        "sidechain_roots": [e for e in msgs if e["isSidechain"] and e["parentUuid"] is None],
        "other": [e for e in lines if e.get("type") not in ("user", "assistant")],
    }


@pytest.fixture(params=FILES)
def imported(request, corpus, store):
    path = corpus / "claude-code-jsonl" / request.param
    (res,) = import_paths(store, [str(path)])
    return path, res, store.nodes(res.id), expected(path)


def test_node_counts_match_the_file(imported):
    path, res, nodes, exp = imported
    roles = Counter(n.role for n in nodes)
    assert res.format == "claude-code"
    assert roles["assistant"] == len(exp["assistants"])
    assert roles["tool"] == len(exp["results"])
    assert roles["user"] == len(exp["users"])
    assert res.calls == len(nodes)
    assert res.source == str(path)


def test_tool_nodes_pair_with_their_tool_use(imported):
    _, _, nodes, exp = imported
    by_id = {n.id: n for n in nodes}
    errors = 0
    for n in (n for n in nodes if n.role == "tool"):
        tid = n.metadata["tool_use_id"]
        msg_id, use = exp["tool_uses"][tid]
        caller = by_id[n.caller]
        assert caller.role == "assistant" and caller.metadata["message_id"] == msg_id
        assert any(isinstance(b, ToolUseBlock) and b.id == tid for b in caller.output)
        assert n.name == use["name"] and n.input == use["input"]
        assert n.predecessor is None
        errors += n.metadata["is_error"]
    assert errors == sum(bool(b.get("is_error")) for _, b in exp["results"])


def test_results_keep_their_content(imported):
    _, _, nodes, exp = imported
    by_tid = {n.metadata["tool_use_id"]: n for n in nodes if n.role == "tool"}
    for _, block in exp["results"]:
        node = by_tid[block["tool_use_id"]]
        raw = block.get("content", "")
        want = raw if isinstance(raw, str) else "\n".join(b.get("text", "") for b in raw)
        assert content_text(node.output) == want


def test_usage_is_kept_per_api_message(imported):
    _, _, nodes, exp = imported
    for n in (n for n in nodes if n.role == "assistant"):
        assert n.metadata["usage"] == exp["usage"][n.metadata["message_id"]]


def test_sidechains_hang_under_their_task_call(imported):
    _, _, nodes, exp = imported
    by_id = {n.id: n for n in nodes}
    roots = [n for n in nodes if n.role == "user" and n.caller is not None]
    assert len(roots) == len(exp["sidechain_roots"])
    for root in roots:
        task = by_id[root.caller]
        assert task.role == "tool" and task.name == "Task"
        assert task.input["prompt"] == root.output
    # Every sidechain line's node (and the tool calls it made) sits in the sub-tree of
    # a Task call: walking up its edges reaches a Task tool node before any main node.
    side = {e["uuid"] for e in exp["lines"] if e.get("isSidechain")}

    def uuids(n):
        return set(n.metadata.get("uuids") or [n.metadata["claude_code"]["uuid"]])

    side_nodes = [n for n in nodes if uuids(n) & side]
    assert set().union(*map(uuids, side_nodes)) == side  # every sidechain line has a node
    for n in side_nodes:
        up = n
        while not (up.role == "tool" and up.name == "Task" and up is not n):
            parent = up.caller or up.predecessor
            assert parent is not None, f"sidechain node {n.id} is not under a Task call"
            up = by_id[parent]


def test_main_branch_excludes_sidechains(imported, store):
    _, res, nodes, exp = imported
    path = dag.branch_path(store, res.id)
    sidechain_uuids = {e["uuid"] for e in exp["lines"] if e.get("isSidechain")}
    for n in path:
        uuids = n.metadata.get("uuids") or [n.metadata["claude_code"]["uuid"]]
        assert not set(uuids) & sidechain_uuids
    assistants = {n.metadata["message_id"] for n in path if n.role == "assistant"}
    assert assistants == exp["main_assistants"]
    nested = dag.branch_path(store, res.id, nested=True)
    assert len(nested) == len(nodes)  # no branches in these files: nested sees every node


def test_non_message_lines_are_kept(imported, store):
    _, res, _, exp = imported
    meta = store.get_session(res.id).metadata
    kept = meta.get("extra_lines", [])
    assert [{k: v for k, v in e.items() if k != "line"} for e in kept] == exp["other"]


def test_an_edited_prompt_becomes_a_sibling_branch(corpus, store, tmp_path):
    src = corpus / "claude-code-jsonl" / FILES[0]
    lines = src.read_text().splitlines()
    second = json.loads(lines[1])
    edited = dict(second, uuid="edited-0000", message={"role": "user", "content": "edited"})
    path = tmp_path / "branched.jsonl"
    path.write_text("\n".join([*lines, json.dumps(edited)]) + "\n")
    (res,) = import_paths(store, [str(path)])
    nodes = store.nodes(res.id)
    new = next(n for n in nodes if n.output == "edited")
    original = next(n for n in nodes if n.metadata["claude_code"].get("uuid") == second["uuid"])
    assert new.predecessor == original.predecessor
    assert dag.siblings(store, res.id, new.id) == (2, 2)
    assert dag.siblings(store, res.id, original.id) == (1, 2)
    assert store.get_session(res.id).head == new.id  # the last line is where the file ended
    assert (
        len(nodes)
        == len(expected(src)["users"])
        + len(expected(src)["results"])
        + len(expected(src)["assistants"])
        + 1
    )


def test_summary_and_system_lines_are_kept(corpus, store, tmp_path):
    lines = [
        json.loads(x) for x in (corpus / "claude-code-jsonl" / FILES[2]).read_text().splitlines()
    ]
    last = lines[-1]
    summary = {"type": "summary", "summary": "Added multiply_numbers", "leafUuid": last["uuid"]}
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "uuid": "sys-0001",
        "parentUuid": last["uuid"],
        "isSidechain": False,
        "timestamp": last["timestamp"],
        "sessionId": last["sessionId"],
    }
    after = dict(
        lines[1],
        uuid="after-0001",
        parentUuid="sys-0001",
        message={"role": "user", "content": "continue"},
    )
    path = tmp_path / "with_system.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [summary, *lines, boundary, after]) + "\n")
    (res,) = import_paths(store, [str(path)])
    nodes = store.nodes(res.id)
    system = [n for n in nodes if n.role == "system"]
    assert [n.input for n in system] == ["Conversation compacted"]
    cont = next(n for n in nodes if n.output == "continue")
    assert cont.predecessor == system[0].id
    kept = store.get_session(res.id).metadata["extra_lines"]
    assert {"line": 1, **summary} in kept
    assert sum(e["type"] == "queue-operation" for e in kept) == sum(
        x.get("type") == "queue-operation" for x in lines
    )
    path_nodes = dag.branch_path(store, res.id)
    assert path_nodes[-1].id == cont.id and path_nodes[-2].id == system[0].id
