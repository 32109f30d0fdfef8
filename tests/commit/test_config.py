"""Pipeline configuration from TOML and Python: every parameter settable, bad input named."""

from __future__ import annotations

import pytest

from ctxrules.commit import Pipeline
from ctxrules.config import DEFAULT_PIPELINE, PipelineConfig, find_config, load_config
from ctxrules.errors import ConfigError
from ctxrules.rules import ToolAging


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_ctxrules_toml_sets_order_and_parameters(tmp_path):
    p = write(
        tmp_path,
        "ctxrules.toml",
        """
pipeline = ["tool_aging", "summarize"]
encoding = "cl100k_base"
[rules.tool_aging]
tail_turns = 5
extra_protected_tools = ["TodoWrite"]
[rules.summarize]
threshold_tokens = 5000
""",
    )
    cfg = load_config(p)
    rules = cfg.build()
    assert [r.name for r in rules] == ["tool_aging", "summarize"]
    assert rules[0].tail_turns == 5 and rules[0].extra_protected_tools == ("TodoWrite",)
    assert rules[1].threshold_tokens == 5000 and cfg.encoding == "cl100k_base"


def test_pyproject_tool_table_is_found_from_a_subfolder(tmp_path):
    write(
        tmp_path,
        "pyproject.toml",
        "[project]\nname='x'\n[tool.ctxrules]\npreset='aggressive'\n"
        "[tool.ctxrules.rules.idle_clearing]\nidle_minutes = 2\n",
    )
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    cfg = find_config(sub)
    rules = {r.name: r for r in cfg.build()}
    assert rules["idle_clearing"].idle_minutes == 2.0
    assert rules["tool_aging"].tail_turns == 1  # from the preset


def test_without_any_file_the_default_pipeline_applies(tmp_path):
    assert find_config(tmp_path).pipeline == DEFAULT_PIPELINE


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("[rules.tool_aging]\ntail_turn = 3\n", "rules.tool_aging.tail_turn", "no parameter"),
        (
            "[rules.tool_aging]\ntail_turns = 'three'\n",
            "rules.tool_aging.tail_turns",
            "must be int",
        ),
        ("[rules.tool_aging]\ntail_turns = -1\n", "rules.tool_aging.tail_turns", ">= 0"),
        ("pipeline = ['tool_aging', 'nope']\n", "pipeline", "unknown rule 'nope'"),
        ("[rules.nope]\nx = 1\n", "rules.nope", "unknown rule 'nope'"),
        ("pipelines = []\n", "pipelines", "unknown key"),
        ("pipeline = [\n", "", "invalid TOML"),
        ("[rules.summarize]\ntarget_ratio = 2.0\n", "rules.summarize.target_ratio", "(0, 1]"),
        ("[rules.idle_clearing]\nidle_minutes = nan\n", "idle_clearing.idle_minutes", "finite"),
        ("[rules.summarize]\ntimeout_seconds = nan\n", "summarize.timeout_seconds", "finite"),
        ("[rules.summarize]\ntimeout_seconds = inf\n", "summarize.timeout_seconds", "finite"),
        ("[rules.result_cap]\nhead_ratio = -inf\n", "result_cap.head_ratio", "finite"),
        ("[rules.summarize]\ntimeout_seconds = -1\n", "summarize.timeout_seconds", ">= 0"),
        (
            "[rules.summarize]\nsummarizer = 'nope'\n",
            "rules.summarize.summarizer",
            "no summarizer named 'nope'",
        ),
    ],
)
def test_bad_values_name_the_file_and_key(tmp_path, text, where, what):
    p = write(tmp_path, "ctxrules.toml", text)
    with pytest.raises(ConfigError) as err:
        load_config(p).build()
    assert str(p) in str(err.value) and where in str(err.value) and what in str(err.value)


def test_python_api_and_rules_version():
    a = Pipeline.from_config(PipelineConfig.preset("default"))
    b = Pipeline.from_config(
        PipelineConfig.preset("default").with_params("result_cap", head_ratio=0.5)
    )
    c = Pipeline.of([ToolAging()])
    assert a.version != b.version != c.version
    assert a.version == Pipeline.from_config(PipelineConfig.preset("default")).version
    with pytest.raises(ConfigError, match="unknown preset"):
        PipelineConfig.preset("nope")


@pytest.mark.parametrize(
    ("rule", "key", "value"),
    [
        ("idle_clearing", "idle_minutes", float("nan")),
        ("idle_clearing", "idle_minutes", float("inf")),
        ("summarize", "timeout_seconds", float("nan")),
        ("summarize", "timeout_seconds", 10**400),  # too large for a float
    ],
)
def test_non_finite_numbers_are_refused_from_python_too(rule, key, value):
    with pytest.raises(ConfigError, match=f"parameter '{key}' must be float") as err:
        PipelineConfig.preset("default").with_params(rule, **{key: value}).build()
    assert f"rules.{rule}.{key}" in str(err.value)


def test_the_summarizer_is_checked_when_the_config_is_built_not_when_it_folds(tmp_path):
    p = write(tmp_path, "ctxrules.toml", "[rules.summarize]\nsummarizer = 'nope'\n")
    with pytest.raises(ConfigError, match="installed: extractive"):
        Pipeline.from_config(load_config(p))


def test_what_never_folds_is_set_from_toml(tmp_path):
    p = write(
        tmp_path,
        "ctxrules.toml",
        """
preset = "aggressive"
lock_system = false
anchor_skip = ["demonstration", "command"]
anchor_skip_patterns = ['^\\[auto\\]']
""",
    )
    pipeline = Pipeline.from_config(load_config(p))
    assert pipeline.lock_system is False
    assert pipeline.anchor_skip.kinds == ("demonstration", "command")
    assert pipeline.anchor_skip.patterns == (r"^\[auto\]",)
    assert [r.name for r in pipeline.rules] == list(DEFAULT_PIPELINE)
    # every one of them is part of the version: a commit made under others is no parent
    default = Pipeline.from_config(PipelineConfig.preset("aggressive"))
    assert default.lock_system is True and default.anchor_skip.patterns == ()
    versions = {
        Pipeline.from_config(PipelineConfig.preset("aggressive", **kw)).version
        for kw in (
            {},
            {"lock_system": False},
            {"anchor_task": False},
            {"anchor_skip": ("command",)},
            {"anchor_skip": ()},
            {"anchor_skip_patterns": ("x",)},
        )
    }
    assert len(versions) == 6 and pipeline.version not in versions
    # the options survive with_params
    cfg = load_config(p).with_params("summarize", threshold_tokens=900)
    assert cfg.lock_system is False and cfg.anchor_skip == ("demonstration", "command")


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("anchor_skip = ['command', 'nope']\n", "anchor_skip", "unknown anchor skip kind 'nope'"),
        ("anchor_skip = 'command'\n", "anchor_skip", "list of strings"),
        ("anchor_skip_patterns = ['ok', '(']\n", "anchor_skip_patterns[1]", "not a regular"),
        ("anchor_skip_patterns = [1]\n", "anchor_skip_patterns", "list of strings"),
        ("lock_system = 'yes'\n", "lock_system", "true or false"),
    ],
)
def test_bad_never_fold_settings_name_the_file_and_key(tmp_path, text, where, what):
    p = write(tmp_path, "ctxrules.toml", text)
    with pytest.raises(ConfigError) as err:
        Pipeline.from_config(load_config(p))
    assert str(p) in str(err.value) and where in str(err.value) and what in str(err.value)
