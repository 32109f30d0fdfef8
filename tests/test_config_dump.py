"""``dump_config`` writes TOML that ``load_config`` reads back to the same configuration
(the parsed text is checked with ``tomllib`` itself, independently of the loader)."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxrules.commit import Pipeline
from ctxrules.config import PRESETS, PipelineConfig, dump_config, load_config
from ctxrules.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def round_trip(config: PipelineConfig, tmp_path) -> PipelineConfig:
    path = tmp_path / "ctxrules.toml"
    path.write_text(dump_config(config), encoding="utf-8")
    return load_config(path)


def same(a: PipelineConfig, b: PipelineConfig) -> None:
    assert a.pipeline == b.pipeline and a.encoding == b.encoding
    assert (a.anchor_task, a.lock_system) == (b.anchor_task, b.lock_system)
    assert (a.anchor_skip, a.anchor_skip_patterns) == (b.anchor_skip, b.anchor_skip_patterns)
    assert plain(a.rules) == plain(b.rules)
    assert Pipeline.from_config(a).version == Pipeline.from_config(b).version


def plain(rules) -> dict:
    return {
        k: {p: list(x) if isinstance(x, (list, tuple)) else x for p, x in v.items()}
        for k, v in rules.items()
    }


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_round_trips(name, tmp_path):
    config = PipelineConfig.preset(name)
    same(round_trip(config, tmp_path), config)


def test_odd_text_and_every_value_type_round_trip(tmp_path):
    config = PipelineConfig(
        pipeline=("result_cap", "tool_aging", "idle_clearing", "summarize"),
        rules={
            "idle_clearing": {
                "placeholder": 'a "quoted" \\ back\tslash\nnew line, ünïcode 🙂 and DEL \x7f',
                "idle_minutes": 2.5,
            },
            "tool_aging": {"extra_protected_tools": ("TodoWrite", "x]y"), "tail_turns": 2},
            "result_cap": {"head_ratio": 1e-05},
        },
        encoding="cl100k_base",
        anchor_task=False,
        lock_system=False,
        anchor_skip=("command",),
        anchor_skip_patterns=(r"^\[auto\]", "tab\there"),
    )
    text = dump_config(config)
    parsed = tomllib.loads(text)  # the TOML reader, not our loader
    assert (
        parsed["rules"]["idle_clearing"]["placeholder"]
        == config.rules["idle_clearing"]["placeholder"]
    )
    assert parsed["anchor_skip_patterns"] == [r"^\[auto\]", "tab\there"]
    assert parsed["rules"]["result_cap"]["head_ratio"] == 1e-05
    assert parsed["anchor_task"] is False and parsed["encoding"] == "cl100k_base"
    same(round_trip(config, tmp_path), config)


@given(
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40),
    st.floats(0.0, 1.0),
    st.integers(100, 10**12),
)
def test_any_text_and_numbers_round_trip(text, ratio, cap):
    config = PipelineConfig.preset("default").with_params(
        "result_cap", head_ratio=ratio, max_tool_result_chars=cap
    )
    config = config.with_params("idle_clearing", placeholder=text)
    parsed = tomllib.loads(dump_config(config))
    assert parsed["rules"]["idle_clearing"]["placeholder"] == text
    assert parsed["rules"]["result_cap"] == {
        "head_ratio": ratio,
        "max_tool_result_chars": cap,
        "cache_aware": True,  # the preset's
    }


def test_values_toml_cannot_hold_are_config_errors():
    lone = PipelineConfig.preset("default").with_params("idle_clearing", placeholder="\ud800")
    with pytest.raises(ConfigError, match="lone surrogate") as exc:
        dump_config(lone)
    assert exc.value.where == "rules.idle_clearing.placeholder"
    bad = PipelineConfig.preset("default").with_params("result_cap", head_ratio=float("nan"))
    with pytest.raises(ConfigError, match="cannot write"):
        dump_config(bad)
