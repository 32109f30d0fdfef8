"""Providers: wire formats, usage parsing, prompt-too-long errors, model limits.

Built-ins (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses, Gemini)
register through the ``ctxrules`` entry points like any plugin
(``ctxrules.providers._plugin``).  Look a provider up with ``get_provider(name)``; the
registry also holds ``ModelLimits``, resolved by ``resolve_limits("provider:model")``.
"""

from __future__ import annotations

from ..errors import PluginError
from .base import PromptTooLong, Provider, RenderedRequest, RequestOptions, SystemBlock, Usage
from .models import ModelLimits, resolve_limits

__all__ = [
    "ModelLimits",
    "PromptTooLong",
    "Provider",
    "RenderedRequest",
    "RequestOptions",
    "SystemBlock",
    "Usage",
    "get_provider",
    "provider_names",
    "resolve_limits",
]


def get_provider(name: str) -> Provider:
    """The registered provider called ``name`` (``PluginError`` lists the known ones)."""
    from ..plugins import registry

    reg = registry("providers")
    obj = reg.items.get(name)
    if not isinstance(obj, Provider):
        known = ", ".join(provider_names()) or "none"
        raise PluginError(
            f"no provider named {name!r}",
            hint=f"known: {known}; install the plugin that provides it",
        )
    return obj


def provider_names() -> list[str]:
    """Names of the registered providers, in registration order."""
    from ..plugins import registry

    return [k for k, v in registry("providers").items.items() if isinstance(v, Provider)]
