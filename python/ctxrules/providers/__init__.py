"""Providers: wire formats, usage parsing, prompt-too-long errors, and model facts.

Built-ins (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses, Gemini)
register through the ``ctxrules`` entry points like any plugin
(``ctxrules.providers._plugin``).  Look a provider up with ``get_provider(name)``.
What is known about a model (window, output limit, tokenizer, cache minimum, prices)
is registered as ``ModelInfo`` through ``register_models`` and resolved by
``resolve_model("provider:model")`` into a ``ModelProfile``.
"""

from __future__ import annotations

from ..plugins import registry
from .base import PromptTooLong, Provider, RenderedRequest, RequestOptions, SystemBlock, Usage
from .failures import error_parts, prompt_too_long_of
from .models import (
    ModelInfo,
    ModelProfile,
    Prices,
    load_profile,
    model_entries,
    model_families,
    model_in_family,
    read_profile,
    resolve_model,
)
from .responses import ModelResponse
from .streams import StreamAccumulator

__all__ = [
    "ModelInfo",
    "ModelProfile",
    "ModelResponse",
    "Prices",
    "PromptTooLong",
    "Provider",
    "RenderedRequest",
    "RequestOptions",
    "StreamAccumulator",
    "SystemBlock",
    "Usage",
    "error_parts",
    "get_provider",
    "load_profile",
    "model_entries",
    "model_families",
    "model_in_family",
    "prompt_too_long_of",
    "provider_names",
    "read_profile",
    "resolve_model",
]


def get_provider(name: str) -> Provider:
    """The registered provider called ``name`` (``PluginError`` lists the known ones)."""

    provider: Provider = registry("providers").get(name, Provider)
    return provider


def provider_names() -> list[str]:
    """Names of the registered providers, in registration order."""

    return registry("providers").names()
