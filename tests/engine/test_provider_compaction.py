"""The agent loop with a provider that compacts on its side: ``record`` keeps the
compaction block on the answer node, and the next ``prepare`` sends it back to that
vendor, with nothing before it (docs/provider-compaction.md)."""

from __future__ import annotations

import json

from ctxrules import dag
from ctxrules.engine import Engine, EngineConfig
from ctxrules.model import CompactionBlock

from .conftest import QUIET

COMPACTION = {"type": "compaction", "content": "Summary: the header is done.", "signature": "c2ln"}


def _answer(*content: dict, prompt: int = 100) -> dict:
    return {
        "id": "msg_x",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": list(content),
        "stop_reason": "end_turn",
        "usage": {"input_tokens": prompt, "output_tokens": 5},
    }


def test_a_compaction_answer_is_kept_and_the_next_request_starts_at_it(store):
    engine = Engine(store, EngineConfig(sources=QUIET, model="claude-sonnet-4-5"), pipeline=None)
    s = dag.create_session(store).id
    first = engine.prepare(s, "build the header " * 300, now=1.0)
    engine.record(first, _answer({"type": "text", "text": "header built"}), now=2.0)
    second = engine.prepare(s, "now the footer", now=3.0)
    done = engine.record(
        second, _answer(COMPACTION, {"type": "text", "text": "footer next"}), now=4.0
    )
    assert isinstance(done.node.output[0], CompactionBlock)
    third = engine.prepare(s, "go", now=5.0)
    body = json.loads(third.request.body)
    assert body["messages"][1]["content"][0] == COMPACTION
    assert body["messages"][1]["content"][1]["text"] == "footer next"
    assert "build the header" not in json.dumps(body)
    # The old turns are neither sent nor counted.
    assert third.tokens.estimate < second.tokens.estimate / 4
