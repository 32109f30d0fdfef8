"""OpenHands event lists: tool actions per model response, observations as tool nodes."""

from __future__ import annotations

import json

from ctxrules import dag
from ctxrules.importers import import_paths
from ctxrules.model import ToolUseBlock

TRAJ = "openhands-trajectory/basic_gui_mode.json"


def test_events_map_to_conversation_and_tool_nodes(corpus, store):
    events = json.loads((corpus / TRAJ).read_text())
    (res,) = import_paths(store, [str(corpus / TRAJ)])
    assert res.format == "openhands"
    nodes = store.nodes(res.id)
    tcm_actions = [e for e in events if "action" in e and "tool_call_metadata" in e]
    responses = {e["tool_call_metadata"]["model_response"]["id"] for e in tcm_actions}
    messages = [e for e in events if e.get("action") == "message"]
    observations = [e for e in events if "observation" in e and "tool_call_metadata" in e]
    assistants = [n for n in nodes if n.role == "assistant"]
    assert len(assistants) == len(responses) + sum(e["source"] == "agent" for e in messages)
    assert sum(n.role == "user" for n in nodes) == sum(e["source"] == "user" for e in messages)
    tools = [n for n in nodes if n.role == "tool"]
    assert len(tools) == len(observations)
    by_id = {n.id: n for n in nodes}
    for t, obs in zip(tools, observations):
        meta = obs["tool_call_metadata"]
        assert t.metadata["tool_use_id"] == meta["tool_call_id"]
        assert t.name == meta["function_name"]
        assert t.output == obs["content"]
        caller = by_id[t.caller]
        assert any(
            isinstance(b, ToolUseBlock) and b.id == meta["tool_call_id"] for b in caller.output
        )
        assert caller.metadata["usage"] == meta["model_response"]["usage"]
    kept = store.get_session(res.id).metadata["events"]
    assert len(kept) == len(events) - len(tcm_actions) - len(observations) - len(messages)
    assert len(dag.branch_path(store, res.id)) == len(nodes)
