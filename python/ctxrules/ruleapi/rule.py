"""The ``Rule`` base class: a named, versioned step of the commit pipeline with typed
parameters, the cursors it keeps and the promise it keeps.

A rule's ``apply(ctx)`` changes items through the ``RuleContext`` it is handed
(``ctxrules.ruleapi.RuleContext``); see that class and docs/rules.md for what a rule
may do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec

from ..errors import ConfigError
from ..model import ContextCommit
from .context import RuleContext

__all__ = ["Rule"]


class Rule:
    """Base class of every rule; subclass it and register the class through ``register_rules``.

    Set ``name`` (unique), ``params`` (every parameter with its default; the type of
    the default is the accepted type) and implement ``apply(ctx)``.  Override
    ``check()`` to validate ranges (raise ``ConfigError`` via ``self.bad(key, msg)``).
    ``version`` is part of ``rules_version``: bump it when the rule's behaviour changes.

    ``position_cursors`` names the keys of ``ctx.cursors`` this rule stores item
    positions under: ``ctx.insert`` shifts those so they keep naming the same item.
    Every other cursor is a plain value (a count, a flag) and is never changed by
    anyone but the rule.  ``promise`` says in one sentence what the rule guarantees
    about every commit it runs in, and ``check_promise`` checks it on a commit; the
    test kit (``ctxrules.testing``) runs that check with every shipped pipeline.
    """

    name: ClassVar[str] = ""
    version: ClassVar[int] = 1
    params: ClassVar[Mapping[str, Any]] = {}
    position_cursors: ClassVar[frozenset[str]] = frozenset()
    promise: ClassVar[str] = ""

    def __init__(self, **values: Any):
        self.values: dict[str, Any] = dict(self.params)
        self._where = "<python>"
        for key, value in values.items():
            self._set(key, value)
        self.check()

    @classmethod
    def configure(cls, values: Mapping[str, Any], *, where: str = "<python>") -> Rule:
        """Build the rule from a parameter mapping; a bad key or value names ``where``."""
        rule = cls.__new__(cls)
        rule.values = dict(cls.params)
        rule._where = where
        for key, value in values.items():
            rule._set(key, value)
        rule.check()
        return rule

    def _set(self, key: str, value: Any) -> None:
        if key not in self.params:
            raise ConfigError(
                f"rule {self.name!r} has no parameter {key!r}",
                where=f"{self._where}: rules.{self.name}.{key}",
                hint=f"known: {', '.join(self.params) or 'none'}",
            )
        default = self.params[key]
        ok: bool
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if ok:
                try:
                    value = float(value)
                except OverflowError:  # an int too large for a float
                    ok = False
                else:
                    ok = math.isfinite(value)
        elif isinstance(default, str):
            ok = isinstance(value, str)
        elif isinstance(default, (list, tuple)):
            ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
            value = tuple(value) if ok else value
        else:
            ok = True
        if not ok:
            finite = " (a finite number)" if isinstance(default, float) else ""
            raise ConfigError(
                f"rule {self.name!r} parameter {key!r} must be "
                f"{type(default).__name__}{finite}, got {value!r}",
                where=f"{self._where}: rules.{self.name}.{key}",
            )
        self.values[key] = value

    def bad(self, key: str, message: str) -> ConfigError:
        """A ``ConfigError`` for parameter ``key`` (for ``check`` implementations)."""
        return ConfigError(
            f"rule {self.name!r} parameter {key!r} {message}, got {self.values[key]!r}",
            where=f"{self._where}: rules.{self.name}.{key}",
        )

    def check(self) -> None:
        """Validate parameter ranges; the default accepts any well-typed value."""

    def signature(self) -> str:
        """A stable text naming the rule, its version and every parameter value."""
        body = msgspec.json.encode({k: self.values[k] for k in sorted(self.values)})
        return f"{self.name}@{self.version}:{body.decode()}"

    def reads_cache(self) -> bool:
        """Whether this rule decides by the cache ledger (``ctx.cache``), and so by the
        model's cache prices: then ``rules_version`` holds the prices, and a commit made
        at one model's prices is not reused at another's.  The rule's ``cache_aware``
        parameter when it has one; else ``True``, since any rule may read ``ctx.cache``
        (override it to say ``False`` for a rule that never does)."""
        return bool(self.values.get("cache_aware", True))

    def apply(self, ctx: RuleContext) -> None:
        """Change items of ``ctx``; must only use ``ctx.replace`` / ``ctx.fold``."""
        raise NotImplementedError

    def check_promise(self, commit: ContextCommit) -> list[str]:
        """Where ``commit`` (made by a pipeline holding this rule) breaks ``promise``: one
        message per violation, naming the item; empty when the promise is kept.

        Checked on chains of commits derived by one rule set from the start (a commit
        built on another rule set's parent keeps that parent's states: they only
        tighten).  The default promises nothing.
        """
        return []

    def __getattr__(self, key: str) -> Any:
        values = self.__dict__.get("values")
        if values is not None and key in values:
            return values[key]
        raise AttributeError(key)

    def __repr__(self) -> str:
        return f"<rule {self.signature()}>"
