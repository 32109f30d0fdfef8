"""Built-in rules, registered through the ``ctxrules`` entry points like any plugin."""

from __future__ import annotations

from ..hookspecs import RegisterRules, hookimpl
from . import BUILTIN_RULES


@hookimpl
def register_rules(register: RegisterRules) -> None:
    for rule in BUILTIN_RULES:
        register(rule)
