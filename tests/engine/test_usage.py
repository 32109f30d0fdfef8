"""The usage record and the breakdown: exact semantics and exact sums."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxrules.engine import EngineConfig, UsageRecord, breakdown, budget, output_reserve
from ctxrules.engine.usage import UNACCOUNTED_RATIO, scale_to
from ctxrules.providers import resolve_model


def test_the_record_has_exactly_the_documented_keys():
    m = UsageRecord.measured(200_000, 1_100, 1_000)
    assert m.as_dict() == {
        "window": 200_000,
        "total_used": 1_100,
        "basis": "measured",
        "estimated": 1_000,
        "calibration": 1.1,
    }
    e = UsageRecord.estimate(200_000, 900)
    assert e.as_dict() == {
        "window": 200_000,
        "total_used": 900,
        "basis": "estimated",
        "estimated": 900,
    }


@given(
    parts=st.dictionaries(
        st.sampled_from(["system_prompt", "tools", "messages_full", "messages_aged"]),
        st.floats(0, 1e6),
        min_size=1,
    ),
    total=st.integers(0, 2_000_000),
    window=st.integers(1_000, 1_000_000),
    reserve_share=st.floats(0.01, 0.5),
    compact_at=st.floats(0.1, 1.0),
    estimated=st.one_of(st.none(), st.integers(1, 2_000_000)),
)
def test_the_breakdown_adds_up_to_the_window_exactly(
    parts, total, window, reserve_share, compact_at, estimated
):
    reserve = max(1, int(window * reserve_share))
    compact = int((window - reserve) * compact_at)
    b = breakdown(
        window=window,
        total_used=total,
        used_parts=parts,
        output_reserve=reserve,
        compact_tokens=compact,
        estimated=estimated,
    )
    used = sum(c.tokens for c in b.categories if c.kind == "used")
    assert used == total
    assert all(c.tokens >= 0 for c in b.categories)
    assert sum(c.tokens for c in b.categories) == window + b.over
    assert b.over == max(0, total - window)
    buffer = next(c for c in b.categories if c.name == "compaction_buffer")
    free = next(c for c in b.categories if c.name == "free")
    if total <= compact:  # below the threshold: the buffer is its whole room, never "used"
        assert buffer.tokens == window - reserve - compact
        assert free.tokens == compact - total


def test_a_bill_far_above_our_count_is_shown_as_unaccounted():
    parts = {"system_prompt": 100.0, "messages_full": 900.0}
    b = breakdown(
        window=200_000,
        total_used=5_000,
        used_parts=parts,
        output_reserve=16_000,
        compact_tokens=100_000,
        estimated=1_000,
    )
    cats = {c.name: c.tokens for c in b.categories}
    assert cats["system_prompt"] == 100 and cats["messages_full"] == 900
    assert cats["unaccounted"] == 4_000
    near = breakdown(
        window=200_000,
        total_used=int(1_000 * UNACCOUNTED_RATIO),
        used_parts=parts,
        output_reserve=16_000,
        compact_tokens=100_000,
        estimated=1_000,
    )
    assert "unaccounted" not in {c.name for c in near.categories}


def test_scale_to_is_proportional_and_exact():
    assert scale_to({"a": 1.0, "b": 1.0, "c": 1.0}, 10) == {"a": 4, "b": 3, "c": 3}
    assert scale_to({"a": 0.0, "b": 0.0}, 5) == {"a": 0, "b": 5}
    assert scale_to({}, 5) == {}


def test_levels_follow_the_thresholds_up_and_down():
    profile = resolve_model("anthropic:claude-sonnet-4-5")
    usable = profile.context_window - output_reserve(profile, EngineConfig())
    cfg = EngineConfig()
    assert budget(profile, cfg, system=0, tools=0, used=int(usable * 0.5)).level == "ok"
    assert budget(profile, cfg, system=0, tools=0, used=int(usable * 0.7)).level == "warn"
    assert budget(profile, cfg, system=0, tools=0, used=int(usable * 0.85)).level == "compact"
    assert budget(profile, cfg, system=0, tools=0, used=int(usable * 0.96)).level == "critical"
    raised = EngineConfig(warn_at=0.9, compact_at=0.95, critical_at=0.99)
    assert budget(profile, raised, system=0, tools=0, used=int(usable * 0.85)).level == "ok"
    lowered = EngineConfig(warn_at=0.2, compact_at=0.3, critical_at=0.4)
    assert budget(profile, lowered, system=0, tools=0, used=int(usable * 0.35)).level == "compact"


@pytest.mark.parametrize(
    ("spec", "reserve"),
    [
        ("anthropic:claude-sonnet-4-5", 16_384),
        ("openai-chat:gpt-4o", 16_384),
    ],
)
def test_the_output_reserve_defaults_within_the_model(spec, reserve):
    profile = resolve_model(spec)
    expected = min(reserve, profile.max_output_tokens, profile.context_window // 4)
    assert output_reserve(profile, EngineConfig()) == expected
    assert output_reserve(profile, EngineConfig(output_reserve=1_000)) == 1_000
    b = budget(profile, EngineConfig(), system=10, tools=20, used=1_000)
    assert b.system + b.tools + b.history == b.used
    assert b.usable == b.window - b.output_reserve
