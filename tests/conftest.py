"""Shared fixtures: the corpus location and a clean plugin state per test."""

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


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch):
    """Reset the plugin manager before and after a test that changes what loads."""
    from ctxrules import plugins

    plugins.reset()
    yield monkeypatch
    plugins.reset()
