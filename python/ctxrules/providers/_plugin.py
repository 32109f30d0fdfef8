"""Built-in providers and model limits, registered through the ``ctxrules`` entry points."""

from __future__ import annotations

from ..hookspecs import Register, hookimpl
from .anthropic import AnthropicProvider
from .gemini import GeminiProvider
from .models import BUILTIN_LIMITS
from .openai_chat import OpenAIChatProvider
from .openai_responses import OpenAIResponsesProvider


@hookimpl
def register_providers(register: Register) -> None:
    for provider in (
        AnthropicProvider(),
        OpenAIChatProvider(),
        OpenAIResponsesProvider(),
        GeminiProvider(),
    ):
        register(provider)
    for limits in BUILTIN_LIMITS:
        register(limits)
