"""The turn engine's loop: ``prepare`` → send → ``record``, checked against real traffic.

The oracle is the recorded cassettes: an agent's conversation is replayed through the
engine turn by turn — the user's message, then each recorded response handed to
``record`` and its tool results to ``prepare`` — and every request the engine renders
must carry the turns the agent really sent next (read from the recorded request bodies
with plain YAML), and every recorded usage must become the measured record.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from ctxrules.engine import Engine, EngineConfig, ToolResult
from ctxrules.errors import DagError, RenderError, ValidationError
from ctxrules.model import ToolSpec
from ctxrules.render import tool_specs
from providers.conftest import CORPUS_CASSETTES, load_cassette

from .conftest import QUIET


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _anthropic_turns(body: dict) -> list[dict]:
    """Messages with string content spelt as one text block, no cache markers."""
    out = []
    for m in _strip(body["messages"]):
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        # ``is_error: false`` is the default: sent or not, it is the same request.
        content = [
            {k: v for k, v in b.items() if not (k == "is_error" and v is False)} for b in content
        ]
        out.append({"role": m["role"], "content": content})
    return out


def _openai_turns(body: dict) -> list[dict]:
    out = []
    for m in _strip(body["messages"]):
        turn = {"role": m["role"], "content": m.get("content") or None}
        if m.get("tool_calls"):
            turn["tool_calls"] = [
                (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in m["tool_calls"]
            ]
        if m.get("tool_call_id"):
            turn["tool_call_id"] = m["tool_call_id"]
        out.append(turn)
    return out


TURNS = {"anthropic": _anthropic_turns, "openai-chat": _openai_turns}


def _tool_results(kind: str, request: dict, answered: set[str]) -> list[ToolResult]:
    """The tool results the agent sent in ``request`` that were not sent before."""
    out = []
    if kind == "anthropic":
        for m in request["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_result" and b["tool_use_id"] not in answered:
                    out.append(ToolResult(b["tool_use_id"], b["content"], b.get("is_error", False)))
    else:
        for m in request["messages"]:
            if m["role"] == "tool" and m["tool_call_id"] not in answered:
                out.append(ToolResult(m["tool_call_id"], m["content"]))
    return out


CONVERSATIONS = [
    ("anthropic", "anthropic/test_multiple_parallel_tool_calls.yaml", [0, 1]),
    ("anthropic", "anthropic/test_anthropic_tool_with_thinking.yaml", [0, 1]),
    ("openai-chat", "openai-chat/test_tool_search_eval_openai-chat.yaml", [0, 1, 2]),
]


@pytest.mark.parametrize(("kind", "rel", "steps"), CONVERSATIONS, ids=lambda v: str(v))
def test_a_recorded_agent_loop_is_reproduced_request_by_request(store, kind, rel, steps):
    first, _, _ = load_cassette(CORPUS_CASSETTES / rel, steps[0])
    system = first.get("system") or ""
    params = {k: first[k] for k in ("tool_choice",) if k in first}
    engine = Engine(
        store,
        EngineConfig(
            provider=kind,
            model=first["model"],
            system=system if isinstance(system, str) else "",
            tools=tool_specs(first.get("tools")),
            max_tokens=first.get("max_tokens"),
            sources=QUIET,
            cache=False,
            extra=params,
        ),
        pipeline=None,
    )
    from ctxrules import dag

    session = dag.create_session(store).id
    user = first["messages"][0]["content"]
    answered: set[str] = set()
    now = 1_767_225_600.0
    prep = None
    for n, i in enumerate(steps):
        recorded, response, _ = load_cassette(CORPUS_CASSETTES / rel, i)
        if n == 0:
            prep = engine.prepare(session, user if isinstance(user, str) else _text(user), now=now)
        else:
            results = _tool_results(kind, recorded, answered)
            answered |= {r.tool_use_id for r in results}
            prep = engine.prepare(session, tool_results=results, now=now + n)
        assert TURNS[kind](prep.body) == TURNS[kind](recorded), f"request {i}"
        assert prep.body["model"] == recorded["model"]
        assert engine.provider.validate(prep.body) == []
        done = engine.record(prep, response, now=now + n + 0.5)
        billed = engine.provider.parse_usage(response)
        assert done.usage.basis == "measured"
        assert done.usage.total_used == billed.prompt_tokens
        assert done.usage.estimated == prep.tokens.estimate
        assert done.node.predecessor == prep.head
        assert store.get_session(session).head == done.node.id


def _text(blocks: list[dict]) -> str:
    return "".join(b["text"] for b in blocks if b.get("type") == "text")


def _engine(store, **config: Any) -> Engine:
    config.setdefault("sources", QUIET)
    config.setdefault("model", "claude-sonnet-4-5")
    return Engine(store, EngineConfig(**config), pipeline=None)


def _answer(text: str = "done", *, calls=(), prompt: int | None = None) -> dict:
    content: list[dict] = [{"type": "text", "text": text}]
    content += [{"type": "tool_use", "id": cid, "name": "ls", "input": {}} for cid in calls]
    body: dict = {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
    }
    body["stop_reason"] = "tool_use" if calls else "end_turn"
    if prompt is not None:
        body["usage"] = {"input_tokens": prompt, "output_tokens": 5}
    return body


def test_usage_fusion_adds_what_changed_to_the_last_measurement(store):
    from ctxrules import dag

    engine = _engine(store, tools=(ToolSpec(name="ls"),))
    s = dag.create_session(store).id
    first = engine.prepare(s, "list the files", now=1.0)
    assert first.tokens.measured is None and first.tokens.fused == first.tokens.estimate
    billed = first.tokens.estimate + 500  # the provider read 500 more than we count
    engine.record(first, _answer(calls=["c1"], prompt=billed), now=2.0)
    second = engine.prepare(s, tool_results=[ToolResult("c1", "a.py\nb.py")], now=3.0)
    t = second.tokens
    assert t.measured == billed and t.measured_estimate == first.tokens.estimate
    assert t.fused == billed + (t.estimate - first.tokens.estimate)
    assert second.budget.used == t.fused
    assert t.calibration == pytest.approx(billed / first.tokens.estimate)


def test_the_usage_record_follows_the_graph(store):
    """Measured right after a request, estimated once the graph changed; an answer
    without usage keeps the last measurement; a model switch ends it."""
    from ctxrules import dag

    engine = _engine(store)
    s = dag.create_session(store).id
    prep = engine.prepare(s, "hello", now=1.0)
    assert engine.stats(s, now=1.0).usage.basis == "estimated"
    done = engine.record(prep, _answer(prompt=prep.tokens.estimate + 7), now=2.0)
    st = engine.stats(s, now=2.0)
    assert st.usage.as_dict() == {
        "window": st.budget.window,
        "total_used": prep.tokens.estimate + 7,
        "basis": "measured",
        "estimated": prep.tokens.estimate,
        "calibration": round((prep.tokens.estimate + 7) / prep.tokens.estimate, 4),
    }
    # Another answer without usage (a retry whose response carried none) keeps it.
    follow = engine.prepare(s, "and again?", now=3.0)
    assert engine.stats(s, now=3.0).usage.basis == "estimated"  # new input: estimated
    engine.record(follow, _answer(), now=4.0)
    kept = engine.stats(s, now=4.0).usage
    # The newest answer has no usage and new input preceded it: nothing measures now.
    assert kept.basis == "estimated"
    # Back at the measured answer (a checkout), the measurement is its own again.
    assert engine.stats(s, head=done.node.id, now=5.0).usage.basis == "measured"
    other = _engine(store, model="claude-opus-4-1")
    assert other.stats(s, head=done.node.id, now=5.0).usage.basis == "estimated"


def test_an_answer_without_usage_keeps_the_measurement_before_it(store):
    from ctxrules import dag

    engine = _engine(store)
    s = dag.create_session(store).id
    prep = engine.prepare(s, "hello", now=1.0)
    first = engine.record(prep, _answer(prompt=prep.tokens.estimate), now=2.0)
    # A continuation answer appended straight after (e.g. max_tokens hit), no usage:
    dag.append(store, s, "assistant", "…and more", predecessor=first.node.id, created_at=3.0)
    st = engine.stats(s, now=3.0)
    assert st.usage.basis == "measured" and st.usage.total_used == prep.tokens.estimate


def test_tool_results_must_answer_the_calls_waiting_at_head(store):
    from ctxrules import dag

    engine = _engine(store, tools=(ToolSpec(name="ls"),))
    s = dag.create_session(store).id
    prep = engine.prepare(s, "go", now=1.0)
    engine.record(prep, _answer(calls=["c1", "c2"]), now=2.0)
    with pytest.raises(DagError, match="no tool call 'zz'"):
        engine.prepare(s, tool_results=[ToolResult("zz", "x")], now=3.0)
    with pytest.raises(DagError, match="already has its result"):
        engine.prepare(s, tool_results=[ToolResult("c1", "x"), ToolResult("c1", "y")], now=3.0)
    assert store.children(store.get_session(s).head, session_id=s, edge="caller") == []
    # one result of two would leave c2 out of the request: refused (test_tool_calls.py)
    with pytest.raises(DagError, match=r"left without a result: c2 \(ls\)"):
        engine.prepare(s, tool_results=[ToolResult("c1", "x")], now=3.0)
    engine.prepare(s, tool_results=[ToolResult("c1", "x"), ToolResult("c2", "y")], now=3.0)
    with pytest.raises(DagError, match="already has its result"):
        engine.prepare(s, tool_results=[ToolResult("c1", "x")], now=4.0)
    with pytest.raises(ValidationError, match="either user_input or tool_results"):
        engine.prepare(s, "hi", tool_results=[ToolResult("c2", "x")], now=4.0)


def test_nothing_to_ask_at_an_answer_is_refused(store):
    from ctxrules import dag

    engine = _engine(store)
    s = dag.create_session(store).id
    with pytest.raises(DagError, match="empty"):
        engine.prepare(s, now=1.0)
    prep = engine.prepare(s, "hi", now=1.0)
    engine.record(prep, _answer(), now=2.0)
    with pytest.raises(RenderError, match="model's answer"):
        engine.prepare(s, now=3.0)
    with pytest.raises(ValidationError, match="finite"):
        engine.prepare(s, "x", now=float("nan"))


def test_the_request_is_composed_in_layers(store, tmp_path):
    from ctxrules import dag
    from ctxrules.context_sources import SourcesConfig
    from ctxrules.engine import Skill

    (tmp_path / "AGENTS.md").write_text("Always run the tests.")
    engine = _engine(
        store,
        system="You are a careful agent.",
        skills=(Skill(name="pdf", description="read PDF files"),),
        memory=("The user prefers short answers.",),
        sources=SourcesConfig(git_status=False, timezone="UTC"),
        working_directory=str(tmp_path),
    )
    s = dag.create_session(store).id
    prep = engine.prepare(s, "hi", now=1_767_225_600.0)
    texts = [b["text"] for b in prep.body["system"]]
    assert texts[0] == "You are a careful agent."
    assert "- pdf: read PDF files" in texts[1]
    assert texts[2] == "The user prefers short answers."
    assert any("Always run the tests." in t for t in texts[3:])
    assert texts[-1] == "Today's date is 2026-01-01."
    # The sources are memoised: a changed file does not move the prefix.
    (tmp_path / "AGENTS.md").write_text("Never run the tests.")
    engine.record(prep, _answer(), now=1_767_225_601.0)
    again = engine.prepare(s, "more", now=1_767_312_000.0)  # the next day
    assert [b["text"] for b in again.body["system"]] == texts
    assert prep.budget.system + prep.budget.tools + prep.budget.history == prep.budget.used


def test_references_are_read_inside_the_workspace_only(store, tmp_path):
    from ctxrules import dag

    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "app.py").write_text("print('hi')\n")
    (tmp_path / "secret.txt").write_text("do not read")
    (work / "link.txt").symlink_to(tmp_path / "secret.txt")
    (work / "big.txt").write_text("x" * 500)
    engine = _engine(store, references=True, working_directory=str(work), reference_max_chars=100)
    s = dag.create_session(store).id
    prep = engine.prepare(
        s,
        "see @src/app.py and @../secret.txt and @link.txt and @big.txt, mail me@example.com",
        now=1.0,
    )
    assert [r.mention for r in prep.references] == ["src/app.py", "big.txt"]
    assert prep.references[1].truncated and prep.references[1].chars == 100
    text = json.dumps(prep.body)
    assert "print('hi')" in text and "do not read" not in text
    node = store.get_node(prep.head)
    assert [r["mention"] for r in node.metadata["references"]] == ["src/app.py", "big.txt"]


def test_config_is_checked():
    with pytest.raises(Exception, match="thresholds out of order"):
        EngineConfig(warn_at=0.9, compact_at=0.8)
    with pytest.raises(Exception, match=r"in \(0, 1\]"):
        EngineConfig(critical_at=1.5)
    with pytest.raises(Exception, match="positive"):
        EngineConfig(output_reserve=0)
    # Thresholds go up as well as down.
    assert EngineConfig(warn_at=0.9, compact_at=0.97, critical_at=0.99).compact_at == 0.97
    assert msgspec.convert({"compact_at": 0.5, "warn_at": 0.4}, EngineConfig).compact_at == 0.5


def test_a_side_request_carries_no_history_tools_or_sources(store, tmp_path):
    from ctxrules import dag
    from ctxrules.context_sources import SourcesConfig

    (tmp_path / "AGENTS.md").write_text("project rules")
    engine = _engine(
        store,
        tools=(ToolSpec(name="ls"),),
        sources=SourcesConfig(git_status=False),
        working_directory=str(tmp_path),
    )
    s = dag.create_session(store).id
    engine.prepare(s, "a long conversation", now=1.0)
    side = json.loads(engine.side_request("Summarise.", "the text", max_tokens=300).body)
    assert side["system"] == [{"type": "text", "text": "Summarise."}]
    assert side["messages"] == [{"role": "user", "content": [{"type": "text", "text": "the text"}]}]
    assert "tools" not in side and side["max_tokens"] == 300
    assert "project rules" not in json.dumps(side)


def test_an_imported_session_is_continued_as_it_was_recorded(store, corpus):
    """The engine chooses model, tools and system as ``render`` does for the session
    (``render_defaults``): Claude Code records no declarations, so each tool the
    session called is declared; the model is the recorded one; the recorded system
    prompt is sent once (it is in the history as a system node)."""
    from ctxrules import dag
    from ctxrules.importers import import_paths

    rel = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    lines = [json.loads(x) for x in (corpus / rel).read_text().splitlines()]
    called = {
        b["name"]
        for x in lines
        if x.get("type") == "assistant" and not x.get("isSidechain")
        for b in x["message"]["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    }
    recorded = next(
        x["message"]["model"]
        for x in lines
        if x.get("type") == "assistant" and x["message"].get("model") != "<synthetic>"
    )
    (res,) = import_paths(store, [str(corpus / rel)])
    engine = Engine(store, EngineConfig(sources=QUIET), pipeline=None)
    prep = engine.prepare(res.id, "Go on.", now=1.0)
    assert prep.model == recorded == prep.body["model"]
    declared = {t["name"] for t in prep.body["tools"]}
    assert called <= declared
    # the recorded system prompt is not sent twice
    s = dag.create_session(store, metadata={"system": "You are a careful agent."}).id
    dag.append(store, s, "system", "You are a careful agent.")
    body = json.dumps(engine.prepare(s, "hi", now=1.0).body)
    assert body.count("You are a careful agent.") == 1
