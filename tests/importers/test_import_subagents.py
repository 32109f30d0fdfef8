"""Claude Code 2.x sub-agent transcripts (``agent-*.jsonl``) attach under their Task call.

The corpus has no 2.x sub-agent file, so the tests write them the way Claude Code 2.x
does, from the 1.0.108 session whose sidechains are inline: each sidechain's lines go
to ``agent-<id>.jsonl`` (beside the session file, or in ``<session id>/subagents/``)
with an ``agentId`` on every line and the session's ``sessionId``; the session file
keeps the other lines, and each Task result's ``toolUseResult`` names the ``agentId``.
The oracle is the inline file imported as it is: the same nodes, under the same calls.
"""

from __future__ import annotations

import json

import pytest

from ctxrules.importers import import_paths, import_report

SIDE = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def split(corpus, folder, *, layout="beside", agent_ids=("a1", "b2"), name_results=True):
    """Write the session file and its sub-agent files; returns (session file, agents)."""
    entries = [json.loads(x) for x in (corpus / SIDE).read_text().splitlines()]
    sid = entries[0]["sessionId"]
    main, agents, current = [], [], None
    for e in entries:
        if not e.get("isSidechain"):
            current = None
            main.append(e)
            continue
        if e["parentUuid"] is None:
            current = []
            agents.append(current)
        current.append(e)
    assert len(agents) == len(agent_ids)
    prompts = [a[0]["message"]["content"] for a in agents]
    for agent, aid in zip(agents, agent_ids):
        for e in agent:
            e["agentId"] = aid
    if name_results:  # the Task result of each sub-agent names it, as 2.x writes
        tasks = {
            b["id"]: b["input"].get("prompt")
            for e in main
            if e["type"] == "assistant"
            for b in e["message"]["content"]
            if b.get("type") == "tool_use" and b["name"] == "Task"
        }
        for e in main:
            content = e.get("message", {}).get("content")
            for b in content if isinstance(content, list) else []:
                if b.get("type") == "tool_result" and tasks.get(b["tool_use_id"]) in prompts:
                    e["toolUseResult"]["agentId"] = agent_ids[
                        prompts.index(tasks[b["tool_use_id"]])
                    ]
    folder.mkdir(parents=True, exist_ok=True)
    session = folder / f"{sid}.jsonl"
    session.write_text("".join(json.dumps(e) + "\n" for e in main))
    where = folder if layout == "beside" else folder / sid / "subagents"
    where.mkdir(parents=True, exist_ok=True)
    paths = []
    for agent, aid in zip(agents, agent_ids):
        p = where / f"agent-{aid}.jsonl"
        p.write_text("".join(json.dumps(e) + "\n" for e in agent))
        paths.append(str(p))
    return str(session), paths


def canonical(store, sid):
    """Each node by what it came from (line uuids / tool_use id), with its edges so."""
    nodes = {n.id: n for n in store.nodes(sid)}

    def ident(nid):
        if nid is None:
            return None
        n = nodes[nid]
        if n.role == "tool":
            return ("tool", n.metadata["tool_use_id"])
        if n.role == "assistant":
            return ("assistant", tuple(n.metadata["uuids"]))
        return (n.role, n.metadata["claude_code"]["uuid"])

    return {(ident(n.id), ident(n.predecessor), ident(n.caller), n.name) for n in nodes.values()}


@pytest.fixture
def inline(corpus, make_store):
    st = make_store("inline")
    (res,) = import_paths(st, [str(corpus / SIDE)])
    return st, res


@pytest.mark.parametrize("layout", ["beside", "subagents"])
def test_sub_agent_files_attach_as_the_inline_sidechains_do(
    any_store, inline, corpus, tmp_path, layout
):
    session, agents = split(corpus, tmp_path / "proj", layout=layout)
    (res,) = import_paths(any_store, [session])
    oracle, want = inline
    assert res.calls == want.calls  # the audit found 25 here (sub-agents left out) vs 45
    assert canonical(any_store, res.id) == canonical(oracle, want.id)
    assert any_store.get_session(res.id).head is not None
    roots = [n for n in any_store.nodes(res.id) if n.metadata.get("task_tool_use_id")]
    assert len(roots) == len(agents)
    for root in roots:
        task = any_store.get_node(root.caller)
        assert task.role == "tool" and task.name == "Task"
        assert task.metadata["tool_use_id"] == root.metadata["task_tool_use_id"]
        assert task.input["prompt"] == root.output


def test_the_agent_id_finds_the_task_when_the_prompt_does_not(any_store, corpus, tmp_path):
    """Both sub-agents' first lines stripped of their prompt: only the ``agentId`` that
    each Task result names tells them apart (the latest open Task would take the
    first file otherwise)."""
    session, agents = split(corpus, tmp_path / "proj")
    for path in agents:
        lines = [json.loads(x) for x in open(path)]
        lines[0]["message"]["content"] = "(prompt elided)"
        with open(path, "w") as fh:
            fh.writelines(json.dumps(e) + "\n" for e in lines)
    (res,) = import_paths(any_store, [session])
    roots = {
        n.metadata["claude_code"]["agentId"]: n
        for n in any_store.nodes(res.id)
        if n.metadata.get("task_tool_use_id")
    }
    assert sorted(roots) == ["a1", "b2"]
    for aid, root in roots.items():
        task = any_store.get_node(root.caller)
        assert task.metadata["tool_use_result"]["agentId"] == aid


def test_prompts_match_when_no_result_names_the_agent(any_store, inline, corpus, tmp_path):
    session, _ = split(corpus, tmp_path / "proj", name_results=False)
    (res,) = import_paths(any_store, [session])
    oracle, want = inline
    assert canonical(any_store, res.id) == canonical(oracle, want.id)


def test_an_agent_file_beside_its_session_in_one_import_is_no_session_of_its_own(
    any_store, corpus, tmp_path
):
    session, agents = split(corpus, tmp_path / "proj")
    report = import_report(any_store, [agents[0], session])
    (res,) = report.sessions
    assert res.source == session
    assert [s.path for s in report.skipped] == [agents[0]]
    assert session in report.skipped[0].reason
    assert len(any_store.list_sessions()) == 1


def test_an_agent_file_alone_is_its_own_conversation(any_store, corpus, tmp_path):
    _, agents = split(corpus, tmp_path / "proj")
    (res,) = import_paths(any_store, [agents[1]])
    nodes = any_store.nodes(res.id)
    lines = [json.loads(x) for x in open(agents[1])]
    assert res.calls == len(nodes) > 0
    assert nodes[0].metadata.get("sidechain_unattached") is True
    head = any_store.get_node(any_store.get_session(res.id).head)
    assert lines[-1]["uuid"] in head.metadata["uuids"]  # its last message


def test_sub_agents_that_appear_later_are_appended(any_store, inline, corpus, tmp_path):
    session, agents = split(corpus, tmp_path / "proj")
    full = open(session).read()
    stash = {p: open(p).read() for p in agents}
    for p in agents:  # not written yet
        (tmp_path / "proj" / p).unlink()
    first_task = full.index('"name": "Task"')
    open(session, "w").write(full[: full.rfind("\n", 0, first_task) + 1])
    (a,) = import_paths(any_store, [session])
    open(session, "w").write(full)
    for p, text in stash.items():
        open(p, "w").write(text)
    (b,) = import_paths(any_store, [session])
    oracle, want = inline
    assert b.id == a.id and b.added == b.calls - a.calls > 0
    assert canonical(any_store, a.id) == canonical(oracle, want.id)
