"""The one resolver of ``"provider:model"`` → context window and output limit (SPEC §5, §9).

Limits are ``ModelLimits`` values registered through the providers hook, like any
provider, so a plugin adds or corrects a model by registering its own.  The most
specific matching pattern wins (most literal characters); on a tie the later
registration wins, so a plugin can override a built-in figure.  Each family has a
catch-all (``"anthropic:*"``) so a new model name still resolves.  ``openai-chat`` and
``openai-responses`` share the ``openai`` models.
"""

from __future__ import annotations

import fnmatch

import msgspec

from ..errors import ProviderError

__all__ = ["BUILTIN_LIMITS", "ModelLimits", "resolve_limits"]


class ModelLimits(msgspec.Struct, frozen=True):
    """Context window and maximum output tokens of the models matching ``pattern``.

    ``pattern`` is an ``fnmatch`` pattern over ``"provider:model"`` (e.g.
    ``"anthropic:claude-sonnet-4*"``); ``name`` is the registry key.
    """

    name: str
    pattern: str
    context_window: int
    max_output_tokens: int


def _l(name: str, pattern: str, window: int, out: int) -> ModelLimits:
    return ModelLimits(name, pattern, window, out)


#: Published limits of common models (vendor model pages, 2025).
BUILTIN_LIMITS: tuple[ModelLimits, ...] = (
    _l("anthropic-default", "anthropic:*", 200_000, 8_192),
    _l("claude-3-haiku", "anthropic:claude-3-haiku*", 200_000, 4_096),
    _l("claude-3-opus", "anthropic:claude-3-opus*", 200_000, 4_096),
    _l("claude-3-5", "anthropic:claude-3-5-*", 200_000, 8_192),
    _l("claude-3-7-sonnet", "anthropic:claude-3-7-sonnet*", 200_000, 64_000),
    _l("claude-sonnet-4", "anthropic:claude-sonnet-4*", 200_000, 64_000),
    _l("claude-haiku-4", "anthropic:claude-haiku-4*", 200_000, 64_000),
    _l("claude-opus-4", "anthropic:claude-opus-4*", 200_000, 32_000),
    _l("claude-opus-4-5", "anthropic:claude-opus-4-5*", 200_000, 64_000),
    _l("openai-default", "openai*:*", 128_000, 16_384),
    _l("gpt-4o", "openai*:gpt-4o*", 128_000, 16_384),
    _l("gpt-4.1", "openai*:gpt-4.1*", 1_047_576, 32_768),
    _l("gpt-4-turbo", "openai*:gpt-4-turbo*", 128_000, 4_096),
    _l("gpt-4", "openai*:gpt-4", 8_192, 8_192),
    _l("gpt-3.5-turbo", "openai*:gpt-3.5-turbo*", 16_385, 4_096),
    _l("openai-o-series", "openai*:o[134]*", 200_000, 100_000),
    _l("gpt-5", "openai*:gpt-5*", 400_000, 128_000),
    _l("gemini-default", "gemini:*", 1_048_576, 8_192),
    _l("gemini-1.5-pro", "gemini:gemini-1.5-pro*", 2_097_152, 8_192),
    _l("gemini-2.5", "gemini:gemini-2.5-*", 1_048_576, 65_536),
    _l("gemini-3", "gemini:gemini-3*", 1_048_576, 65_536),
)


def _specificity(pattern: str) -> int:
    return sum(1 for c in pattern if c not in "*?[]")


def resolve_limits(spec: str) -> ModelLimits:
    """Limits of ``"provider:model"``; ``ProviderError`` when nothing matches.

    ``spec`` may name a provider (``openai-chat:gpt-4o``) or a family (``openai:gpt-4o``).
    """
    from ..plugins import registry

    if ":" not in spec:
        raise ProviderError(
            f"model {spec!r} is not of the form provider:model",
            hint="e.g. anthropic:claude-sonnet-4-5 or openai:gpt-4o",
        )
    best: tuple[int, int, ModelLimits] | None = None
    for order, obj in enumerate(registry("providers").items.values()):
        if isinstance(obj, ModelLimits) and fnmatch.fnmatchcase(spec, obj.pattern):
            key = (_specificity(obj.pattern), order, obj)
            if best is None or key[:2] >= best[:2]:
                best = key
    if best is None:
        raise ProviderError(
            f"no context window known for {spec!r}",
            hint="register a ctxrules.providers.ModelLimits for it in a plugin",
        )
    return best[2]
