"""Small inputs for tune tests: three short corpus transcripts (two Claude Code
sessions and an OpenHands trajectory, each one session)."""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent.parent / "data" / "corpus"

#: Files each holding one session; small enough to replay many times per test.
SMALL = (
    CORPUS / "claude-code-jsonl" / "ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    CORPUS / "claude-code-jsonl" / "reliability_coverage-test-fix.jsonl",
    CORPUS / "openhands-trajectory" / "basic_gui_mode.json",
)


@pytest.fixture(scope="session")
def sources() -> list[str]:
    """Two of the small transcripts."""
    return [str(p) for p in SMALL[:2]]


@pytest.fixture(scope="session")
def three() -> list[str]:
    """All three small transcripts."""
    return [str(p) for p in SMALL]
