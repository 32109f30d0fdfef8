"""OpenHands evaluation output (``output.jsonl``): one session per instance.

The corpus holds an OpenHands event list but no evaluation output, so the tests write
``output.jsonl`` as OpenHands' evaluation harness does (``EvalOutput`` dumped as JSON,
one instance per line: ``instance_id``, ``test_result``, ``instruction``, ``metadata``
with the ``llm_config``, ``history``, ``metrics``, ``error``, ``instance``), with the
corpus trajectory's real events as each instance's history.  The history starts with
a system event in the shape OpenHands records (``action: system``, ``args.content``,
``args.tools`` as Chat Completions function declarations); the trajectory itself has
none, so its two tools (``execute_bash``, ``str_replace_editor``, the functions its
calls name) are declared there by the test.
"""

from __future__ import annotations

import json

import pytest

from ctxrules.errors import ImportFormatError, TranscriptWarning
from ctxrules.importers import HEAD_BYTES, detect_formats, import_paths
from ctxrules.store import open_store

TRAJ = "openhands-trajectory/basic_gui_mode.json"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "execute_bash",
            "description": "Execute a bash command in the terminal.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "str_replace_editor",
            "description": "Custom editing tool for viewing, creating and editing files.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "path": {"type": "string"}},
                "required": ["command", "path"],
            },
        },
    },
]
SYSTEM = "You are OpenHands agent, a helpful AI assistant that can interact with a computer."


def events(corpus):
    return json.loads((corpus / TRAJ).read_text())


def instance(corpus, iid, *, pairs=False, model="anthropic/claude-3-5-sonnet-20241022"):
    evs = events(corpus)
    system = {
        "id": -1,
        "timestamp": evs[0]["timestamp"],
        "source": "agent",
        "message": SYSTEM,
        "action": "system",
        "args": {"content": SYSTEM, "tools": TOOLS, "agent_class": "CodeActAgent"},
    }
    history: list = [system, *evs]
    if pairs:  # the older output format: [action, observation] pairs
        history = [[e, {}] if "action" in e else [{}, e] for e in history]
    task = next(e for e in evs if e.get("action") == "message")["args"]["content"]
    return {
        "instance_id": iid,
        "test_result": {"git_patch": "diff --git a/x b/x\n"},
        "instruction": task,
        "metadata": {
            "agent_class": "CodeActAgent",
            "llm_config": {"model": model, "api_key": "**********", "temperature": 0.0},
            "max_iterations": 30,
            "eval_output_dir": "evaluation/evaluation_outputs/outputs/demo",
            "start_time": "2025-01-20 20:29:00",
            "git_commit": "0" * 40,
            "dataset": "demo",
        },
        "history": history,
        "metrics": {"accumulated_cost": 0.1},
        "error": None,
        "instance": {"instance_id": iid, "repo": "demo/gui"},
    }


def write(path, instances, tail=""):
    path.write_text("".join(json.dumps(i) + "\n" for i in instances) + tail)
    return str(path)


@pytest.fixture
def output(corpus, tmp_path):
    return write(
        tmp_path / "output.jsonl",
        [instance(corpus, "demo__gui-1"), instance(corpus, "demo__gui-2", pairs=True)],
    )


def test_output_is_detected_as_openhands(output, corpus, tmp_path):
    assert detect_formats(output) == ["openhands"]
    # A first line longer than the detectors see (real histories are) is still ours.
    long = instance(corpus, "demo__gui-3")
    long["history"][1]["content"] = "x" * (2 * HEAD_BYTES)
    assert detect_formats(write(tmp_path / "long.jsonl", [long])) == ["openhands"]


def test_one_session_per_instance(output, corpus, store):
    results = import_paths(store, [output])
    assert [r.format for r in results] == ["openhands", "openhands"]
    (oracle,) = import_paths(store, [str(corpus / TRAJ)])  # the same events, as a list
    want = store.nodes(oracle.id)
    evs = events(corpus)
    first_model = next(
        e["tool_call_metadata"]["model_response"]["model"]
        for e in evs
        if "action" in e and "tool_call_metadata" in e
    )
    for r, iid in zip(results, ["demo__gui-1", "demo__gui-2"]):
        info = store.get_session(r.id)
        nodes = store.nodes(r.id)
        assert info.metadata["title"] == info.metadata["instance_id"] == iid
        assert info.metadata["tools"] == TOOLS  # args.tools of the system event, as recorded
        assert info.metadata["model"] == first_model
        assert "history" not in info.metadata["evaluation"]
        assert info.metadata["evaluation"]["test_result"] == {"git_patch": "diff --git a/x b/x\n"}
        system = [n for n in nodes if n.role == "system"]
        assert [n.input for n in system] == [SYSTEM]  # the system event stays a node
        assert "tools" not in system[0].metadata["openhands"]["args"]  # kept once
        assert [(n.role, n.name, n.output) for n in nodes if n.role != "system"] == [
            (n.role, n.name, n.output) for n in want
        ]
    assert results[0].id != results[1].id


def test_format_openhands_reads_output(output, store):
    assert len(import_paths(store, [output], format="openhands")) == 2


def test_errors_name_the_line(corpus, store, tmp_path, snapshot):
    bad = instance(corpus, "demo__gui-2")
    bad["history"] = "not a list"
    path = write(tmp_path / "output.jsonl", [instance(corpus, "demo__gui-1"), bad])
    with pytest.raises(ImportFormatError, match="'history' is str") as err:
        import_paths(store, [path])
    assert f"{path}:2" in str(err.value)
    orphan = instance(corpus, "demo__gui-3")
    orphan["history"] = [e for e in orphan["history"] if "action" not in e or e["id"] != 7]
    path = write(tmp_path / "orphan.jsonl", [orphan])
    with pytest.raises(ImportFormatError, match="has no action before it") as err:
        import_paths(store, [path])
    assert f"{path}:1 at history[" in str(err.value)
    assert snapshot(store) == []


def test_a_growing_output_adds_its_new_instances(corpus, store, tmp_path):
    one, two = instance(corpus, "demo__gui-1"), instance(corpus, "demo__gui-2")
    path = tmp_path / "output.jsonl"
    cut = json.dumps(two)[:5000]
    with pytest.warns(TranscriptWarning, match=r"output\.jsonl:2: the last line is cut off"):
        (first,) = import_paths(store, [write(path, [one], cut)])
    again = import_paths(store, [write(path, [one, two])])
    assert (again[0].id, again[0].created) == (first.id, False)
    assert again[1].created and again[1].added == again[1].calls > 0


def test_an_instance_without_history_is_skipped_with_a_warning(corpus, store, tmp_path):
    failed = {**instance(corpus, "demo__gui-0"), "history": [], "error": "runtime died"}
    path = write(tmp_path / "output.jsonl", [failed, instance(corpus, "demo__gui-1")])
    with pytest.warns(TranscriptWarning, match=r"output\.jsonl:1: instance 'demo__gui-0'"):
        (res,) = import_paths(store, [path])
    assert store.get_session(res.id).metadata["instance_id"] == "demo__gui-1"


def test_the_configured_model_when_no_response_names_one(corpus, tmp_path):
    talk = instance(corpus, "demo__gui-1", model="openai/gpt-4o")
    talk["history"] = [e for e in talk["history"] if "tool_call_metadata" not in e]
    path = write(tmp_path / "output.jsonl", [talk])
    store = open_store(tmp_path / "store")
    try:
        (res,) = import_paths(store, [path])
        assert store.get_session(res.id).metadata["model"] == "openai/gpt-4o"
    finally:
        store.close()
