"""The engine renders each session's requests incrementally: every prepared body is the
one a full render of the same commit and options gives, and most of it was copied from
the session's previous request.

A spy around the provider's ``render`` renders each request the engine prepares a
second time without the session's renderer and compares the two (body, breakdown,
estimate); the renderer's counters say how much was copied.
"""

from __future__ import annotations

import pytest
from tests.engine.scripted import CONFIG, answer

from ctxrules.commit import Pipeline
from ctxrules.config import PipelineConfig
from ctxrules.engine import Engine, ToolResult
from ctxrules.providers import Provider
from ctxrules.store import MemoryStore


class Spy:
    """Each incremental render, checked against the same request rendered whole."""

    def __init__(self, provider: Provider) -> None:
        self.real = provider.render
        self.renderers: set[int] = set()
        self.calls = 0
        self.bytes = 0

    def __call__(self, commit, options, *, estimate=False, renderer=None):
        got = self.real(commit, options, estimate=estimate, renderer=renderer)
        alone = self.real(commit, options, estimate=estimate)
        assert got == alone
        assert got.estimate == alone.estimate
        assert renderer is not None
        self.renderers.add(id(renderer))
        self.calls += 1
        self.bytes += len(got.body)
        return got


@pytest.mark.parametrize("preset", ["default", "aggressive"])
def test_each_prepared_request_is_its_full_render_made_from_the_last(monkeypatch, preset):
    store = MemoryStore()
    engine = Engine(store, CONFIG, pipeline=Pipeline.from_config(PipelineConfig.preset(preset)))
    spy = Spy(engine.provider)
    monkeypatch.setattr(engine.provider, "render", spy)
    sessions = [store.create_session().id for _ in range(2)]
    for sid in sessions:
        prep = engine.prepare(sid, "read the modules", now=1e9)
        engine.record(prep, answer(0, 100, call=True), now=1e9 + 1)
    for i in range(1, 12):
        for sid in sessions:  # the sessions take turns: each keeps its own renderer
            results = [ToolResult(f"r{i - 1}", f"module {i}: " + "def f(): pass\n" * 60)]
            prep = engine.prepare(sid, tool_results=results, now=1e9 + 2 * i)
            engine.record(prep, answer(i, 100, call=i < 11), now=1e9 + 2 * i + 1)
    assert spy.calls == 2 * 12
    assert len(spy.renderers) == 2
    renderers = [engine._renderer(sid) for sid in sessions]
    assert {id(r) for r in renderers} == spy.renderers
    renders = sum(r.stats[0] for r in renderers)
    reused = sum(r.stats[1] for r in renderers)
    assert renders == spy.calls
    # Each request appends a turn to the last: most of the bytes were copied under the
    # default rules; the aggressive ones age older results each turn, so less is.
    assert reused > spy.bytes // (2 if preset == "default" else 4), (reused, spy.bytes)


def test_a_provider_without_a_wire_format_renders_without_one():
    store = MemoryStore()
    engine = Engine(store, CONFIG)
    engine.provider = Provider()  # the base class: no built-in wire
    assert engine._renderer("s") is None
