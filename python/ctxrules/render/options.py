"""What every render path shares: the options of a render (``request_options``), the
commit as the core is handed it, the system layers, tool declarations in any vendor's
shape, and the checks of a model against its provider."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..errors import RenderError
from ..model import ContextCommit, ContextItem, ToolSpec
from ..providers import get_provider
from ..providers.base import NativeForm, Provider, RequestOptions, SystemBlock
from ..providers.models import model_families, model_in_family

__all__ = [
    "DEFAULT_OUTPUT_RESERVE",
    "SystemArg",
    "check_model",
    "default_max_tokens",
    "encode_commit",
    "layer_texts",
    "provider_of",
    "request_options",
    "system_blocks",
    "tool_specs",
    "tool_tuple",
]

#: Output reserve used for ``max_tokens`` when a vendor requires one (16K, a common agent default).
DEFAULT_OUTPUT_RESERVE = 16_384


SystemArg = str | Sequence[str] | None


def encode_commit(commit: ContextCommit | bytes) -> tuple[bytes | tuple[ContextItem, ...], str]:
    """What the core is handed for a commit: its bytes as given, or its item tuple (the
    core finds the items it prepared before, see ``_core.render_request``)."""
    if isinstance(commit, bytes):
        return commit, "commit"
    if not isinstance(commit, ContextCommit):
        raise RenderError(
            f"expected a ContextCommit, got {type(commit).__name__}",
            hint="pass the result of ensure_latest_commit(), or msgspec.msgpack.encode(commit)",
        )
    return commit.items, f"commit {commit.id}"


def system_blocks(system: SystemArg, situation: SystemArg) -> tuple[SystemBlock, ...]:
    return tuple(
        SystemBlock(t, layer)
        for layer, value in ((0, system), (1, situation))
        for t in layer_texts(value)
    )


def layer_texts(value: SystemArg) -> list[str]:
    """The non-empty texts of one layer argument (``None``, ``""`` and ``[]`` alike)."""
    return [t for t in ([value] if isinstance(value, str) else list(value or ())) if t]


def tool_tuple(tools: Sequence[ToolSpec | Mapping[str, Any]]) -> tuple[ToolSpec, ...]:
    try:
        return tuple(t if isinstance(t, ToolSpec) else msgspec.convert(t, ToolSpec) for t in tools)
    except msgspec.ValidationError as exc:
        raise RenderError(
            f"invalid tool: {exc}", hint="tools need name, description, input_schema"
        ) from None


def tool_specs(raw: Any) -> tuple[ToolSpec, ...]:
    """Tool declarations in any built-in vendor's shape (or ToolSpec dicts) as ToolSpecs.

    Accepts Anthropic ``{name, description, input_schema}``, Chat Completions
    ``{type: function, function: {...}}``, Responses ``{type: function, name, parameters}``
    and Gemini ``{functionDeclarations: [...]}``; anything else is skipped.
    """
    out: list[ToolSpec] = []
    for t in raw if isinstance(raw, list) else []:
        if not isinstance(t, Mapping):
            continue
        decls = t.get("functionDeclarations") or t.get("function_declarations")
        if isinstance(decls, list):
            out.extend(tool_specs(decls))
            continue
        inner = t.get("function")
        fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else t
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        schema = next(
            (
                fn[k]
                for k in (
                    "input_schema",
                    "parameters",
                    "parametersJsonSchema",
                    "parameters_json_schema",
                )
                if isinstance(fn.get(k), Mapping)
            ),
            {"type": "object", "properties": {}},
        )
        out.append(
            ToolSpec(
                name=name, description=str(fn.get("description") or ""), input_schema=dict(schema)
            )
        )
    return tuple(out)


def provider_of(provider: str | Provider) -> Provider:
    """The registered provider of a name, or the provider given."""
    return get_provider(provider) if isinstance(provider, str) else provider


def default_max_tokens(provider: Provider, model: str) -> int:
    """The ``max_tokens`` sent when a vendor requires one and none was given: the
    model's output limit, at most ``DEFAULT_OUTPUT_RESERVE``."""
    profile = provider.model_profile(model)
    return min(profile.max_output_tokens, DEFAULT_OUTPUT_RESERVE)


def check_model(provider: Provider, model: str) -> None:
    """``RenderError`` when ``model`` belongs to another known family than ``provider``
    (``--provider anthropic --model gpt-4o``); custom names pass (``model_in_family``)."""
    family = provider.model_family
    if model_in_family(model, family) is False:
        others = " / ".join(model_families(model))
        raise RenderError(
            f"model {model!r} belongs to the {others} family, and provider "
            f"{provider.name!r} sends {family} models",
            where=f"provider {provider.name}",
            hint=f"choose a model of the {family} family (e.g. {provider.default_model}), "
            f"or a provider of the {others} family",
        )


def request_options(
    provider: Provider,
    model: str | None = None,
    *,
    system: SystemArg = None,
    situation: SystemArg = None,
    tools: Sequence[ToolSpec | Mapping[str, Any]] = (),
    max_tokens: int | None = None,
    extra: Mapping[str, Any] | None = None,
    cache: bool = True,
    cache_ttl: str | None = None,
    native: NativeForm | None = None,
) -> RequestOptions:
    """Build the ``RequestOptions`` of a render, filling the model and, where the vendor
    requires it, ``max_tokens`` (``default_max_tokens``).  ``RenderError`` when the
    model belongs to another provider family (``check_model``).  ``native``: the
    recorded form of the request a session replays (``ctxrules.render.native``)."""
    model = model or provider.default_model
    if native is None or model != native.model:
        # The recorded request's own model was sent on this wire already.
        check_model(provider, model)
    if max_tokens is None and provider.requires_max_tokens:
        max_tokens = default_max_tokens(provider, model)
    return RequestOptions(
        model=model,
        max_tokens=max_tokens,
        system=system_blocks(system, situation),
        tools=tool_tuple(tools),
        extra=dict(extra or {}),
        cache=cache,
        cache_ttl=cache_ttl,
        native=native,
    )
