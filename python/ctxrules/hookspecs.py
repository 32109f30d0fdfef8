"""Hook specifications: the contract between ctxrules and its plugins.

Every hook is a *register* hook (the simonw/llm pattern): ctxrules calls it once, the
first time a registry of that kind is needed, and hands the plugin a ``register``
callback.  A plugin calls ``register(obj)`` once per thing it provides, so one plugin
can ship many rules, providers, … .  Behaviour lives on the registered objects (see the
base classes named below), not in more hooks, and no hook is ever called per item or
per token.

Results combine by registration: every plugin's hook runs (none is ``firstresult``),
each registered object is keyed by its ``name``, and a name registered twice is an
error naming both plugins.  Hooks are called with keyword arguments only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

__all__ = ["PROJECT", "hookimpl", "hookspec"]

PROJECT = "ctxrules"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

Register = Callable[[Any], None]


@hookspec
def register_tokenizers(register: Register) -> None:
    """Register token counters.

    Called once, the first time a tokenizer is looked up.  ``register(tokenizer)``
    takes an object with ``name: str``, ``count(text: str) -> int`` and
    ``count_batch(texts: list[str]) -> list[int]`` (see
    ``ctxrules.tokenizers.Tokenizer``).  Register ``ctxrules.tokenizers.ModelTokenizer``
    values too, to map ``"provider:model"`` patterns to a tokenizer and a calibration
    factor.  Mappings from third-party plugins are tried before the built-in ones,
    whatever the load order, so a plugin can override how a model is counted.
    """


@hookspec
def register_rules(register: Register) -> None:
    """Register context rules.

    Called once, the first time the rule registry is needed (building a pipeline).
    ``register(rule_class)`` takes a subclass of ``ctxrules.rules.Rule`` with a unique
    ``name``; the pipeline order and parameters come from configuration, not from
    registration order.
    """


@hookspec
def register_providers(register: Register) -> None:
    """Register providers (wire formats).

    Called once, the first time a provider is looked up.  ``register(provider)`` takes
    a ``ctxrules.providers.Provider`` with a unique ``name`` such as ``"anthropic"``.
    Register ``ctxrules.providers.ModelLimits`` values too, to add or correct the
    context window and output limit of ``"provider:model"`` patterns.  A provider
    without a built-in ``wire`` overrides ``build_body(context, options)``: it gets the
    provider-neutral ``Context`` (tool calls already paired) and returns the body dict.
    """


@hookspec
def register_summarizers(register: Register) -> None:
    """Register summarizers.

    Called once, the first time a summarizer is looked up.  ``register(summarizer)``
    takes an object with ``name: str`` and ``summarize(items, *, budget) -> str`` (see
    ``ctxrules.summarizers.Summarizer``).
    """


@hookspec
def register_context_sources(register: Register) -> None:
    """Register context sources (git status, instruction files, date, …).

    Called once, the first time the engine assembles a system prompt.
    ``register(source)`` takes an object with ``name: str`` and ``collect(session) ->
    str | None``; results are memoised per session by the engine.
    """


@hookspec
def register_importers(register: Register) -> None:
    """Register transcript importers.

    Called once, the first time an import runs.  ``register(importer)`` takes an object
    with ``name: str``, ``detect(path, head: bytes) -> bool`` and ``parse(path) ->
    list[ImportedSession]`` (see ``ctxrules.importers.Importer``).
    """
