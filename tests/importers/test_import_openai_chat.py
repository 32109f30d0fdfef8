"""OpenAI Chat Completions lists: tau-bench runs, {"messages"}, a bare list."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ctxrules import dag
from ctxrules.errors import ImportFormatError
from ctxrules.importers import import_paths
from ctxrules.model import TextBlock, ToolUseBlock

TAU = "openai-chat-json/taubench_gpt-4o-airline.json"


def check_conversation(store, session_id, messages):
    """Nodes of one session against its Chat Completions messages (plain dicts)."""
    nodes = store.nodes(session_id)
    roles = Counter("system" if m["role"] == "developer" else m["role"] for m in messages)
    assert Counter(n.role for n in nodes) == roles
    by_id = {n.id: n for n in nodes}
    # Real runs reuse call ids: a tool message answers the latest call with its id.
    answered = []
    latest = {}
    for m in messages:
        for tc in m.get("tool_calls") or []:
            latest[tc["id"]] = tc
        if m["role"] == "tool":
            answered.append(latest[m["tool_call_id"]])
    tools = [n for n in nodes if n.role == "tool"]
    assert len(tools) == len(answered)
    for n, tc in zip(tools, answered):
        assert n.metadata["tool_use_id"] == tc["id"]
        caller = by_id[n.caller]
        assert tc["id"] in [b.id for b in caller.output if isinstance(b, ToolUseBlock)]
        assert n.name == tc["function"]["name"]
        assert n.input == json.loads(tc["function"]["arguments"])
    path = dag.branch_path(store, session_id)
    assert len(path) == len(messages)
    conv = [m for m in messages if m["role"] != "tool"]
    for node, msg in zip((n for n in path if n.role != "tool"), conv):
        if msg["role"] == "system":
            assert node.input == msg["content"]
        elif msg["role"] == "assistant" and msg.get("tool_calls"):
            text = [b.text for b in node.output if isinstance(b, TextBlock)]
            assert text == ([msg["content"]] if msg.get("content") else [])
        else:
            assert node.output == (msg["content"] or "")


def test_taubench_gives_one_session_per_run(corpus, store):
    data = json.loads((corpus / TAU).read_text())
    results = import_paths(store, [str(corpus / TAU)])
    assert len(results) == len(data)
    assert {r.format for r in results} == {"openai-chat"}
    assert sum(r.calls for r in results) == sum(len(e["traj"]) for e in data)
    tool_nodes = sum(1 for r in results for n in store.nodes(r.id) if n.role == "tool")
    assert tool_nodes == sum(1 for e in data for m in e["traj"] if m["role"] == "tool")
    for i in (0, 57, len(data) - 1):
        check_conversation(store, results[i].id, data[i]["traj"])
        meta = store.get_session(results[i].id).metadata
        assert (meta["task_id"], meta["reward"], meta["index"]) == (
            data[i]["task_id"],
            data[i]["reward"],
            i,
        )


@pytest.mark.parametrize("shape", ["messages", "bare"])
def test_message_list_shapes(corpus, store, tmp_path, shape):
    traj = json.loads((corpus / TAU).read_text())[3]["traj"]
    doc = {"model": "gpt-4o", "messages": traj} if shape == "messages" else traj
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(doc))
    (res,) = import_paths(store, [str(path)])
    assert res.format == "openai-chat"
    check_conversation(store, res.id, traj)


def test_tool_message_without_its_call_is_refused(corpus, store, tmp_path, snapshot):
    traj = json.loads((corpus / TAU).read_text())[0]["traj"]
    first_tool = next(i for i, m in enumerate(traj) if m["role"] == "tool")
    broken = traj[: first_tool - 1] + traj[first_tool:]  # drop the assistant call
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    before = snapshot(store)
    with pytest.raises(ImportFormatError) as err:
        import_paths(store, [str(path)])
    assert "no tool call" in str(err.value) and "broken.json" in str(err.value)
    assert f"[{first_tool - 1}]" in str(err.value)
    assert f"broken.json:1 at [{first_tool - 1}]" in str(err.value)  # one-line JSON
    path.write_text(json.dumps(broken, indent=2))
    with pytest.raises(ImportFormatError) as err:
        import_paths(store, [str(path)])
    text = path.read_text().splitlines()
    line = int(str(err.value).split("broken.json:")[1].split()[0])
    value, _ = json.JSONDecoder().raw_decode("\n".join(text[line - 1 :]).lstrip())
    assert value == broken[first_tool - 1]
    assert snapshot(store) == before


def test_parts_images_developer_role_and_broken_arguments(store, tmp_path):
    messages = [
        {"role": "developer", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "look", "arguments": '{"zoom": 2'},
                },  # cut-off JSON
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a cat"},
    ]
    path = tmp_path / "parts.json"
    path.write_text(json.dumps({"messages": messages}))
    (res,) = import_paths(store, [str(path)])
    system, user, assistant, tool = store.nodes(res.id)
    assert system.role == "system" and system.input == "be brief"
    assert system.metadata["openai_role"] == "developer"
    text, inline, remote = user.output
    assert text.text == "what is this?"
    assert (inline.source.type, inline.source.media_type, inline.source.data) == (
        "base64",
        "image/png",
        "iVBORw0",
    )
    assert (remote.source.type, remote.source.url) == ("url", "https://example.com/cat.png")
    (use,) = assistant.output
    assert use.input == {"arguments": '{"zoom": 2'}
    assert assistant.metadata["raw_arguments"] == {"c1": '{"zoom": 2'}
    assert tool.caller == assistant.id and tool.output == "a cat"


def test_tool_message_without_tool_call_id_says_so(store, tmp_path, snapshot):
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "result"},  # no tool_call_id
    ]
    path = tmp_path / "no_id.json"
    path.write_text(json.dumps(messages))
    with pytest.raises(ImportFormatError, match="without tool_call_id") as err:
        import_paths(store, [str(path)])
    assert f"{path}:1 at [2]" in str(err.value)
    assert snapshot(store) == []
