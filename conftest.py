"""Fixtures shared by tests/ and benches/: the corpus of real sessions and a clean plugin state.

Benchmarks run once as correctness checks under ``make test`` (``--benchmark-disable``
is in addopts) and for real under ``make bench``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
CORPUS = Path(os.environ.get("CTXRULES_CORPUS", REPO.parent / "shared" / "corpus")).resolve()


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The real recorded sessions of ../shared/corpus (never edited)."""
    if not CORPUS.is_dir():
        pytest.fail(f"corpus not found at {CORPUS}; set CTXRULES_CORPUS")
    return CORPUS


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch):
    """Reset the plugin manager before and after a test that changes what loads."""
    from ctxrules import plugins

    plugins.reset()
    yield monkeypatch
    plugins.reset()
