"""Built-in providers and model facts, registered through the ``ctxrules`` entry points."""

from __future__ import annotations

from ..hookspecs import RegisterModels, RegisterProviders, hookimpl
from ._model_table import BUILTIN_MODELS
from .anthropic import AnthropicProvider
from .gemini import GeminiProvider
from .openai_chat import OpenAIChatProvider
from .openai_responses import OpenAIResponsesProvider


@hookimpl
def register_providers(register: RegisterProviders) -> None:
    for provider in (
        AnthropicProvider(),
        OpenAIChatProvider(),
        OpenAIResponsesProvider(),
        GeminiProvider(),
    ):
        register(provider)


@hookimpl
def register_models(register: RegisterModels) -> None:
    for info in BUILTIN_MODELS:
        register(info)
