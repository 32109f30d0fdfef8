"""The walk back from a head to the last measured request (usage fusion) remembers where
it ended from each node it passed: whatever order the heads are asked in, on whatever
tree, it finds what walking the whole way back node by node finds — within
``MEASUREMENT_LOOKBACK`` nodes, stopping at a compaction or the first node."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxrules import dag
from ctxrules.engine import Engine, EngineConfig
from ctxrules.engine.fusion import MEASUREMENT_LOOKBACK
from ctxrules.store import MemoryStore

#: Each new node: (index of its predecessor among the earlier ones, counted back from the
#: newest; what it is).
#: Mostly nodes without a measurement, so walks longer than the lookback come up.
KINDS = st.sampled_from(["user"] * 40 + ["answer", "measured", "compaction"])
TREES = st.lists(st.tuples(st.integers(0, 3), KINDS), min_size=1, max_size=3 * 64)


def _walked(engine: Engine, head: str) -> tuple[str, int] | None:
    """The specification: node by node from ``head``, at most the lookback."""
    at: str | None = head
    for _ in range(MEASUREMENT_LOOKBACK):
        if at is None:
            return None
        node = engine.store.get_node(at)
        if node.metadata.get("compaction") is not None:
            return None
        usage = node.metadata.get("usage")
        if node.role == "assistant" and usage and usage["input_tokens"] > 0:
            return node.id, usage["input_tokens"]
        at = node.predecessor
    return None


def _tree(store: MemoryStore, sid: str, shape: list[tuple[int, str]]) -> list[str]:
    ids: list[str] = []
    for i, (back, kind) in enumerate(shape):
        predecessor = ids[-1 - min(back, len(ids) - 1)] if ids else None
        metadata: dict = {}
        role = "user"
        if kind in ("answer", "measured"):
            role = "assistant"
        if kind == "measured":
            metadata["usage"] = {"input_tokens": 100 + i, "output_tokens": 5}
        if kind == "compaction":
            metadata["compaction"] = {"trigger": "manual"}
        node = dag.append(store, sid, role, f"node {i}", predecessor=predecessor, metadata=metadata)
        ids.append(node.id)
    return ids


@settings(max_examples=60, deadline=None)
@given(TREES, st.randoms(use_true_random=False))
def test_the_remembered_walk_finds_what_the_whole_walk_finds(shape, rnd):
    store = MemoryStore()
    sid = store.create_session().id
    ids = _tree(store, sid, shape)
    engine = Engine(store, EngineConfig(provider="anthropic"))
    order = ids * 2
    rnd.shuffle(order)  # heads asked in any order, each twice
    for head in order:
        found = engine._last_measurement(sid, head)
        got = None if found is None else (found[0].id, found[1])
        assert got == _walked(engine, head), head


def test_a_long_chain_without_measurements_finds_none_past_the_lookback():
    store = MemoryStore()
    sid = store.create_session().id
    n = 3 * MEASUREMENT_LOOKBACK
    ids = _tree(store, sid, [(0, "measured")] + [(0, "user")] * n)
    # Oldest first (each walk ends at a remembered node) and newest first (each walks
    # the whole lookback), each with a new engine, then both orders on one.
    for orders in ([ids], [list(reversed(ids))], [ids[::-1], ids]):
        engine = Engine(store, EngineConfig(provider="anthropic"))
        for head in [h for order in orders for h in order]:
            found = engine._last_measurement(sid, head)
            within = ids.index(head) < MEASUREMENT_LOOKBACK
            assert (found is not None) == within, ids.index(head)
            if found is not None:
                assert found[0].id == ids[0]
