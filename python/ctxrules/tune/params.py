"""The ``--param RULE.PARAM=VALUES`` grammar of a sweep, checked against the rules.

VALUES is one of:

* ``a..b`` — the integers from ``a`` to ``b``, both included;
* ``a..b:step`` — from ``a`` to ``b`` in steps of ``step`` (integers or decimals:
  ``0.5..0.9:0.1`` gives 0.5, 0.6, 0.7, 0.8, 0.9, computed in decimal so no
  ``0.30000000000000004`` appears);
* ``v1,v2,…`` — a list of values of the parameter's type (``true`` / ``false`` for a
  flag, text as written for a text parameter);
* ``[…]`` — a JSON array of values: the only way to sweep a list-valued parameter
  (``tool_aging.extra_protected_tools=[[], ["TodoWrite"]]``), and the way to give
  text holding commas (a text value that starts with ``[`` but is no JSON array is
  read as a plain list);
* a single value, which fixes the parameter for every setting.

Everything is checked before anything runs (``parse_params``): the rule must be
registered and in the pipeline being tuned, the parameter one it declares (its
``params``), every value of the parameter's type and accepted by the rule's own range
checks.  Any failure is a one-line ``ConfigError`` whose ``where`` is the ``--param``
as given.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from ..config import PipelineConfig
from ..errors import ConfigError
from ..plugins import registry

__all__ = ["MAX_VALUES", "Param", "parse_param", "parse_params"]

#: The most values one ``--param`` may stand for: a range this long is a typo
#: (``1..100000``), and the grid is the product of every parameter's count.
MAX_VALUES = 10_000


@dataclass(frozen=True)
class Param:
    """One swept parameter: ``rule.name`` and its values in the order given.

    ``text`` is the ``--param`` as the user wrote it (what errors name); ``default``
    is the value the tuned configuration gives the parameter without the sweep.
    """

    rule: str
    name: str
    values: tuple[Any, ...]
    text: str
    default: Any = None

    @property
    def key(self) -> str:
        """``rule.name``: how settings, tables and TOML name the parameter."""
        return f"{self.rule}.{self.name}"


def parse_params(texts: Sequence[str], base: PipelineConfig) -> list[Param]:
    """Parse and check every ``--param`` against the rules of ``base``; a parameter
    named twice is an error."""
    out: list[Param] = []
    seen: dict[str, str] = {}
    for text in texts:
        param = parse_param(text, base)
        if param.key in seen:
            raise ConfigError(
                f"{param.key} is swept twice (also by --param {seen[param.key]})",
                where=f"--param {text}",
                hint="give every value in one --param",
            )
        seen[param.key] = text
        out.append(param)
    return out


def parse_param(text: str, base: PipelineConfig) -> Param:
    """Parse one ``RULE.PARAM=VALUES`` and check it against the rules of ``base``."""
    where = f"--param {text}"
    key, eq, spec = text.partition("=")
    rule_name, dot, name = key.strip().partition(".")
    if not eq or not dot or not rule_name or not name:
        raise ConfigError(
            "expected RULE.PARAM=VALUES",
            where=where,
            hint="e.g. tool_aging.tail_turns=1..6 or result_cap.max_tool_result_chars=1000,4000",
        )
    reg = registry("rules")
    if rule_name not in reg:
        raise ConfigError(
            f"unknown rule {rule_name!r}",
            where=where,
            hint=f"known rules: {', '.join(reg.names())}",
        )
    if rule_name not in base.pipeline:
        raise ConfigError(
            f"rule {rule_name!r} is not in the pipeline being tuned "
            f"({', '.join(base.pipeline) or 'no rules'}), so its parameters change nothing",
            where=where,
            hint="tune a --config whose pipeline runs it",
        )
    cls = reg.get(rule_name)
    if name not in cls.params:
        raise ConfigError(
            f"rule {rule_name!r} has no parameter {name!r}",
            where=where,
            hint=f"known: {', '.join(cls.params) or 'none'}",
        )
    default = cls.params[name]
    values = _values(spec.strip(), default, where)
    checked = tuple(_check(cls, name, v, where) for v in values)
    if len(set(checked)) != len(checked):
        raise ConfigError("a value is given twice", where=where)
    given = base.rules.get(rule_name, {})
    current = _check(cls, name, given[name], where) if name in given else _plain(default)
    return Param(rule_name, name, checked, text, current)


def _values(spec: str, default: Any, where: str) -> list[Any]:
    if not spec:
        raise ConfigError("no values after '='", where=where)
    if spec.startswith("["):
        try:
            values = json.loads(spec)
        except json.JSONDecodeError as exc:
            if isinstance(default, str):  # text that starts with "[": a plain list
                return [_scalar(part.strip(), default, where) for part in spec.split(",")]
            raise ConfigError(f"not a JSON array: {exc.msg}", where=where) from None
        if not isinstance(values, list) or not values:
            raise ConfigError("a JSON list of values must not be empty", where=where)
        return [_plain(v) for v in values]
    if isinstance(default, (list, tuple)):
        raise ConfigError(
            "a list-valued parameter is swept as a JSON array of lists",
            where=where,
            hint='e.g. tool_aging.extra_protected_tools=[[], ["TodoWrite"]]',
        )
    if ".." in spec and not isinstance(default, str):
        return _range(spec, default, where)
    return [_scalar(part.strip(), default, where) for part in spec.split(",")]


def _range(spec: str, default: Any, where: str) -> list[Any]:
    bounds, colon, step_text = spec.partition(":")
    low_text, _, high_text = bounds.partition("..")
    if isinstance(default, bool):
        raise ConfigError("a flag takes true,false, not a range", where=where)
    try:
        low, high = Decimal(low_text.strip()), Decimal(high_text.strip())
        step = Decimal(step_text.strip()) if colon else Decimal(1)
    except InvalidOperation:
        raise ConfigError(
            f"{spec!r} is not a range: expected a..b or a..b:step with numbers", where=where
        ) from None
    if not all(d.is_finite() for d in (low, high, step)):
        raise ConfigError("range bounds and step must be finite numbers", where=where)
    if step <= 0:
        raise ConfigError("the step of a range must be positive", where=where)
    if low > high:
        raise ConfigError(f"the range runs backwards ({low} > {high})", where=where)
    count = int((high - low) / step) + 1
    if count > MAX_VALUES:
        raise ConfigError(f"the range has {count:,} values (at most {MAX_VALUES:,})", where=where)
    values = [low + i * step for i in range(count)]
    if isinstance(default, int):
        if any(v != v.to_integral_value() for v in values):
            raise ConfigError("an integer parameter needs integer bounds and step", where=where)
        return [int(v) for v in values]
    if not colon and (low != low.to_integral_value() or high != high.to_integral_value()):
        # 0.5..0.9 in steps of 1 would silently be the one value 0.5.
        raise ConfigError("a decimal range needs a step", where=where, hint=f"e.g. {bounds}:0.1")
    return [float(v) for v in values]


def _scalar(text: str, default: Any, where: str) -> Any:
    if not text:
        raise ConfigError("an empty value in the list", where=where)
    if isinstance(default, str):
        return text
    if isinstance(default, bool):
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"expected true or false, got {text!r}", where=where)
        return lowered == "true"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ConfigError(f"{text!r} is not a number", where=where) from None


def _check(cls: Any, name: str, value: Any, where: str) -> Any:
    """The value as the rule stores it (``1`` for a float parameter is ``1.0``); its
    own type and range checks raise here, reworded to name the ``--param``."""
    try:
        built = cls.configure({name: value}, where="--param")
    except ConfigError as exc:
        raise ConfigError(exc.message, where=where, hint=exc.hint) from None
    return _plain(built.values[name])


def _plain(value: Any) -> Any:
    # Lists become tuples (what rules store), so values hash and compare as settings.
    return tuple(_plain(v) for v in value) if isinstance(value, (list, tuple)) else value
