"""Counting the calls a test makes to a module's function (a counter-style check that
some work is not done, or not repeated)."""

from __future__ import annotations

from typing import Any


class Calls:
    """How many times the counted function was called (``n``; set it back to 0 at will)."""

    def __init__(self) -> None:
        self.n = 0


def count_calls(monkeypatch: Any, module: Any, name: str) -> Calls:
    """Replace ``module.name`` for the test by a wrapper that counts its calls."""
    calls = Calls()
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.n += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls
