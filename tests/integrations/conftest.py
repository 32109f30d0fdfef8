"""Fixtures of the integration tests: the engine tests' in-memory ``store``, and the
rules the adapters' tests shape with."""

from __future__ import annotations

from tests.presets import EVERY_RULE

from ctxrules.config import PipelineConfig
from engine.conftest import store  # noqa: F401 - a fixture, found here by pytest

#: Aging alone, at every turn: the tests' tool outputs are made of identifiers only
#: (``def f0 … f59``), so a stub naming them would be as long as the output; stubs here
#: show the head and tail only, and nothing is folded into a summary.
AGING = PipelineConfig(
    pipeline=("tool_aging",),
    rules={"tool_aging": {"tail_turns": 1, "step_turns": 1, "stub_identifier_chars": 0}},
)
#: Everything at once (``aggressive``'s budgets without the cache ledger, so folding
#: does not wait for a paying rewrite: tests/presets.py): a long past is folded.
FOLDING = EVERY_RULE
