"""The corpus of real recordings (tests/data/corpus) as its MANIFEST.json describes it.

MANIFEST.json lists every file with its source repository, commit, licence, ``kind``
(the format: ``claude-code``, ``cassette-yaml``, ``httprr``, …), ``wire`` (the provider
API of a recording's calls), counts, features and ``split`` (``fit`` or ``validation``,
by repository: constants are fitted on ``fit`` only, figures reported on
``validation``).  Tests and benchmarks pick the files they are about with ``files``
instead of walking the folder, so a file added to the corpus reaches exactly the tests
meant for its kind.

``FIRST`` is the corpus as it was before the recorded traffic of many repositories was
added: one or more files of every format the first importers read (200 tau-bench
conversations, three Claude Code transcripts, SWE-agent and OpenHands trajectories,
five pydantic-ai cassettes).  The tests that render, replay or check every request of
every session run on it: they are about the rules and renderers, and these files
exercise them fully at a cost ``make test`` can pay; the importer tests read every
file of the corpus.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["CORPUS", "ESTIMATE_MISSES", "FIRST", "RERENDER_MISSES", "entries", "files", "manifest"]

CORPUS = Path(__file__).resolve().parent / "data" / "corpus"

FIRST = (
    "claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    "claude-code-jsonl/reliability_coverage-test-fix.jsonl",
    "openai-chat-json/taubench_gpt-4o-airline.json",
    "openhands-trajectory/basic_gui_mode.json",
    "swe-agent-traj/function_calling_replace_marshmallow-code__marshmallow-1867.traj",
    "swe-agent-traj/gpt4_swe-agent__test-repo-i1.traj",
    "vcr-cassettes-yaml/anthropic/test_anthropic_cache_real_api.yaml",
    "vcr-cassettes-yaml/anthropic/test_anthropic_tool_with_thinking.yaml",
    "vcr-cassettes-yaml/anthropic/test_multiple_parallel_tool_calls.yaml",
    "vcr-cassettes-yaml/gemini/test_google_instructions_only_with_tool_calls.yaml",
    "vcr-cassettes-yaml/openai-chat/test_tool_search_eval_openai-chat.yaml",
)


@cache
def manifest() -> tuple[dict[str, Any], ...]:
    """Every MANIFEST.json entry, in its order (by path)."""
    return tuple(json.loads((CORPUS / "MANIFEST.json").read_text(encoding="utf-8")))


def _matches(value: Any, wanted: str | tuple[str, ...] | None) -> bool:
    if wanted is None:
        return True
    allowed = (wanted,) if isinstance(wanted, str) else wanted
    values = value if isinstance(value, list) else [value]
    return any(v in allowed for v in values)


def entries(
    *,
    kind: str | tuple[str, ...] | None = None,
    wire: str | tuple[str, ...] | None = None,
    split: str | None = None,
) -> list[dict[str, Any]]:
    """The MANIFEST entries of that kind, wire and split (``None``: any); a file
    recording several wires matches each of them."""
    return [
        e
        for e in manifest()
        if _matches(e["kind"], kind) and _matches(e["wire"], wire) and _matches(e["split"], split)
    ]


def files(
    *,
    kind: str | tuple[str, ...] | None = None,
    wire: str | tuple[str, ...] | None = None,
    split: str | None = None,
) -> list[Path]:
    """The paths of ``entries(kind=…, wire=…, split=…)``."""
    return [CORPUS / e["path"] for e in entries(kind=kind, wire=wire, split=split)]


#: Corpus files the estimator misses, and why (the tests that hold estimates to their
#: targets mark them as expected failures, strictly: a fix makes them fail loudly).
ESTIMATE_MISSES = {
    "test_multiple_parallel_tool_calls.yaml": "recorded under Haiku 4.5's earlier tool-use "
    "prompt: 277 of its 423 billed tokens are overhead (~264 then); the tool-use page now "
    "gives 496 and the 30 later Haiku 4.5 requests of the fit set fit 487 (+52 % here)",
}

#: Interactions (``file#i``) whose re-rendered request differs from the recorded one by
#: more than the estimate's error: the recorded body itself is within target, the
#: request ``render --explain`` rebuilds is not (the tests that hold re-rendered
#: estimates to their targets mark them strictly, as ``ESTIMATE_MISSES``).
RERENDER_MISSES = {
    "test_google_instructions_only_with_tool_calls.yaml#0": "the recorded request's only "
    "content is an empty text part, which the importer does not keep: the re-rendered "
    "request opens with the placeholder user turn instead (7 tokens the recorded body "
    "does not hold: 91 vs 83 billed; the recorded body is estimated at 84)",
}
