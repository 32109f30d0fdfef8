"""The ``--param`` grammar: ranges, lists, decimals and JSON arrays, each value checked
against the rule's declared parameters before anything runs."""

from __future__ import annotations

import pytest

from ctxrules.config import PipelineConfig
from ctxrules.errors import ConfigError
from ctxrules.rules.result_cap import ResultCap
from ctxrules.rules.tool_aging import ToolAging
from ctxrules.tune import MAX_VALUES, parse_param, parse_params

BASE = PipelineConfig.preset("default")


def values(text: str, base: PipelineConfig = BASE) -> tuple:
    return parse_param(text, base).values


def test_an_integer_range_includes_both_ends():
    assert values("tool_aging.tail_turns=1..6") == (1, 2, 3, 4, 5, 6)
    assert values("tool_aging.tail_turns=4..4") == (4,)


def test_a_range_with_a_step():
    assert values("result_cap.max_tool_result_chars=1000..4000:1000") == (1000, 2000, 3000, 4000)
    assert values("result_cap.max_tool_result_chars=1000..4500:1000") == (1000, 2000, 3000, 4000)


def test_a_decimal_range_is_exact():
    got = values("result_cap.head_ratio=0.1..0.5:0.1")
    assert got == (0.1, 0.2, 0.3, 0.4, 0.5)  # not 0.30000000000000004
    assert all(isinstance(v, float) for v in got)


def test_lists_of_each_type():
    assert values("result_cap.max_tool_result_chars=1000,2000,4000,8000") == (
        1000,
        2000,
        4000,
        8000,
    )
    assert values("result_cap.head_ratio=0.5, 0.75,1") == (0.5, 0.75, 1.0)
    assert values("idle_clearing.idle_minutes=5,60") == (5.0, 60.0)
    assert values("idle_clearing.placeholder=[gone],[cleared]") == ("[gone]", "[cleared]")
    # A float parameter takes whole numbers as floats, as the config loader does.
    assert all(type(v) is float for v in values("idle_clearing.idle_minutes=5,60"))


def test_a_json_array_sweeps_a_list_valued_parameter():
    got = values('tool_aging.extra_protected_tools=[[], ["TodoWrite"], ["TodoWrite", "Bash"]]')
    assert got == ((), ("TodoWrite",), ("TodoWrite", "Bash"))


def test_a_single_value_fixes_the_parameter():
    p = parse_param("tool_aging.step_turns=2", BASE)
    assert p.values == (2,) and p.key == "tool_aging.step_turns"


def test_the_default_is_the_tuned_configuration_s_value():
    assert parse_param("tool_aging.tail_turns=1..2", BASE).default == 1  # the preset's tail
    three = BASE.with_params("tool_aging", tail_turns=3)
    assert parse_param("tool_aging.tail_turns=1..2", three).default == 3
    bare = PipelineConfig(pipeline=("tool_aging",))
    assert parse_param("tool_aging.tail_turns=1..2", bare).default == ToolAging.params["tail_turns"]
    aggressive = PipelineConfig.preset("aggressive")
    assert parse_param("tool_aging.tail_turns=1..2", aggressive).default == 1
    capped = parse_param("result_cap.max_tool_result_chars=2000", aggressive)
    assert capped.default == 1000 != ResultCap.params["max_tool_result_chars"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tool_aging", "expected RULE.PARAM=VALUES"),
        ("tool_aging.tail_turns", "expected RULE.PARAM=VALUES"),
        ("tail_turns=1..3", "expected RULE.PARAM=VALUES"),
        ("tool_aging.tail_turns=", "no values"),
        ("no_such_rule.x=1", "unknown rule 'no_such_rule'"),
        ("tool_aging.tail_turn=1..3", "has no parameter 'tail_turn'"),
        # wrong type
        ("tool_aging.tail_turns=2.5", "must be int"),
        ("tool_aging.tail_turns=three", "'three' is not a number"),
        ("tool_aging.tail_turns=1..3:0.5", "integer bounds and step"),
        ("tool_aging.tail_turns=1.5..3", "integer bounds and step"),
        ("result_cap.head_ratio=0.5..0.9", "a decimal range needs a step"),
        ("idle_clearing.idle_minutes=true", "must be float"),
        ("tool_aging.extra_protected_tools=TodoWrite", "JSON array of lists"),
        ("tool_aging.extra_protected_tools=[[1]]", "must be tuple"),
        ("tool_aging.tail_turns=[1, ", "not a JSON array"),
        ("tool_aging.tail_turns=[]", "must not be empty"),
        ("result_cap.head_ratio=nan", "is not a number"),
        # out of the rule's own range
        ("tool_aging.tail_turns=-1..3", "must be >= 0"),
        ("tool_aging.step_turns=0,1", "must be >= 1"),
        ("result_cap.max_tool_result_chars=50,1000", "must be at least 100"),
        ("result_cap.head_ratio=0.5,1.5", "must be between 0 and 1"),
        ("result_cap.head_ratio=1e400", "finite"),
        # ranges that make no sense
        ("tool_aging.tail_turns=6..1", "runs backwards"),
        ("tool_aging.tail_turns=1..3:0", "step of a range must be positive"),
        ("tool_aging.tail_turns=1..3:-1", "step of a range must be positive"),
        ("tool_aging.tail_turns=a..b", "is not a range"),
        (f"tool_aging.tail_turns=0..{MAX_VALUES}", f"{MAX_VALUES + 1:,} values"),
        ("tool_aging.tail_turns=1,2,1", "given twice"),
        ("tool_aging.tail_turns=1,,2", "empty value"),
        ("result_cap.head_ratio=0.5,0.50", "given twice"),
    ],
)
def test_bad_params_are_one_line_config_errors_naming_the_param(text, says):
    with pytest.raises(ConfigError) as exc:
        parse_param(text, BASE)
    message = str(exc.value)
    assert says in message
    assert exc.value.where == f"--param {text}"
    assert "\n" not in message


def test_a_rule_outside_the_pipeline_is_refused():
    base = PipelineConfig(pipeline=("result_cap", "tool_aging"))
    with pytest.raises(ConfigError, match="not in the pipeline being tuned") as exc:
        parse_param("summarize.threshold_tokens=1000,2000", base)
    assert exc.value.where == "--param summarize.threshold_tokens=1000,2000"


def test_a_parameter_swept_twice_is_refused():
    with pytest.raises(ConfigError, match="swept twice") as exc:
        parse_params(["tool_aging.tail_turns=1..2", "tool_aging.tail_turns=3"], BASE)
    assert exc.value.where == "--param tool_aging.tail_turns=3"
    assert [
        p.key for p in parse_params(["tool_aging.tail_turns=1", "tool_aging.step_turns=2"], BASE)
    ] == [
        "tool_aging.tail_turns",
        "tool_aging.step_turns",
    ]


def test_text_values_that_hold_commas_come_as_a_json_array():
    assert values('idle_clearing.placeholder=["a, b", "c"]') == ("a, b", "c")
