"""Built-in summarizers, registered through the ``ctxrules`` entry points like any plugin."""

from __future__ import annotations

from ..hookspecs import Register, hookimpl
from .extractive import ExtractiveSummarizer


@hookimpl
def register_summarizers(register: Register) -> None:
    register(ExtractiveSummarizer())
