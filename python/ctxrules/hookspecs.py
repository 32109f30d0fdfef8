"""Hook specifications: the contract between ctxrules and its plugins.

Two families.  Most hooks are *register* hooks (the simonw/llm pattern): ctxrules calls
each once, the first time a registry of that kind is needed, and hands the plugin a
``register`` callback.  A plugin calls ``register(obj)`` once per thing it provides, so one plugin
can ship many rules, providers, … .  Behaviour lives on the registered objects (see the
base classes named below), not in more hooks, and no hook is ever called per item or
per token.

Each hook's callback has its own type (``RegisterRules`` takes a ``Rule`` subclass,
``RegisterProviders`` a ``Provider``, …), so a type checker catches a plugin that hands
one kind's object to another kind's hook.

Results combine by registration: every plugin's hook runs (none is ``firstresult``),
each registered object is keyed by its ``name``, and a name registered twice is an
error naming both plugins.  Hooks are called with keyword arguments only.

A few *event* hooks tell plugins about a moment of a session's life — a compaction
(``pre_compact``, ``session_start``, ``post_compact``).  Each takes one frozen struct
argument, ``event``, so a field can be added without breaking a plugin; every
implementation runs, in load order, and the hook says what its results do.  An event
hook runs once per event, never per item or token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # the registered types live above this module; only types are needed
    from .compaction import PostCompactEvent, PreCompactEvent, SessionStartEvent
    from .context_sources import ContextSource
    from .importers import Importer
    from .providers import ModelInfo, Provider
    from .ruleapi import Rule
    from .summarizers import Summarizer
    from .tokenizers import Tokenizer

__all__ = [
    "PROJECT",
    "RegisterContextSources",
    "RegisterImporters",
    "RegisterModels",
    "RegisterProviders",
    "RegisterRules",
    "RegisterSummarizers",
    "RegisterTokenizers",
    "hookimpl",
    "hookspec",
]

PROJECT = "ctxrules"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# The callback each hook receives.  Forward references (strings) keep this module free
# of run-time imports of the kinds it describes: the plugin loader imports it first.
RegisterTokenizers = Callable[["Tokenizer"], None]
RegisterModels = Callable[["ModelInfo"], None]
RegisterRules = Callable[[type["Rule"]], None]
RegisterProviders = Callable[["Provider"], None]
RegisterSummarizers = Callable[["Summarizer"], None]
RegisterContextSources = Callable[["ContextSource"], None]
RegisterImporters = Callable[["Importer"], None]


@hookspec
def register_tokenizers(register: RegisterTokenizers) -> None:
    """Register token counters.

    Called once, the first time a tokenizer is looked up.  ``register(tokenizer)``
    takes an object with ``name: str``, ``count(text: str) -> int`` and
    ``count_batch(texts: list[str]) -> list[int]`` (see
    ``ctxrules.tokenizers.Tokenizer``).  Which tokenizer counts a model is model data:
    see ``register_models``.
    """


@hookspec
def register_models(register: RegisterModels) -> None:
    """Register facts about models: limits, tokenizer, cache minimum, prices.

    Called once, the first time a model is resolved (``ctxrules.resolve_model``).
    ``register(info)`` takes a ``ctxrules.providers.ModelInfo``: an ``fnmatch`` pattern
    over ``"provider:model"`` and the fields it states (``None`` leaves a field to less
    specific entries).  For each field the most specific matching pattern that states
    it wins; on equal specificity a plugin's entry beats a built-in one, whatever the
    load order, and between plugins the first registered wins.
    """


@hookspec
def register_rules(register: RegisterRules) -> None:
    """Register context rules.

    Called once, the first time the rule registry is needed (building a pipeline).
    ``register(rule_class)`` takes a subclass of ``ctxrules.rules.Rule`` with a unique
    ``name``; the pipeline order and parameters come from configuration, not from
    registration order.
    """


@hookspec
def register_providers(register: RegisterProviders) -> None:
    """Register providers (wire formats).

    Called once, the first time a provider is looked up.  ``register(provider)`` takes
    a ``ctxrules.providers.Provider`` with a unique ``name`` such as ``"anthropic"``.
    A provider's models (context window, output limit, …) are registered through
    ``register_models``.  A provider without a built-in ``wire`` overrides
    ``build_body(context, options)``: it gets the provider-neutral ``Context`` (tool
    calls already paired) and returns the body dict.
    """


@hookspec
def register_summarizers(register: RegisterSummarizers) -> None:
    """Register summarizers.

    Called once, the first time a summarizer is looked up.  ``register(summarizer)``
    takes an object with ``name: str``, ``summarize(items, *, budget, instructions="")
    -> str`` and optionally ``max_input_tokens: int | None`` and ``bounded: bool`` (see
    ``ctxrules.summarizers.Summarizer``).
    """


@hookspec
def register_context_sources(register: RegisterContextSources) -> None:
    """Register context sources (git status, instruction files, date, …).

    Called once, the first time a context source is looked up.  ``register(source)``
    takes a ``ctxrules.context_sources.ContextSource``: ``name: str`` and
    ``collect(request: SourceRequest) -> str | None``, where the request carries the
    session id, the working directory, the added directories, the session metadata,
    the caller's clock and the sources configuration.  The caller memoises each result
    per session (so the prompt prefix stays stable) and collects again exactly once
    after each compaction.
    """


@hookspec
def register_importers(register: RegisterImporters) -> None:
    """Register transcript importers.

    Called once, the first time an import runs.  ``register(importer)`` takes an object
    with ``name: str``, ``detect(path, head: bytes) -> bool`` and ``parse(path) ->
    list[ImportedSession]`` (see ``ctxrules.importers.Importer``).
    """


# -- event hooks ---------------------------------------------------------------------------


@hookspec
def pre_compact(event: PreCompactEvent) -> str | None:
    """Before a compaction asks for its summary.

    Called by ``ctxrules.compaction.compact`` once per compaction (manual, partial,
    automatic or reactive), before anything is summarised or stored; ``event`` says
    which session, its HEAD, the trigger, direction and pivot, the user's instructions
    and the tokens the request carries now.  Return text to add to the summary's
    instructions (e.g. "keep the migration plan verbatim"), or ``None``.  An exception
    stops the compaction before it changes anything (``PluginError`` naming the plugin).
    """


@hookspec
def session_start(event: SessionStartEvent) -> str | None:
    """When a session starts afresh: after a compaction (``event.source == "compact"``).

    Called by ``ctxrules.compaction.compact`` once per compaction, after the summary and
    before the boundary is stored; ``event`` names the session, the boundary node that
    will be appended and the working directory.  Return text the model should see again
    after the compaction (it joins the restored files, plan and skills in the user
    message that follows the boundary), or ``None``.  An exception stops the compaction
    before it changes anything.
    """


@hookspec
def post_compact(event: PostCompactEvent) -> None:
    """After a compaction was stored.

    Called by ``ctxrules.compaction.compact`` once per successful compaction, with the
    ``CompactResult`` (boundary node, record with tokens before and after, the commit
    now at HEAD).  The return value is ignored; an exception does not undo the
    compaction: it is kept in the result's ``notes``.
    """
