"""Benchmark fixtures: the corpus of real sessions, shared with the tests.

Benchmarks run once as correctness checks under ``make test`` (``--benchmark-disable``
is in addopts) and for real under ``make bench``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("CTXRULES_CORPUS", REPO.parent / "shared" / "corpus"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The real recorded sessions of ../shared/corpus (never edited)."""
    if not CORPUS.is_dir():
        pytest.fail(f"corpus not found at {CORPUS}; set CTXRULES_CORPUS")
    return CORPUS
