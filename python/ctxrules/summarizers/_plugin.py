"""Built-in summarizers, registered through the ``ctxrules`` entry points like any plugin."""

from __future__ import annotations

from ..hookspecs import RegisterSummarizers, hookimpl
from .extractive import ExtractiveSummarizer


@hookimpl
def register_summarizers(register: RegisterSummarizers) -> None:
    register(ExtractiveSummarizer())
