"""Pipeline configuration: which rules run, in which order, with which parameters.

A configuration comes from Python (``PipelineConfig(...)``, ``PipelineConfig.preset``)
or from TOML: a ``ctxrules.toml`` file (keys at top level) or the ``[tool.ctxrules]``
table of a ``pyproject.toml``.  Every parameter of every rule can be set; a key that
no rule knows, or a value of the wrong type, is a ``ConfigError`` naming the file and
the key, so a misspelt setting is never silently ignored.

TOML layout::

    preset = "default"                 # optional starting point
    encoding = "o200k_base"            # tokenizer used for item token counts
    pipeline = ["result_cap", "tool_aging", "idle_clearing", "summarize"]
    anchor_task = true                 # the first real instruction is the task anchor
    anchor_skip = ["demonstration", "command"]   # lines that are not the task (default: all kinds)
    anchor_skip_patterns = ['^\\[auto\\]']     # more of them: regular expressions
    lock_system = true                 # system items are locked (never changed by rules)

    [rules.tool_aging]                 # ([tool.ctxrules.rules.tool_aging] in pyproject)
    tail_turns = 3
    extra_protected_tools = ["TodoWrite"]
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .plugins import registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "DEFAULT_PIPELINE",
    "PRESETS",
    "PipelineConfig",
    "dump_config",
    "find_config",
    "load_config",
]

#: The built-in pipeline, in order: cap first so stubs are made from capped text,
#: summarize last so it sees the tokens after every cheaper rule ran.
DEFAULT_PIPELINE: tuple[str, ...] = ("result_cap", "tool_aging", "idle_clearing", "summarize")

#: What ``tune`` chose on the corpus's fit set (benches/README.md, "Quality against
#: cost"): old results capped at 16,000 characters (4,000 lost a third of what agents
#: reused), every rule that changes what the provider cached waiting until the change
#: pays for the rewrite (the cache ledger, ``ctxrules.ruleapi.cache``), aging that
#: wants its rewrite paid back within 3 requests — so it ages mostly when the cache
#: went cold anyway, and then everything but the last turn — into stubs that name
#: 2,000 characters of their output's identifiers.
_KEEPING: dict[str, dict[str, Any]] = {
    "result_cap": {"max_tool_result_chars": 16_000, "cache_aware": True},
    "tool_aging": {
        "cache_aware": True,
        "payback": 3,
        "tail_turns": 1,
        "stub_identifier_chars": 2000,
    },
    "idle_clearing": {"cache_aware": True},
}

#: Shipped configurations.  Every one is run through the invariant property tests.
PRESETS: dict[str, dict[str, Any]] = {
    "default": {"pipeline": list(DEFAULT_PIPELINE), "rules": _KEEPING},
    # Tight budgets for small windows, every change to a cached item only once it pays
    # back within 3 requests or the cache went cold (chosen on the corpus's fit set: not
    # cache-aware, one fit session billed 1.27 x no rules); a cut or aged result names
    # 2,000 characters of its identifiers (1,000 kept 0.010 fewer older facts on the fit
    # set for 0.004 fewer tokens).  Tests that need every rule to fire at once take these
    # budgets without the ledger (tests/presets.py).
    "aggressive": {
        "pipeline": list(DEFAULT_PIPELINE),
        "rules": {
            "result_cap": {
                "max_tool_result_chars": 1000,
                "cut_identifier_chars": 2000,
                "cache_aware": True,
                "payback": 3,
            },
            "tool_aging": {
                "tail_turns": 1,
                "step_turns": 1,
                "stub_identifier_chars": 2000,
                "cache_aware": True,
                "payback": 3,
            },
            "idle_clearing": {"idle_minutes": 5, "cache_aware": True, "payback": 3},
            "summarize": {
                "threshold_tokens": 2000,
                "target_ratio": 0.5,
                "keep_tail_turns": 1,
                "cache_aware": True,
                "payback": 3,
                # The ledger decides when a fold pays; batches (min_run_share 1) billed
                # 0.0006 more on the validation set and 0.0014 more on the fit set.
                "min_run_share": 0.0,
            },
        },
    },
    # Fewer tokens on long sessions: fold the history past 4,000 tokens into summaries
    # that keep the identifiers agents reuse, a fold too only once it pays back within
    # 3 requests (with 20, one corpus session billed 1.002 x no rules).
    "lean": {
        "pipeline": list(DEFAULT_PIPELINE),
        "rules": {
            **_KEEPING,
            "summarize": {
                "threshold_tokens": 4_000,
                "target_ratio": 0.5,
                "cache_aware": True,
                "payback": 3,
                # As aggressive: batches (min_run_share 1) billed 0.0012 more on the
                # validation set and kept 0.0008 fewer older facts on the fit set.
                "min_run_share": 0.0,
            },
        },
    },
    # Claude Code transcripts: its todo tool is TodoWrite.
    "claude-code": {
        "pipeline": list(DEFAULT_PIPELINE),
        "rules": {
            **_KEEPING,
            "tool_aging": {
                **_KEEPING["tool_aging"],
                "extra_protected_tools": ["TodoWrite", "WebSearch"],
            },
        },
    },
    # No rules: every item stays full (a commit is then the plain branch).
    "off": {"pipeline": [], "rules": {}},
}

_TOP_KEYS = {
    "preset",
    "encoding",
    "pipeline",
    "anchor_task",
    "anchor_skip",
    "anchor_skip_patterns",
    "lock_system",
    "rules",
}


@dataclass(frozen=True)
class PipelineConfig:
    """A validated pipeline: rule names in order, their parameters, and generation options.

    ``rules`` maps a rule name to the parameters that differ from that rule's defaults.
    Build one with ``PipelineConfig.preset(name)``, ``load_config(path)`` or directly;
    ``build()`` checks every name and parameter against the registered rules.

    What never folds: with ``lock_system`` (default) every system item is locked, and
    with ``anchor_task`` (default) the first real instruction of a branch is the task
    anchor, which summarize keeps full.  ``anchor_skip`` names the kinds of user lines
    that are not the task (``None``: every built-in kind, ``()``: none, so the first
    user line is the anchor); ``anchor_skip_patterns`` adds regular expressions, searched
    in a line's text.  Both are checked when the pipeline is built
    (``ctxrules.commit.anchor`` lists the kinds), and all four are part of the
    pipeline's ``rules_version``.
    """

    pipeline: tuple[str, ...] = DEFAULT_PIPELINE
    rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    encoding: str = "o200k_base"
    anchor_task: bool = True
    source: str = "<python>"
    lock_system: bool = True
    anchor_skip: tuple[str, ...] | None = None
    anchor_skip_patterns: tuple[str, ...] = ()

    @classmethod
    def preset(cls, name: str = "default", **overrides: Any) -> PipelineConfig:
        """One of the shipped configurations (``PRESETS``), optionally with overrides."""
        if name not in PRESETS:
            raise ConfigError(
                f"unknown preset {name!r}", where="preset", hint=f"one of {', '.join(PRESETS)}"
            )
        data = dict(PRESETS[name])
        data.update(overrides)
        return _from_mapping(data, source=f"<preset {name}>")

    def with_params(self, rule: str, **params: Any) -> PipelineConfig:
        """A copy with ``params`` set on ``rule`` (validated when the pipeline is built)."""
        rules = {k: dict(v) for k, v in self.rules.items()}
        rules.setdefault(rule, {}).update(params)
        return dataclasses.replace(self, rules=rules)

    def build(self) -> list[Any]:
        """Instantiate the rules in pipeline order; bad names or parameters: ``ConfigError``."""

        reg = registry("rules")
        for name in self.rules:
            if name not in reg:
                raise ConfigError(
                    f"parameters given for unknown rule {name!r}",
                    where=f"{self.source}: rules.{name}",
                    hint=f"known rules: {', '.join(reg.names())}",
                )
        built = []
        for name in self.pipeline:
            if name not in reg:
                raise ConfigError(
                    f"unknown rule {name!r} in the pipeline",
                    where=f"{self.source}: pipeline",
                    hint=f"known rules: {', '.join(reg.names())}; install the plugin that "
                    "provides it",
                )
            built.append(reg.get(name).configure(self.rules.get(name, {}), where=self.source))
        return built


def _from_mapping(data: Mapping[str, Any], *, source: str) -> PipelineConfig:
    unknown = set(data) - _TOP_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise ConfigError(
            f"unknown key {key!r}", where=f"{source}: {key}", hint=f"known: {', '.join(_TOP_KEYS)}"
        )
    base: dict[str, Any] = {}
    if "preset" in data:
        name = data["preset"]
        if not isinstance(name, str) or name not in PRESETS:
            raise ConfigError(
                f"unknown preset {name!r}",
                where=f"{source}: preset",
                hint=f"one of {list(PRESETS)}",
            )
        base = {"pipeline": PRESETS[name]["pipeline"], "rules": PRESETS[name]["rules"]}
    pipeline = data.get("pipeline", base.get("pipeline", list(DEFAULT_PIPELINE)))
    if not isinstance(pipeline, Sequence) or isinstance(pipeline, str):
        raise ConfigError("'pipeline' must be a list of rule names", where=f"{source}: pipeline")
    for i, name in enumerate(pipeline):
        if not isinstance(name, str):
            raise ConfigError(
                f"rule names are strings, got {name!r}", where=f"{source}: pipeline[{i}]"
            )
    if len(set(pipeline)) != len(pipeline):
        raise ConfigError("a rule appears twice in the pipeline", where=f"{source}: pipeline")
    rules: dict[str, dict[str, Any]] = {k: dict(v) for k, v in base.get("rules", {}).items()}
    given = data.get("rules", {})
    if not isinstance(given, Mapping):
        raise ConfigError(
            "'rules' must be a table of rule name → parameters", where=f"{source}: rules"
        )
    for name, params in given.items():
        if not isinstance(params, Mapping):
            raise ConfigError("rule parameters must be a table", where=f"{source}: rules.{name}")
        rules.setdefault(name, {}).update(params)
    encoding = data.get("encoding", "o200k_base")
    if not isinstance(encoding, str):
        raise ConfigError("'encoding' must be a tokenizer name", where=f"{source}: encoding")
    flags = {}
    for key in ("anchor_task", "lock_system"):
        flags[key] = data.get(key, True)
        if not isinstance(flags[key], bool):
            raise ConfigError(f"{key!r} must be true or false", where=f"{source}: {key}")
    skip = data.get("anchor_skip")
    if skip is not None:
        skip = _strings(skip, "anchor_skip", source)
    patterns = _strings(data.get("anchor_skip_patterns", ()), "anchor_skip_patterns", source)
    return PipelineConfig(
        tuple(pipeline),
        rules,
        encoding,
        flags["anchor_task"],
        source,
        lock_system=flags["lock_system"],
        anchor_skip=skip,
        anchor_skip_patterns=patterns,
    )


def _strings(value: Any, key: str, source: str) -> tuple[str, ...]:
    if (
        isinstance(value, str)
        or not isinstance(value, Sequence)
        or not all(isinstance(v, str) for v in value)
    ):
        raise ConfigError(f"{key!r} must be a list of strings", where=f"{source}: {key}")
    return tuple(value)


def load_config(path: str | Path) -> PipelineConfig:
    """Read a ``ctxrules.toml`` (keys at top level) or a ``pyproject.toml`` (its
    ``[tool.ctxrules]`` table)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError("no such config file", where=str(p)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror}", where=str(p)) from None
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError("config file is not UTF-8", where=str(p)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", where=str(p)) from None
    if p.name == "pyproject.toml":
        table = doc.get("tool", {}).get("ctxrules")
        if table is None:
            raise ConfigError(
                "no [tool.ctxrules] table", where=str(p), hint="add one, or use a ctxrules.toml"
            )
        return _from_mapping(table, source=f"{p} [tool.ctxrules]")
    return _from_mapping(doc, source=str(p))


def find_config(start: str | Path = ".") -> PipelineConfig:
    """The configuration that applies in ``start``: the nearest ``ctxrules.toml``, else the
    nearest ``pyproject.toml`` with a ``[tool.ctxrules]`` table, else the default preset."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if (folder / "ctxrules.toml").is_file():
            return load_config(folder / "ctxrules.toml")
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError):
                continue  # someone else's broken pyproject is not our config
            if "ctxrules" in doc.get("tool", {}):
                return load_config(pyproject)
    return PipelineConfig.preset("default")


def dump_config(config: PipelineConfig) -> str:
    """The ``ctxrules.toml`` text of ``config``: ``load_config`` reads it back to a
    configuration with the same pipeline, options and parameters.

    Every top-level option is written out (no preset), and each rule's table holds the
    parameters the configuration sets (the others keep the rule's defaults).  Values
    are those a rule parameter takes: text, whole and finite decimal numbers, flags
    and lists of text.
    """
    lines = [
        f"encoding = {_toml(config.encoding)}",
        f"pipeline = {_toml(list(config.pipeline))}",
        f"anchor_task = {_toml(config.anchor_task)}",
        f"lock_system = {_toml(config.lock_system)}",
    ]
    if config.anchor_skip is not None:
        lines.append(f"anchor_skip = {_toml(list(config.anchor_skip))}")
    if config.anchor_skip_patterns:
        lines.append(f"anchor_skip_patterns = {_toml(list(config.anchor_skip_patterns))}")
    for rule in sorted(config.rules):
        lines += ["", f"[rules.{_toml_key(rule)}]"]
        params = config.rules[rule]
        lines += [f"{_toml_key(k)} = {_toml(params[k], f'rules.{rule}.{k}')}" for k in params]
    return "\n".join(lines) + "\n"


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml(key)


def _toml(value: Any, where: str = "") -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(
                f"{value!r} holds a lone surrogate, which TOML cannot hold", where=where or None
            ) from None
        # JSON escapes what a TOML basic string must escape, except DEL.
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v, where) for v in value) + "]"
    raise ConfigError(f"cannot write {value!r} as TOML", where=where or None)
