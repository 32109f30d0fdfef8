"""The rules replay is honest: the recorded usage is used only for the request it
measured, ``off`` replays the recording, each request is priced at its own model, a
compaction boundary replays, and the tokens saved per rule add up exactly.

Each session is written out here as the recording a transcript would give (nodes with
their usage), so the figures that matter are known: the bugs these tests pin were
found on real Claude Code transcripts (issue 21), where the same happened at 150K
tokens."""

from __future__ import annotations

from typing import Any

from ctxrules.batch import ReplayOptions
from ctxrules.batch.requests import SessionData
from ctxrules.batch.session import replay_session
from ctxrules.config import PipelineConfig
from ctxrules.model import Node, TextBlock, ToolResultBlock, ToolUseBlock

T0 = 1_767_225_600.0


class Recording:
    """A recorded conversation, node by node (ids, times and edges as an importer
    makes them)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.last_turn: str | None = None

    def _add(self, role: str, output: Any, **kw: Any) -> Node:
        n = len(self.nodes)
        node = Node(id=f"n{n:03d}", seq=n, created_at=T0 + 10 * n, role=role, output=output, **kw)
        self.nodes.append(node)
        return node

    def _conversation(self) -> str | None:
        return next((c.id for c in reversed(self.nodes) if c.caller is None), None)

    def user(self, text: str) -> Node:
        return self._add("user", text, predecessor=self._conversation())

    def answer(
        self, text: str, *, model: str, usage: dict[str, int] | None = None, call: str = ""
    ) -> Node:
        blocks: list[Any] = [TextBlock(text=text)]
        if call:
            blocks.append(ToolUseBlock(id=f"tu_{len(self.nodes)}", name=call, input={"n": 1}))
        meta = {"usage": usage} if usage is not None else {}
        node = self._add(
            "assistant", blocks, name=model, predecessor=self._conversation(), metadata=meta
        )
        self.last_turn = node.id
        return node

    def result(self, text: str) -> Node:
        turn = self.nodes[-1]
        (use,) = [b for b in turn.output if isinstance(b, ToolUseBlock)]
        return self._add(
            "tool",
            [ToolResultBlock(tool_use_id=use.id, content=text)],
            name=use.name,
            input=use.input,
            caller=turn.id,
            metadata={"tool_use_id": use.id},
        )

    def boundary(self, summary: str) -> Node:
        previous = self._conversation()
        # As the importers record a transcript's own compaction: nothing kept after it.
        record = {
            "trigger": "imported",
            "previous": previous,
            "summary": summary,
            "keep_open_turn": False,
        }
        return self._add("system", "", predecessor=previous, metadata={"compaction": record})

    def data(self, sid: str = "s_test") -> SessionData:
        return SessionData(id=sid, metadata={}, nodes=tuple(self.nodes))


def _replay(rec: Recording, preset: str = "default", **rules: dict[str, Any]) -> dict[str, Any]:
    config = PipelineConfig.preset(preset)
    for rule, params in rules.items():
        config = config.with_params(rule, **params)
    record = replay_session(rec.data(), ReplayOptions.of(config))
    assert "error" not in record, record.get("error")
    assert record["violations"] == []
    return record


def _chat(prompt: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": 20}


def _big_log() -> Recording:
    """gpt-4 (8K window: the engine compacts at 4,915 tokens) reads a log of about
    4,400 tokens, then works on with small results; the agent's requests were measured
    at about 5,000 tokens each, as they carried the whole log."""
    rec = Recording()
    rec.user("Why did the nightly job fail? Read the log.")
    rec.answer("Reading the log.", model="gpt-4", usage=_chat(60), call="read_log")
    rec.result("".join(f"line {i:04d} step ok\n" for i in range(620)))
    rec.answer(
        "The log ends cleanly; checking the config.",
        model="gpt-4",
        usage=_chat(4950),
        call="read_config",
    )
    rec.result("retries = 3")
    rec.answer("Checking the schedule.", model="gpt-4", usage=_chat(5000), call="read_cron")
    rec.result("0 3 * * *")
    rec.answer("It ran at 03:00 and passed: nothing failed.", model="gpt-4", usage=_chat(5050))
    return rec


def test_recorded_usage_does_not_inflate_the_rules_request():
    # Aging cuts the log once its turn leaves the window: the rules' requests are a few
    # hundred tokens.  The usage measured the agent's requests, with the log: fused with
    # the rules' own estimate of those requests (today's code) it made the engine see
    # 5,000 tokens and compact a request that had shrunk to a few hundred.
    # (Not cache-aware: the default's aging waits for a rewrite that pays, and this
    # test is about what the engine sees once the log is aged.)
    aging = {"tail_turns": 1, "step_turns": 1, "cache_aware": False}
    record = _replay(_big_log(), tool_aging=aging)
    rules = record["rules"]
    assert rules["compactions"] == 0
    assert set(rules["levels"]) <= {"ok", "warn"}  # the log itself is newest input once
    assert rules["saved_by_rule"]["tool_aging"] > 5_000


def test_off_replays_the_recording():
    # With no rules the engine does not compact either: the recording is what was sent
    # (today's code compacted it, and `--preset off` reported tokens saved).
    record = _replay(_big_log(), "off")
    plain, rules = record["plain"], record["rules"]
    assert rules["saved_by_rule"] == {} and rules["compactions"] == 0
    for key in ("prompt_tokens", "item_tokens", "cache_read_tokens", "cache_write_tokens"):
        assert rules[key] == plain[key], key


def _anthropic(prompt: int) -> dict[str, int]:
    return {"input_tokens": prompt, "output_tokens": 30}


def _two_models(first: str, second: str) -> Recording:
    rec = Recording()
    rec.user("Rename the helper in utils.py.")
    rec.answer("Looking at it.", model=first, usage=_anthropic(900), call="Read")
    rec.result("def helper():\n    return 1\n" * 40)
    rec.answer("Renamed it.", model=second, usage=_anthropic(1400))
    return rec


def test_each_request_is_priced_at_the_model_that_answered_it():
    sonnet, opus = "claude-sonnet-4-5", "claude-opus-4-1"
    costs = {
        pair: _replay(_two_models(*pair), "off")["plain"]["cost_usd"]
        for pair in ((sonnet, sonnet), (sonnet, opus), (opus, opus))
    }
    # Opus costs more per token: a session that switched to it costs more than one that
    # did not, and less than one answered by opus throughout (today's code priced the
    # whole session at one model).
    assert costs[(sonnet, sonnet)] < costs[(sonnet, opus)] < costs[(opus, opus)]


def _compacted() -> Recording:
    """A transcript that compacted itself mid-turn: the request after the boundary
    carries only the summary (Claude Code's auto-compaction)."""
    rec = Recording()
    rec.user("Fix the flaky test in tests/test_io.py.")
    rec.answer("Reading it.", model="claude-sonnet-4-5", usage=_anthropic(800), call="Read")
    rec.result("def test_read():\n    assert read('a.txt') == 'a'\n" * 60)
    rec.boundary("Summary: the test reads a.txt; the fix is to create it in a fixture.")
    rec.answer("Adding the fixture.", model="claude-sonnet-4-5", usage=_anthropic(300), call="Edit")
    rec.result("ok")
    rec.answer("Done.", model="claude-sonnet-4-5", usage=_anthropic(350))
    return rec


def test_a_compaction_boundary_replays():
    # The request right after the boundary ends with the summary: the next request is
    # due (today's code refused it as "the model's answer" and the session failed).
    for preset in ("off", "default", "aggressive"):
        record = _replay(_compacted(), preset)
        assert record["requests"] == 3
        assert record["recorded_compactions"] == 1


def test_the_savings_add_up_exactly_around_a_recorded_compaction():
    for preset in ("off", "default", "aggressive"):
        record = _replay(_compacted(), preset)
        saved = record["rules"]["saved_by_rule"]
        assert (
            sum(saved.values()) == record["plain"]["item_tokens"] - record["rules"]["item_tokens"]
        )
        if preset == "off":
            assert saved == {}  # the recorded summary is in both replays: nobody's saving
