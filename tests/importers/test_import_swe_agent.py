"""SWE-agent .traj: native tool calls with tool_call_ids, and plain-text actions."""

from __future__ import annotations

import json
from collections import Counter

from ctxrules.importers import import_paths
from ctxrules.model import ToolUseBlock

FC = "swe-agent-traj/function_calling_replace_marshmallow-code__marshmallow-1867.traj"
TEXT = "swe-agent-traj/gpt4_swe-agent__test-repo-i1.traj"


def test_tool_call_ids_become_tool_nodes_under_their_call(corpus, store):
    history = json.loads((corpus / FC).read_text())["history"]
    (res,) = import_paths(store, [str(corpus / FC)])
    assert res.format == "swe-agent"
    nodes = store.nodes(res.id)
    by_id = {n.id: n for n in nodes}
    tools = [n for n in nodes if n.role == "tool"]
    assert len(tools) == sum(len(m["tool_call_ids"]) for m in history if m["role"] == "tool")
    calls = sum(len(m.get("tool_calls") or []) for m in history if m["role"] == "assistant")
    blocks = [b for n in nodes for b in n.output if isinstance(b, ToolUseBlock)] if calls else []
    assert len(blocks) == calls
    for t in tools:
        assert any(
            isinstance(b, ToolUseBlock) and b.id == t.metadata["tool_use_id"]
            for b in by_id[t.caller].output
        )
    # SWE-agent's own fields stay with the message they came from.
    actions = [n.metadata["extra"]["action"] for n in nodes if n.role == "assistant"]
    assert actions == [m["action"] for m in history if m["role"] == "assistant"]


def test_plain_text_actions_stay_text(corpus, store):
    history = json.loads((corpus / TEXT).read_text())["history"]
    (res,) = import_paths(store, [str(corpus / TEXT)])
    nodes = store.nodes(res.id)
    assert Counter(n.role for n in nodes) == Counter(m["role"] for m in history)
    assert not any(n.role == "tool" for n in nodes)
    for n, m in zip(nodes, history):
        if m["role"] == "system":
            assert n.input == m["content"]
        else:
            assert n.output == m["content"]  # the action text, untouched
