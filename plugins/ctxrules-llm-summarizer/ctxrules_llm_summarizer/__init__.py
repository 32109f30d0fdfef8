"""A ctxrules summarizer backed by a model, registered as ``llm``.

Choose it for the summarize rule (``rules.summarize.summarizer = "llm"``) or for a
compaction; configure it with ``CTXRULES_LLM_SUMMARIZER_*`` environment variables
(``LLMConfig.from_env``) or register your own ``LLMSummarizer(LLMConfig(...))`` from a
plugin of yours.  The prompt is in ``prompt``, the request and its errors in
``summarizer``.
"""

from __future__ import annotations

from ctxrules.hookspecs import RegisterSummarizers, hookimpl

from .prompt import SECTIONS, SYSTEM, transcript, user_message
from .summarizer import ENV_PREFIX, PROVIDERS, LLMConfig, LLMSummarizer

__all__ = [
    "ENV_PREFIX",
    "PROVIDERS",
    "SECTIONS",
    "SYSTEM",
    "LLMConfig",
    "LLMSummarizer",
    "register_summarizers",
    "transcript",
    "user_message",
]


@hookimpl
def register_summarizers(register: RegisterSummarizers) -> None:
    """Register ``LLMSummarizer()``: configured from the environment when first used."""
    register(LLMSummarizer())
