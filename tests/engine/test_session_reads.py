"""A turn reads the session row once per step: ``prepare`` reads it when it starts,
once more after its own appends (HEAD moved), and the commit's plan once; ``record``
not at all.  The row is never kept from one turn to the next: another writer may
change it in between, and the next turn sees the change.

The counter is ``tests/counting.py``'s, on the store's ``get_session``; the store is
SQLite, the engine's default, with a second connection as the other writer.
"""

from __future__ import annotations

import pytest
from tests.counting import count_calls
from tests.engine.scripted import CONFIG, answer

from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.engine import Engine, ToolResult
from ctxrules.errors import ValidationError
from ctxrules.requests import render_defaults, request_for
from ctxrules.store import open_store

PIPELINE = Pipeline.from_config(PipelineConfig.preset("default"))


@pytest.fixture
def grown(tmp_path):
    """A SQLite session the engine served for a few turns (its setup remembered)."""
    store = open_store(tmp_path / "store")
    sid = store.create_session().id
    engine = Engine(store, CONFIG, pipeline=PIPELINE)
    prep = engine.prepare(sid, "read the modules", now=1e9)
    engine.record(prep, answer(0, prep.tokens.estimate), now=1e9 + 1)
    for i in range(1, 4):
        prep = engine.prepare(
            sid, tool_results=[ToolResult(f"r{i - 1}", "x\n" * 50)], now=1e9 + 2 * i
        )
        engine.record(prep, answer(i, prep.tokens.estimate), now=1e9 + 2 * i + 1)
    yield store, engine, sid
    store.close()


@pytest.mark.parametrize("way", ["tool results", "user input"])
def test_a_turn_reads_the_session_row_three_times(grown, monkeypatch, way):
    store, engine, sid = grown
    reads = count_calls(monkeypatch, store, "get_session")
    if way == "tool results":
        prep = engine.prepare(sid, tool_results=[ToolResult("r3", "y\n" * 50)], now=2e9)
    else:  # the call answered, the model's last word, then the user's next message
        prep = engine.prepare(sid, tool_results=[ToolResult("r3", "y\n" * 50)], now=2e9)
        engine.record(prep, answer(8, prep.tokens.estimate, call=False), now=2e9 + 1)
        reads.n = 0
        prep = engine.prepare(sid, "now summarise what you read", now=2e9 + 2)
    # The start, after the appends, the commit's plan: nothing else reads it again.
    assert reads.n == 3
    reads.n = 0
    engine.record(prep, answer(9, prep.tokens.estimate), now=2e9 + 1)
    assert reads.n == 0


def test_another_writers_change_is_seen_by_the_next_turn(grown, tmp_path):
    """The engine's setup record is written from the row the turn read: a model another
    writer put there between two turns is seen and written back to the engine's."""
    store, engine, sid = grown
    assert store.get_session(sid).metadata["model"] == "claude-sonnet-4-5"
    other = open_store(tmp_path / "store")
    try:
        other.update_metadata(sid, {"model": "written-by-another-process"})
    finally:
        other.close()
    engine.prepare(sid, tool_results=[ToolResult("r3", "z\n" * 50)], now=3e9)
    assert store.get_session(sid).metadata["model"] == "claude-sonnet-4-5"


def test_render_defaults_takes_the_row_it_is_given_and_refuses_another_sessions(grown, monkeypatch):
    store, _engine, sid = grown
    info = store.get_session(sid)
    assert info.head is not None
    request = request_for(store, sid, info.head, config=PIPELINE)  # the last answer's
    reads = count_calls(monkeypatch, store, "get_session")
    given = render_defaults(store, request, "anthropic", session_info=info)
    assert reads.n == 0
    assert given == render_defaults(store, request, "anthropic")
    elsewhere = store.create_session()
    with pytest.raises(ValidationError, match="not the request's"):
        render_defaults(store, request, "anthropic", session_info=elsewhere)


def test_a_turn_reads_heads_calls_once_before_its_appends(grown, monkeypatch):
    """HEAD's node and the tool results under it are read by ``settle`` (which hands its
    calls to the appends) and the commit's plan, HEAD's node once more by usage
    fusion: the appends read neither again."""
    store, engine, sid = grown
    head = store.get_session(sid).head
    nodes: list[str] = []
    results: list[str] = []
    real_get_node, real_children = store.get_node, store.children

    def get_node(node_id: str):
        nodes.append(node_id)
        return real_get_node(node_id)

    def children(node_id: str, **kw):
        results.append(node_id)
        return real_children(node_id, **kw)

    monkeypatch.setattr(store, "get_node", get_node)
    monkeypatch.setattr(store, "children", children)
    engine.prepare(sid, tool_results=[ToolResult("r3", "y\n" * 50)], now=2e9)
    assert nodes.count(head) == 3  # settle, the plan, usage fusion's walk back
    assert results.count(head) == 2  # settle, the plan


def _calling(i: int, prompt: int, tool: str) -> dict:
    """``answer(i, prompt)`` calling the tool ``tool`` instead of ``Read``."""
    out = answer(i, prompt)
    out["content"][-1]["name"] = tool
    return out


def test_render_defaults_are_not_made_again_for_a_tool_the_configuration_does_not_declare(
    tmp_path, monkeypatch
):
    """Each turn calls a tool not called before.  With declarations configured, the
    tools called are not what the request declares: the render defaults made once the
    session's setup is recorded serve every later request (``session_defaults`` is
    not asked again because another tool was called)."""
    import ctxrules.requests as requests_module

    made: list[list[str]] = []
    real = requests_module.session_defaults

    def counted(*args, **kwargs):
        made.append(list(kwargs.get("used_tools") or ()))
        return real(*args, **kwargs)

    monkeypatch.setattr(requests_module, "session_defaults", counted)
    store = open_store(tmp_path / "store")
    sid = store.create_session().id
    engine = Engine(store, CONFIG, pipeline=PIPELINE)
    prep = engine.prepare(sid, "read the modules", now=1e9)
    bodies, counts = [], []
    for i in range(4):
        engine.record(prep, _calling(i, prep.tokens.estimate, f"T{i}"), now=1e9 + 2 * i + 1)
        prep = engine.prepare(sid, tool_results=[ToolResult(f"r{i}", "x")], now=1e9 + 2 * i + 2)
        bodies.append(prep.body)
        counts.append(len(made))
    # The tools called did grow (what the defaults were asked with before the change).
    assert sorted(engine._tool_names(sid)) == ["T0", "T1", "T2", "T3"]
    store.close()
    # (The first answer records the engine's setup in the session's metadata, which
    # the defaults read: from the second turn on only the tools called change.)
    assert counts[1:] == [counts[0]] * 3
    assert [[t["name"] for t in b["tools"]] for b in bodies] == [["Read"]] * 4
