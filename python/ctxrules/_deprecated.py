"""Old names kept for one release: each resolves to its new name with a
``DeprecationWarning`` that says what to use instead (CHANGELOG.md lists them).

A module keeps a table ``{old: "module:new"}`` and answers unknown attributes with
``moved(__name__, table, name)`` from its PEP 562 ``__getattr__``; the new object is
imported only when an old name is used.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["REMOVED_IN", "moved", "warn_module"]

#: The release that drops every name kept here.
REMOVED_IN = "0.3"


def moved(module: str, table: Mapping[str, str | tuple[str, str]], name: str) -> Any:
    """The object an old name of ``module`` now lives at, after a ``DeprecationWarning``;
    ``AttributeError`` for a name that is not in ``table``.

    ``table[name]`` is ``"package.module:attribute"``, or that and the advice the
    warning gives when it is more than "use package.module.attribute".
    """
    entry = table.get(name)
    if entry is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    target, advice = entry if isinstance(entry, tuple) else (entry, "")
    where, _, attr = target.partition(":")
    warnings.warn(
        f"{module}.{name} is deprecated and will be removed in ctxrules {REMOVED_IN}: "
        f"{advice or f'use {where}.{attr}'}",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(where), attr)


def warn_module(old: str, new: str) -> None:
    """Warn that module ``old`` (a shim re-exporting ``new``) is deprecated."""
    warnings.warn(
        f"{old} is deprecated and will be removed in ctxrules {REMOVED_IN}: use {new}",
        DeprecationWarning,
        stacklevel=3,
    )
