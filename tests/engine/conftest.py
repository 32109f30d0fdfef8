"""Fixtures for the turn-engine tests: a fresh in-memory store and a quiet configuration
(no context sources, so bodies hold exactly what the test gives)."""

from __future__ import annotations

import itertools

import pytest

from ctxrules.context_sources import SourcesConfig
from ctxrules.store import open_store
from ctxrules.store.memory import forget

#: Sources off: git status, instruction files and the date would add text of the machine.
QUIET = SourcesConfig(git_status=False, instruction_files=False, date=False)
_names = itertools.count()


@pytest.fixture
def store():
    """An empty in-memory store, forgotten after the test."""
    name = f"memory:engine-{next(_names)}"
    st = open_store(name)
    yield st
    st.close()
    forget(name)
