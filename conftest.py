"""Fixtures shared by tests/ and benches/: the corpus of real sessions and a clean plugin state.

Benchmarks run once as correctness checks under ``make test`` (``--benchmark-disable``
is in addopts) and for real under ``make bench``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
#: Copies of the recorded sessions the tests and benchmarks read (sources: its SOURCES.md).
CORPUS = REPO / "tests" / "data" / "corpus"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The real recorded sessions in tests/data/corpus (never edited)."""
    return CORPUS


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch):
    """Reset the plugin manager before and after a test that changes what loads."""
    from ctxrules import plugins

    plugins.reset()
    yield monkeypatch
    plugins.reset()
