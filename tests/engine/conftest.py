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


def grep_engine(provider: str, preset: str, model: str | None = None):
    """An engine over a memory store holding session ``s1`` that asks where the
    handlers are (at ``GREP_T0``): the start of a grep session (``grep_turn``)."""
    from ctxrules import dag
    from ctxrules.config import PipelineConfig
    from ctxrules.engine import Engine, EngineConfig
    from ctxrules.store import MemoryStore

    store = MemoryStore()
    config = EngineConfig(provider=provider, model=model, sources=QUIET)
    engine = Engine(store, config, pipeline=PipelineConfig.preset(preset))
    store.create_session(session_id="s1", metadata={})
    dag.append(store, "s1", "user", "Where are the handlers?", node_id="u0", created_at=GREP_T0)
    return engine


GREP_T0 = 1_767_225_600.0


def grep_turn(store, session: str, k: int, *, at: float, name: str = "") -> None:
    """Append the k-th turn of a grep session: an answer ``name`` (``""``: unnamed) calling grep at
    ``at + 1``, and its output (some 1,300 tokens, distinct in each turn) at ``at + 2``."""
    from ctxrules import dag
    from ctxrules.model import TextBlock, ToolUseBlock

    call = ToolUseBlock(id=f"t{k}", name="grep", input={"pattern": f"pkg{k}"})
    text = [TextBlock(text=f"Looking at pkg{k}."), call]
    dag.append(store, session, "assistant", text, name=name, node_id=f"a{k}", created_at=at + 1)
    output = "\n".join(
        f"src/pkg{k}/module_{i}.py:{i}: def handler_{k}_{i}(request): return {i}" for i in range(60)
    )
    meta = {"tool_use_id": f"t{k}"}
    dag.append(
        store,
        session,
        "tool",
        output,
        name="grep",
        caller=f"a{k}",
        metadata=meta,
        node_id=f"r{k}",
        created_at=at + 2,
    )


_names = itertools.count()


@pytest.fixture
def store():
    """An empty in-memory store, forgotten after the test."""
    name = f"memory:engine-{next(_names)}"
    st = open_store(name)
    yield st
    st.close()
    forget(name)
