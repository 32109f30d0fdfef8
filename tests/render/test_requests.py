"""``ctxrules.requests``: the request of an answer, the next request, the previous one."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from tests.corpus import CORPUS

from ctxrules import dag
from ctxrules.config import PipelineConfig
from ctxrules.errors import RenderError
from ctxrules.importers import import_paths
from ctxrules.model import TextBlock, ToolUseBlock
from ctxrules.providers import get_provider
from ctxrules.render import render
from ctxrules.requests import (
    compare_usage,
    explain_request,
    next_request,
    previous_request,
    recorded_usage,
    request_for,
)
from ctxrules.situation import MAIN_SITUATION
from ctxrules.store import open_store

SUBAGENTS = "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def test_recorded_usage_reads_both_shapes():
    anthropic = get_provider("anthropic")
    # OpenHands records LiteLLM's OpenAI-style usage: prompt_tokens include the cache.
    litellm_style = {
        "prompt_tokens": 3601,
        "completion_tokens": 1142,
        "prompt_tokens_details": {"cached_tokens": 3435},
        "cache_creation_input_tokens": 160,
        "cache_read_input_tokens": 3435,
    }
    u = recorded_usage(anthropic, litellm_style)
    assert u is not None
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens) == (6, 3435, 160)
    assert u.prompt_tokens == 3601 and u.output_tokens == 1142
    native = {
        "input_tokens": 3,
        "cache_read_input_tokens": 15550,
        "cache_creation_input_tokens": 304,
    }
    v = recorded_usage(anthropic, native)
    assert v is not None and v.prompt_tokens == 15857
    assert recorded_usage(anthropic, None) is None


@pytest.fixture
def subagents(corpus: Path, tmp_path: Path):
    store = open_store(tmp_path / "s")
    (res,) = import_paths(store, [str(corpus / SUBAGENTS)])
    return store, res.id


def _frames(store, sid):
    """Answers with usage, grouped by the first node of their frame."""
    out: dict[str, list] = {}
    for n in store.nodes(sid):
        if n.role != "assistant" or not n.metadata.get("usage"):
            continue
        x = n
        while x.predecessor is not None:
            x = store.get_node(x.predecessor)
        out.setdefault(x.id if x.caller is not None else "main", []).append(n)
    return out


def test_the_first_request_of_a_subagent(subagents):
    store, sid = subagents
    frames = _frames(store, sid)
    subs = [k for k in frames if k != "main"]
    assert len(subs) == 2
    first, second = frames[subs[0]][:2]
    assert request_for(store, sid, first.id).situation == ""  # none unless asked for
    req = request_for(store, sid, first.id, situation=True)
    # Only the sub-agent's first message, in the sub-agent's own frame.
    assert [it.source_node_id for it in req.commit.items] == [subs[0]]
    assert req.situation and req.situation != MAIN_SITUATION
    body = json.loads(render(req.commit, "anthropic", situation=req.situation).body)
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert previous_request(store, req) is None  # the frame starts here
    nxt = request_for(store, sid, second.id, situation=True)
    before = previous_request(store, nxt)
    assert before is not None and before.answer == first.id
    assert nxt.situation == req.situation == before.situation  # one frame, one text
    assert nxt.sent_at >= before.sent_at


def test_the_next_request_at_a_user_turn(tmp_path):
    store = open_store(tmp_path / "s")
    s = dag.create_session(store)
    dag.append(store, s.id, "user", "first question", created_at=100.0)
    a = dag.append(store, s.id, "assistant", "first answer", created_at=110.0)
    u = dag.append(store, s.id, "user", "second question", created_at=200.0)
    req = next_request(store, s.id, now=205.0)
    assert req.commit.head_node_id == u.id and req.answer is None and req.sent_at == 205.0
    before = previous_request(store, req)
    assert before is not None and before.answer == a.id and before.sent_at == 100.0
    ex = explain_request(store, req, "anthropic")
    assert ex["previous_request"]["for_node"] == a.id
    assert ex["cache"]["elapsed_seconds"] == 105.0
    # At the answer itself there is no next request.
    with pytest.raises(RenderError, match=f"--for {a.id}"):
        next_request(store, s.id, a.id, now=120.0)


def test_an_unanswered_tool_call_is_no_next_request(tmp_path):
    store = open_store(tmp_path / "s")
    s = dag.create_session(store)
    dag.append(store, s.id, "user", "list files", created_at=1.0)
    dag.append(
        store,
        s.id,
        "assistant",
        [TextBlock(text="looking"), ToolUseBlock(id="c1", name="ls", input={})],
        created_at=2.0,
    )
    with pytest.raises(RenderError, match="prefill"):
        next_request(store, s.id, now=3.0)


def _replay(tmp_path: Path, rel: str):
    store = open_store(tmp_path)
    (res,) = import_paths(store, [str(CORPUS / rel)], format="claude-code")
    return compare_usage(store, res.id, "anthropic", config=PipelineConfig.preset("off"))


def test_a_model_switch_starts_a_segment_and_reads_no_cache(tmp_path: Path):
    rows = _replay(tmp_path, "claude-code-jsonl/entirecli/ec_38b74f08e3_0_full.jsonl")
    main = [r for r in rows if r.frame == "main"]
    switches = [b for a, b in itertools.pairwise(main) if a.model != b.model]
    assert switches, "the transcript switches models"
    for r in switches:
        # A new segment: its unrecorded prefix estimated from this first request, and
        # no cache read predicted from the other model's.
        assert r.first_in_frame and r.segment > 0 and r.input_tokens == r.recorded_input
        assert r.cache_read_tokens == 0


def test_a_compaction_starts_a_segment(tmp_path: Path):
    rows = _replay(tmp_path, "claude-code-jsonl/entirecli/a6_e4c2a0fbd1_0_full.jsonl")
    main = [r for r in rows if r.frame == "main"]
    firsts = [r for r in main if r.first_in_frame]
    assert len(firsts) >= 2 and {r.segment for r in firsts} == set(range(len(firsts)))
    # After the boundary the prefix is the re-injected content's own, not the first
    # segment's.
    assert firsts[1].prefix_tokens != firsts[0].prefix_tokens
    later = [r for r in main if r.segment > 0 and not r.first_in_frame]
    assert later and all(abs(r.input_tokens / r.recorded_input - 1) < 0.10 for r in later)
