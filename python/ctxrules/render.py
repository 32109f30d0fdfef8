"""Rendering: a commit → provider-neutral messages, or a provider's request body.

Both paths run in Rust from one boundary crossing per commit: the commit goes over as
msgspec MessagePack bytes (its texts then need no unescaping in Rust), the body (or the
neutral context) comes back as JSON bytes.  There is no Python work per item.
Rendering is a pure function of its inputs — the commit and finished system layers and
options; it reads no clock, no store and no randomness — so the same inputs give the
same bytes in every process (invariant 8 of docs/rules.md).

The request is composed by stability so prompt caches hit: L0 is constant for the
session (``system`` text and the tool list), L1 is the situation (``situation`` text,
which the caller builds — from the call tree with ``ctxrules.situation.commit_situation``
— and the commit's system items), L2 the conversation.  Anthropic gets cache
breakpoints at those boundaries.  ``explain`` estimates what the provider would bill
for the body (``input_tokens``, the provider's rules in ``ctxrules.providers.estimate``)
and what it would read from and write to its prompt cache against the previous request
(``ctxrules.providers.cache``).

What a session recorded about its requests (system text, tool declarations, model,
request parameters: ``recorded_request``) becomes render options through
``session_defaults``, the one place that decides them; ``ctxrules.replay.render_defaults``
adds what the store knows (the answer's model, the tools the session called).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import msgspec

from . import _core
from .errors import RenderError
from .importers._defaults import NOT_PARAMS, WIRE_PROVIDERS
from .model import Context, ContextCommit, ContextItem, Message, ToolSpec
from .providers.base import (
    BAD_COMMIT,
    Provider,
    RenderedRequest,
    RequestOptions,
    SystemBlock,
    neutral_context,
)
from .providers.estimate import PromptEstimate
from .providers.models import model_families, model_in_family, resolve_model

__all__ = [
    "RecordedRequest",
    "RenderDefaults",
    "cache_stats",
    "check_model",
    "clear_cache",
    "default_max_tokens",
    "estimate_request",
    "explain",
    "header_tokens",
    "recorded_request",
    "render",
    "render_batch",
    "render_commit",
    "render_context",
    "render_request",
    "render_session",
    "render_sessions",
    "render_side_request",
    "request_options",
    "session_defaults",
    "set_cache_capacity",
    "tool_specs",
]

#: Output reserve used for ``max_tokens`` when a vendor requires one (16K, a common agent default).
DEFAULT_OUTPUT_RESERVE = 16_384


SystemArg = str | Sequence[str] | None


def _encode(commit: ContextCommit | bytes) -> tuple[bytes | tuple[ContextItem, ...], str]:
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


def _system_blocks(system: SystemArg, situation: SystemArg) -> tuple[SystemBlock, ...]:
    return tuple(
        SystemBlock(t, layer)
        for layer, value in ((0, system), (1, situation))
        for t in _layer_texts(value)
    )


def _layer_texts(value: SystemArg) -> list[str]:
    """The non-empty texts of one layer argument (``None``, ``""`` and ``[]`` alike)."""
    return [t for t in ([value] if isinstance(value, str) else list(value or ())) if t]


def _model_spec(provider: Provider, model: str) -> str:
    return f"{provider.family or provider.name}:{model}"


def _tools(tools: Sequence[ToolSpec | Mapping[str, Any]]) -> tuple[ToolSpec, ...]:
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


#: What a model name looks like; anything else (Claude Code's ``<synthetic>``) is no model.
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*")


class RecordedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a session's metadata says its requests carried (``recorded_request``).

    ``system`` is the recorded system prompt (informational: the history holds it as a
    system node too); ``tools`` is ``None`` when no declarations were recorded (``()``:
    recorded as none); ``provider`` the provider whose wire it was recorded from;
    ``params`` the other request parameters in that provider's own shape (max_tokens,
    tool_choice, …).
    """

    system: str | None = None
    tools: tuple[ToolSpec, ...] | None = None
    model: str | None = None
    provider: str | None = None
    params: dict[str, Any] = {}


def recorded_request(metadata: Mapping[str, Any]) -> RecordedRequest:
    """The recorded request of a session, from its metadata.

    Importers set ``system`` (str), ``tools`` (a list in any vendor's shape),
    ``model``, ``provider`` and ``params``.  A cassette keeps the whole recorded body
    (without its conversation) as ``request`` and its API as ``wire``: tools, model
    (or the model in a Gemini URL), provider and parameters are read from those when
    the fields above are absent; the parameters are the keys the importers take for
    parameters (``NOT_PARAMS`` is their one list of the others: conversation, system,
    tools, model, streaming), so a recording without any reads as none.
    """
    raw = metadata.get("request")
    request: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    system = metadata.get("system")
    raw_tools = metadata.get("tools", request.get("tools"))
    model = metadata.get("model") or request.get("model")
    uri = metadata.get("uri")
    if not model and isinstance(uri, str) and "/models/" in uri:  # Gemini: model in the URL
        model = uri.rsplit("/models/", 1)[1].split(":")[0]
    provider = metadata.get("provider") or WIRE_PROVIDERS.get(str(metadata.get("wire")))
    params = metadata.get("params")
    if not isinstance(params, Mapping):
        params = {k: v for k, v in request.items() if k not in NOT_PARAMS}
    return RecordedRequest(
        system=system if isinstance(system, str) and system else None,
        tools=tool_specs(raw_tools) if isinstance(raw_tools, list) else None,
        model=model if isinstance(model, str) and model else None,
        provider=provider if isinstance(provider, str) and provider else None,
        params=dict(params),
    )


class RenderDefaults(msgspec.Struct, frozen=True, kw_only=True):
    """The render options of a session's request and how each was chosen.

    ``options`` are keyword options of ``render`` / ``explain`` (``model``,
    ``system``, ``tools``, ``max_tokens``, ``extra``: only those that were chosen);
    ``explain`` says where each came from (``model``, ``system``, ``tools``,
    ``params``), which ``explain_request`` adds to its breakdown.
    """

    options: dict[str, Any]
    explain: dict[str, Any]


def _provider(provider: str | Provider) -> Provider:
    """The registered provider of a name, or the provider given."""
    from .providers import get_provider

    return get_provider(provider) if isinstance(provider, str) else provider


def _family_of(provider: str | None) -> str | None:
    """The model family of a provider name (``openai-chat`` → ``openai``)."""
    from .providers import provider_names

    if provider is None:
        return None
    if provider in provider_names():
        prov = _provider(provider)
        return prov.family or prov.name
    return provider


def default_max_tokens(provider: Provider, model: str) -> int:
    """The ``max_tokens`` sent when a vendor requires one and none was given: the
    model's output limit, at most ``DEFAULT_OUTPUT_RESERVE``."""
    profile = resolve_model(_model_spec(provider, model))
    return min(profile.max_output_tokens, DEFAULT_OUTPUT_RESERVE)


def check_model(provider: Provider, model: str) -> None:
    """``RenderError`` when ``model`` belongs to another known family than ``provider``
    (``--provider anthropic --model gpt-4o``); custom names pass (``model_in_family``)."""
    family = provider.family or provider.name
    if model_in_family(model, family) is False:
        others = " / ".join(model_families(model))
        raise RenderError(
            f"model {model!r} belongs to the {others} family, and provider "
            f"{provider.name!r} sends {family} models",
            where=f"provider {provider.name}",
            hint=f"choose a model of the {family} family (e.g. {provider.default_model}), "
            f"or a provider of the {others} family",
        )


def _choose_model(
    prov: Provider, rec: RecordedRequest, answer_model: str | None, model: str | None
) -> tuple[str | None, dict[str, Any]]:
    """The model of a session's request: the option, else the recorded one (the answer
    node's, then the session's) when it belongs to the provider's family, else none
    (the provider's default)."""
    if model:
        return model, {"source": "option"}
    family = prov.family or prov.name
    notes: list[str] = []
    for candidate, source in ((answer_model, "answer node"), (rec.model, "session")):
        if not candidate:
            continue
        if not _MODEL_NAME.fullmatch(candidate):
            notes.append(f"recorded {candidate!r} is not a model name")
            continue
        belongs = model_in_family(candidate, family)
        if belongs or (belongs is None and _family_of(rec.provider) in (None, family)):
            return candidate, {"source": source, "recorded": candidate}
        owner = " / ".join(model_families(candidate)) or (rec.provider or "another")
        notes.append(f"recorded {candidate!r} belongs to the {owner} family: not sent")
    recorded = answer_model or rec.model
    out: dict[str, Any] = {"source": "provider default", "recorded": recorded}
    if notes:
        out["note"] = "; ".join(notes)
    return None, out


def _pop_path(params: dict[str, Any], path: tuple[str, ...]) -> Any:
    """Remove and return ``params[path[0]][path[1]]…`` (``None`` when absent); a parent
    left empty is removed too."""
    head, *rest = path
    if not rest:
        return params.pop(head, None)
    inner = params.get(head)
    if not isinstance(inner, Mapping):
        return None
    inner = dict(inner)
    value = _pop_path(inner, tuple(rest))
    if inner:
        params[head] = inner
    else:
        params.pop(head)
    return value


def _recorded_max_tokens(
    rec: RecordedRequest, params: dict[str, Any]
) -> tuple[int | None, tuple[str, ...] | None]:
    """The output limit among the recorded parameters (taken out of ``params``), and
    the field it was recorded under."""
    from .providers import provider_names

    if rec.provider is not None and rec.provider in provider_names():
        fields = _provider(rec.provider).max_tokens_fields
    else:
        fields = (("max_tokens",),)
    for path in fields:
        value = _pop_path(params, path)
        if value is not None:
            ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
            return (value if ok else None), path
    return None, None


def _choose_params(
    prov: Provider,
    rec: RecordedRequest,
    model: str,
    max_tokens: int | None,
    extra: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``max_tokens`` and ``extra`` options from the recorded parameters: the output limit
    is neutral (mapped to the provider's field); the rest passes through only to the
    provider it was recorded from (a vendor-shaped ``tool_choice`` means nothing to
    another).  Returns the options and what ``explain`` says about them."""
    params = dict(rec.params)
    recorded_max, path = _recorded_max_tokens(rec, params)
    same = rec.provider == prov.name
    options: dict[str, Any] = {}
    passed: dict[str, Any] = {}
    applied: list[str] = []
    dropped: list[str] = []
    where = ".".join(path) if path else None
    if max_tokens is not None:
        options["max_tokens"] = max_tokens
        if where:
            dropped.append(f"{where} (--max-tokens given)")
    elif recorded_max is not None and where:
        if same and path != prov.max_tokens_fields[0]:
            passed[where] = recorded_max  # an older field name, sent as recorded
        else:
            options["max_tokens"] = recorded_max
        applied.append(where)
    elif where:
        dropped.append(f"{where} (not a positive int)")
    for key, value in params.items():
        if not same:
            dropped.append(f"{key} (recorded for {rec.provider or 'another provider'})")
        elif key in prov.reserved:
            dropped.append(f"{key} (written by the renderer)")
        else:
            passed[key] = value
            applied.append(key)
    if extra:
        passed.update(extra)
    if passed:
        options["extra"] = passed
    notes: dict[str, Any] = {
        "recorded_from": rec.provider,
        "applied": applied,
        "dropped": dropped,
        "added": {},
    }
    if "max_tokens" not in options and prov.requires_max_tokens:
        # The vendor requires it: the default, said so.
        notes["added"]["max_tokens"] = default_max_tokens(prov, model)
    return options, notes


def session_defaults(
    metadata: Mapping[str, Any],
    provider: str | Provider,
    *,
    used_tools: Sequence[str] = (),
    answer_model: str | None = None,
    model: str | None = None,
    system: SystemArg = None,
    tools: Sequence[ToolSpec | Mapping[str, Any]] | None = None,
    max_tokens: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> RenderDefaults:
    """The render options of a session's request for ``provider``: what was recorded
    (``recorded_request``), with the given options taking precedence.

    * model: ``model``, else the recorded one (``answer_model`` — the model that
      answered the request — then the session's) when it belongs to the provider's
      family (``model_in_family``; a name no family knows is used when it was
      recorded for this provider's family), else the provider's default;
    * system text: ``system`` (``""``: none), else none besides the commit's system
      items, which carry the recorded system prompt (importers keep it as a system node);
    * tools: ``tools`` (``[]``: none), else the recorded declarations, else — a format
      that records calls but no declarations (Claude Code) — each tool in
      ``used_tools`` (every tool the session called, so the declarations stay the same
      for the whole session) declared with an open schema, sorted by name;
    * ``max_tokens``: the option, else the recorded output limit (from any vendor's
      field); the other recorded parameters (tool_choice, thinking, …) become
      ``extra`` only for the provider they were recorded for; ``extra`` adds to them.

    Nothing else is added: where the vendor requires ``max_tokens`` and none was
    recorded, the model's default is what ``render`` sends, and ``explain`` says so.
    """
    prov = _provider(provider)
    rec = recorded_request(metadata)
    chosen, model_notes = _choose_model(prov, rec, answer_model, model)
    options: dict[str, Any] = {}
    if chosen:
        options["model"] = chosen
    # The recorded system text is not a default: importers keep it as the history's
    # system node as well (docs/sessions.md), and the commit's system items carry it.
    if system is not None:
        options["system"] = system
        system_source = "option"
    else:
        system_source = "history" if rec.system else "none"
    inferred: list[str] = []
    if tools is not None:
        specs = tuple(s for t in tools for s in _any_tool(t))
        tools_source = "option"
    elif rec.tools:
        specs, tools_source = rec.tools, "recorded"
    elif used_tools:
        inferred = sorted(set(used_tools))
        # No declaration was recorded: any arguments are allowed (an open schema).
        specs = tuple(ToolSpec(name=n, input_schema={"type": "object"}) for n in inferred)
        tools_source = "inferred from the session's tool calls"
    else:
        specs, tools_source = (), "none"
    if specs:
        options["tools"] = specs
    params, params_notes = _choose_params(
        prov, rec, chosen or prov.default_model, max_tokens, extra
    )
    options.update(params)
    return RenderDefaults(
        options=options,
        explain={
            "model": model_notes,
            "system": {"source": system_source},
            "tools": {"declared": len(specs), "inferred": inferred, "source": tools_source},
            "params": params_notes,
        },
    )


def _any_tool(tool: ToolSpec | Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    """A ``ToolSpec``, or one tool mapping in any vendor's shape (``tool_specs``);
    ``RenderError`` if it is none of them."""
    if isinstance(tool, ToolSpec):
        return (tool,)
    specs = tool_specs([tool])
    if not specs:
        raise RenderError(
            f"not a tool declaration: {str(dict(tool))[:80]}",
            hint="give name and input_schema (Anthropic), or a function (OpenAI, Gemini)",
        )
    return specs


def render_context(
    commit: ContextCommit | bytes,
    *,
    system: SystemArg = None,
    situation: SystemArg = None,
    tools: Sequence[ToolSpec | Mapping[str, Any]] = (),
) -> Context:
    """The provider-neutral ``Context`` of a commit: what plugin providers build bodies from.

    ``system`` texts are the session-constant layer, ``situation`` texts the situation
    layer; the commit's system items follow them.
    """
    data, where = _encode(commit)
    options = RequestOptions(
        model="", system=_system_blocks(system, situation), tools=_tools(tools)
    )
    return neutral_context(data, options, where=where)


def render_commit(commit: ContextCommit | bytes) -> list[Message]:
    """Provider-neutral messages of a commit (the item rules: docs/items.md).

    ``summarized`` items are skipped, ``summary`` items become assistant text prefixed
    ``[Summary]``, tool items become a tool_use on their assistant turn and a tool_result
    opening the next user message — or user text where the pairing is really missing.
    Pure: the same commit gives the same messages.
    """
    return list(render_context(commit).messages)


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
) -> RequestOptions:
    """Build the ``RequestOptions`` of a render, filling the model and, where the vendor
    requires it, ``max_tokens`` (``default_max_tokens``).  ``RenderError`` when the
    model belongs to another provider family (``check_model``)."""
    model = model or provider.default_model
    check_model(provider, model)
    if max_tokens is None and provider.requires_max_tokens:
        max_tokens = default_max_tokens(provider, model)
    return RequestOptions(
        model=model,
        max_tokens=max_tokens,
        system=_system_blocks(system, situation),
        tools=_tools(tools),
        extra=dict(extra or {}),
        cache=cache,
        cache_ttl=cache_ttl,
    )


def render(
    commit: ContextCommit | bytes,
    provider: str | Provider,
    model: str | None = None,
    **options: Any,
) -> RenderedRequest:
    """Render a commit for a provider: body bytes, endpoint and a breakdown (``meta``).

    Keyword options are those of ``request_options`` (system, situation, tools,
    max_tokens, extra, cache, cache_ttl).  ``system`` and ``situation`` are the finished
    L0 and L1 texts: the situation of a stored commit comes from
    ``ctxrules.situation.commit_situation(store, commit)``, called by whoever holds the
    store (the CLI; the turn engine).  Without a ``situation`` there is no L1 text.
    """
    prov = _provider(provider)
    if not isinstance(commit, (ContextCommit, bytes)):
        _encode(commit)  # raises the clear type error
    return prov.render(commit, request_options(prov, model, **options))


def render_request(
    commit: ContextCommit | bytes,
    provider: str | Provider,
    model: str | None = None,
    **options: Any,
) -> bytes:
    """The request body bytes, exactly as they would be sent (see ``render``)."""
    return render(commit, provider, model, **options).body


def render_side_request(
    provider: str | Provider,
    model: str | None,
    system: str,
    text: str,
    *,
    max_tokens: int | None = None,
) -> RenderedRequest:
    """A minimal request off the main path (a summary, a branch summary, a title):
    ``system`` and one user message ``text``; no tools, no history, no situation and no
    cache breakpoints.  ``max_tokens`` as in ``request_options``."""
    item = ContextItem(source_node_id="side", role="user", rendered=text)
    commit = ContextCommit(
        id="side", session_id="", head_node_id="side", rules_version="", items=(item,)
    )
    return render(
        commit, provider, model, system=system or None, max_tokens=max_tokens, cache=False
    )


def cache_stats() -> dict[str, int]:
    """What the core's item caches hold: ``items`` / ``bytes`` / ``hits`` / ``misses``
    of the cache of items prepared from commit bytes (found by their exact bytes),
    ``objects`` / ``object_bytes`` / ``object_hits`` of the table of ``ContextItem``s
    prepared from commits (found by identity; it keeps those objects alive), and
    ``capacity``, the bound of each in bytes (when an insert would pass it, that cache
    starts over)."""
    return _core.item_cache_stats()


def clear_cache() -> None:
    """Empty the core's item caches (the next render of any commit prepares it again)."""
    _core.item_cache_clear()


def set_cache_capacity(capacity: int) -> None:
    """Bound each of the core's item caches to ``capacity`` bytes (0: cache nothing);
    applies from the next insert.  The default is 128 MiB each."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise RenderError(
            f"cache capacity must be a non-negative int of bytes, not {capacity!r}",
            where="set_cache_capacity",
        )
    _core.set_item_cache_capacity(capacity)


#: Most threads ``render_batch`` may be given.
MAX_THREADS = 1024


def _check_threads(threads: int | None, where: str) -> None:
    """``RenderError`` unless ``threads`` is None or an int from 1 to ``MAX_THREADS``."""
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS
    ):
        raise RenderError(
            f"threads must be an int from 1 to {MAX_THREADS} or None, not {threads!r}",
            where=where,
        )


@overload
def render_batch(
    commits: Sequence[ContextCommit | bytes],
    providers: Sequence[str | Provider],
    *,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    threads: int | None = None,
    errors: Literal["raise"] = "raise",
) -> list[list[RenderedRequest]]: ...


@overload
def render_batch(
    commits: Sequence[ContextCommit | bytes],
    providers: Sequence[str | Provider],
    *,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    threads: int | None = None,
    errors: Literal["return"],
) -> list[list[RenderedRequest | RenderError]]: ...


def render_batch(
    commits: Sequence[ContextCommit | bytes],
    providers: Sequence[str | Provider],
    *,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    threads: int | None = None,
    errors: Literal["raise", "return"] = "raise",
) -> list[list[RenderedRequest]] | list[list[RenderedRequest | RenderError]]:
    """Render every commit for every provider in one crossing into Rust.

    ``result[i][j]`` is ``commits[i]`` rendered for ``providers[j]``: the same request,
    byte for byte, as ``render(commits[i], providers[j], **options_i)``.  ``options`` are
    the keyword options of ``render`` (``model``, ``system``, ``situation``, ``tools``,
    ``max_tokens``, ``extra``, ``cache``, ``cache_ttl``): one mapping for all commits, or
    one per commit.

    With the GIL released, each commit is decoded once and all bodies are rendered in
    parallel: on rayon's global pool (every core, or ``RAYON_NUM_THREADS``) when
    ``threads`` is None, else on a pool of exactly ``threads`` threads (1 to
    ``MAX_THREADS``; pools are kept per size).  Every body is held until the call returns,
    so render a large corpus in chunks.  Providers without a built-in wire format are
    rendered one by one through their ``build_body``.  With ``errors="raise"`` the first
    failure raises ``RenderError`` (naming the commit and provider); with
    ``errors="return"`` it takes that request's place in the result.
    """
    _check_threads(threads, "render_batch")
    provs = [_provider(p) for p in providers]
    encoded = [_encode(c) for c in commits]
    if options is None or isinstance(options, Mapping):
        per_commit: list[Mapping[str, Any]] = [options or {}] * len(encoded)
    else:
        per_commit = list(options)
        if len(per_commit) != len(encoded):
            raise RenderError(
                f"{len(per_commit)} option mappings for {len(encoded)} commits",
                where="render_batch",
                hint="pass one mapping for all commits, or one per commit",
            )
    out: list[list[Any]] = [[None] * len(provs) for _ in encoded]
    index: dict[bytes, int] = {}
    prepare = [_Prepared(prov, index) for prov in provs]
    jobs: list[tuple[str, int, int]] = []
    slots: list[tuple[int, int, Provider, RequestOptions]] = []
    for i, (commit, kw) in enumerate(zip(commits, per_commit)):
        for j, prov in enumerate(provs):
            opts, o = prepare[j](kw)
            if prov.wire is None:
                out[i][j] = prov.render(commit, opts)
                continue
            jobs.append((prov.wire, i, o))
            slots.append((i, j, prov, opts))
    payloads = list(index)
    try:
        results = _core.render_batch(
            [data for data, _ in encoded], [(w, i, payloads[o]) for w, i, o in jobs], threads
        )
    except (ValueError, TypeError) as exc:
        raise RenderError(str(exc), where="render_batch", hint=BAD_COMMIT) from None
    for (i, j, prov, opts), res in zip(slots, results):
        if isinstance(res, str):
            err = RenderError(res, where=f"{encoded[i][1]}, provider {prov.name}", hint=BAD_COMMIT)
            if errors == "raise":
                raise err
            out[i][j] = err
        else:
            body, raw_meta = res
            out[i][j] = prov.rendered(opts, body, msgspec.json.decode(raw_meta))
    return out


#: Options of ``render_sessions``: one mapping for every request, or per session one
#: mapping for all its requests or one per request.
SessionOptions = Mapping[str, Any] | Sequence[Mapping[str, Any] | Sequence[Mapping[str, Any]]]


def _session_options(
    options: SessionOptions | None, sessions: Sequence[Sequence[Any]]
) -> list[list[Mapping[str, Any]]]:
    """Per session, the options mapping of each request (see ``render_sessions``)."""
    if options is None or isinstance(options, Mapping):
        return [[options or {}] * len(commits) for commits in sessions]
    per_session = list(options)
    if len(per_session) != len(sessions):
        raise RenderError(
            f"{len(per_session)} option entries for {len(sessions)} sessions",
            where="render_sessions",
            hint="pass one mapping for all, or per session a mapping or a list of mappings",
        )
    out: list[list[Mapping[str, Any]]] = []
    for s, (entry, commits) in enumerate(zip(per_session, sessions)):
        if isinstance(entry, Mapping):
            out.append([entry] * len(commits))
            continue
        each = list(entry)
        if len(each) != len(commits):
            raise RenderError(
                f"session {s}: {len(each)} option mappings for {len(commits)} requests",
                where="render_sessions",
                hint="pass one mapping for the session, or one per request",
            )
        out.append(each)
    return out


@overload
def render_sessions(
    sessions: Sequence[Sequence[ContextCommit | bytes]],
    providers: Sequence[str | Provider],
    *,
    options: SessionOptions | None = None,
    threads: int | None = None,
    meta: bool = True,
    errors: Literal["raise"] = "raise",
) -> list[list[list[RenderedRequest]]]: ...


@overload
def render_sessions(
    sessions: Sequence[Sequence[ContextCommit | bytes]],
    providers: Sequence[str | Provider],
    *,
    options: SessionOptions | None = None,
    threads: int | None = None,
    meta: bool = True,
    errors: Literal["return"],
) -> list[list[list[RenderedRequest] | RenderError]]: ...


def render_sessions(
    sessions: Sequence[Sequence[ContextCommit | bytes]],
    providers: Sequence[str | Provider],
    *,
    options: SessionOptions | None = None,
    threads: int | None = None,
    meta: bool = True,
    errors: Literal["raise", "return"] = "raise",
) -> list[list[list[RenderedRequest]]] | list[list[list[RenderedRequest] | RenderError]]:
    """Render the successive requests of sessions incrementally, in one crossing into Rust.

    ``sessions[i]`` is one session's requests in order, each given by its commit;
    ``result[i][j][k]`` is request ``k`` of session ``i`` for ``providers[j]``: the same
    request, byte for byte, as ``render(sessions[i][k], providers[j], **options)``.
    Successive requests share their beginning, so each body after the first is written
    as the previous body's bytes up to the first message (or head, or breakpoint) that
    provably changed, then the rest: the cost of a request is mostly one copy.  Nothing
    is guessed — what cannot be shown to be the same is written again.  ``options`` are
    the keyword options of ``render``: one mapping for every request, or one entry per
    session (a mapping for all its requests, or a list with one per request; the same
    mapping object repeated is prepared once).

    With the GIL released, each session is decoded once (an item object is read once
    however many of its commits hold it) for all its providers, and the (session,
    provider) chains are rendered in parallel — in order within a chain — on rayon's
    global pool or a pool of ``threads`` threads (as ``render_batch``); with fewer
    chains than threads, a chain is cut into pieces that each start with a full render,
    so a single long session uses every thread.  Every body is
    held until the call returns: pass as many sessions as fit in memory.  ``meta=False``
    leaves each ``RenderedRequest.meta`` empty (the breakdown is not made: for callers
    that only need the bodies).  Providers without a built-in wire format are rendered
    one request at a time through ``build_body``.  With ``errors="raise"`` the first
    failure raises ``RenderError``; with ``errors="return"`` it takes the place of that
    session's list for that provider.
    """
    _check_threads(threads, "render_sessions")
    provs = [_provider(p) for p in providers]
    sessions = [list(commits) for commits in sessions]
    per_request = _session_options(options, sessions)
    # Handed over as they are (item tuples or bytes), without a container per commit:
    # a call for a whole corpus must not feed the cyclic GC thousands of objects.
    data = [[_commit_data(c) for c in commits] for commits in sessions]
    out: list[list[Any]] = [[None] * len(provs) for _ in sessions]
    index: dict[bytes, int] = {}
    chains: list[tuple[str, int, list[int]]] = []
    slots: list[tuple[int, int, Provider, list[RequestOptions]]] = []
    # Sessions of one harness carry the same tools and system text: prepared once.
    prepare = [_Prepared(prov, index) for prov in provs]
    for i, (commits, kws) in enumerate(zip(sessions, per_request)):
        for j, prov in enumerate(provs):
            which: list[int] = []
            opts_of: list[RequestOptions] = []
            for kw in kws:
                opts, o = prepare[j](kw)
                which.append(o)
                opts_of.append(opts)
            if prov.wire is None:
                out[i][j] = [prov.render(c, o) for c, o in zip(commits, opts_of)]
                continue
            chains.append((prov.wire, i, which))
            slots.append((i, j, prov, opts_of))
    try:
        results = _core.render_sessions(data, list(index), chains, threads, meta)
    except (ValueError, TypeError) as exc:
        raise RenderError(str(exc), where="render_sessions", hint=BAD_COMMIT) from None
    decode = msgspec.json.decode
    for (i, j, prov, opts_of), (bodies, metas, _reused) in zip(slots, results):
        if isinstance(bodies, str):
            err = RenderError(bodies, where=f"session {i}, provider {prov.name}", hint=BAD_COMMIT)
            if errors == "raise":
                raise err
            out[i][j] = err
        elif meta:
            out[i][j] = [
                prov.rendered(o, body, decode(m)) for o, body, m in zip(opts_of, bodies, metas)
            ]
        else:
            out[i][j] = [prov.rendered(o, body, {}) for o, body in zip(opts_of, bodies)]
    return out


class _Prepared:
    """The ``RequestOptions`` of ``render`` options for one provider, as ``render`` makes
    them, and the index of their JSON in ``index`` (shared by the providers of a call,
    added to if new): ``render_batch`` and ``render_sessions`` prepare each distinct
    value once, not once per commit.

    A mapping is found by its identity first (the caller keeps every mapping it passes
    alive for the call), then by its MessagePack (which tells str from bytes, so equal
    bytes are equal arguments of the pure ``request_options``); values msgspec cannot
    encode are prepared once per mapping object.
    """

    def __init__(self, prov: Provider, index: dict[bytes, int]) -> None:
        self.prov = prov
        self.index = index
        self.by_id: dict[int, tuple[RequestOptions, int]] = {}
        self.by_value: dict[bytes, tuple[RequestOptions, int]] = {}

    def __call__(self, kw: Mapping[str, Any]) -> tuple[RequestOptions, int]:
        done = self.by_id.get(id(kw))
        if done is not None:
            return done
        try:
            key: bytes | None = msgspec.msgpack.encode(kw)
        except (TypeError, msgspec.EncodeError):
            key = None
        done = self.by_value.get(key) if key is not None else None
        if done is None:
            rest = dict(kw)
            opts = request_options(self.prov, rest.pop("model", None), **rest)
            if self.prov.wire is not None:
                opts = self.prov.wire_options(opts)
            encoded = msgspec.json.encode(opts)
            done = (opts, self.index.setdefault(encoded, len(self.index)))
            if key is not None:
                self.by_value[key] = done
        self.by_id[id(kw)] = done
        return done


def _commit_data(commit: ContextCommit | bytes) -> bytes | tuple[ContextItem, ...]:
    """What the core is handed for a commit (as ``_encode``, without its name)."""
    if isinstance(commit, ContextCommit):
        return commit.items
    return commit if isinstance(commit, bytes) else _encode(commit)[0]


def render_session(
    commits: Sequence[ContextCommit | bytes],
    provider: str | Provider,
    *,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
) -> list[RenderedRequest]:
    """The requests of one session for one provider, rendered incrementally: each the
    same bytes as ``render(commits[k], provider, **options_k)`` (``options``: one mapping
    for all, or one per request).  See ``render_sessions``, which renders many sessions
    and providers in parallel."""
    return render_sessions([commits], [provider], options=[options or {}])[0][0]


class CacheHit(msgspec.Struct, frozen=True, kw_only=True):
    """Predicted prompt-cache reuse between two consecutive requests of a session.

    ``shared_tokens`` is the number of leading tokens both requests carry unchanged
    (header + unchanged item prefix); ``total_tokens`` the current request's size.
    """

    shared_items: int
    shared_tokens: int
    total_tokens: int

    @property
    def ratio(self) -> float:
        """Shared fraction of the current request (0.0 when it is empty)."""
        return self.shared_tokens / self.total_tokens if self.total_tokens else 0.0


def header_tokens(
    provider: Provider | str,
    model: str | None = None,
    *,
    system: SystemArg = None,
    tools: Sequence[ToolSpec | Mapping[str, Any]] = (),
) -> int:
    """Tokens of the session-constant layer (system text + tool declarations), estimated
    with the model's tokenizer and calibration (``ModelProfile.estimate_tokens``, one
    batch count)."""
    prov = _provider(provider)
    texts = [b.text for b in _system_blocks(system, None)]
    texts += [msgspec.json.encode(t).decode() for t in _tools(tools)]
    if not texts:
        return 0
    return resolve_model(_model_spec(prov, model or prov.default_model)).estimate_tokens(texts)


def _shared_items(previous: ContextCommit, current: ContextCommit) -> int:
    """Leading commit items both requests show unchanged (``diff_commits``); none when
    the commit's system items changed, since they precede every message."""

    def system_items(c: ContextCommit) -> list[str]:
        return [i.rendered for i in c.items if i.role == "system" and i.state != "summarized"]

    if system_items(previous) != system_items(current):
        return 0
    from .commit import diff_commits

    return diff_commits(previous, current).prefix_items


def estimate_request(
    rendered: RenderedRequest, provider: str | Provider, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """The billed prompt of a rendered request (``Provider.estimate_prompt`` on its body,
    with the profile of its model): input + cache writes + cache reads, in segments."""
    prov = _provider(provider)
    profile = resolve_model(_model_spec(prov, rendered.model))
    return prov.estimate_prompt(
        msgspec.json.decode(rendered.body), profile, prefix_tokens=prefix_tokens
    )


def explain(
    commit: ContextCommit,
    provider: str | Provider,
    model: str | None = None,
    *,
    previous: ContextCommit | None = None,
    previous_situation: SystemArg = None,
    elapsed_seconds: float | None = None,
    prefix_tokens: int = 0,
    **options: Any,
) -> dict[str, Any]:
    """Render and break the request down: the billed-prompt estimate, tokens per layer and
    category, items per state, cache breakpoints, and the predicted cache use.

    ``input_tokens`` is the provider's billed prompt for this body (input + cache writes
    + cache reads), ``estimate`` the rules it applied; ``cache_read_tokens`` /
    ``cache_write_tokens`` follow the provider's cache rules against the previous
    request: ``previous`` (its commit) rendered with ``previous_situation`` as its L1
    text and the same other options, sent ``elapsed_seconds`` before this one (``None``:
    unknown, taken as within the cache's lifetime).  ``prefix_tokens`` are tokens the
    caller's harness sends before the body's content that the body does not hold (an
    agent's own system prompt and tool schemas).  The ``tokens`` block counts the
    commit's own items with its encoding, as ``ctxrules commit`` does.  Other options
    work as in ``render``.
    """
    prov = _provider(provider)
    rendered = render(commit, prov, model, **options)
    profile = resolve_model(_model_spec(prov, rendered.model))
    estimate = estimate_request(rendered, prov, prefix_tokens=prefix_tokens)
    before = None
    if previous is not None:
        earlier = render(previous, prov, model, **{**options, "situation": previous_situation})
        before = estimate_request(earlier, prov, prefix_tokens=prefix_tokens)
    cache = prov.predict_cache(before, estimate, elapsed=elapsed_seconds, profile=profile)
    situation_arg = options.get("situation")
    header = header_tokens(
        prov, rendered.model, system=options.get("system"), tools=options.get("tools", ())
    )
    situation = header_tokens(prov, rendered.model, system=situation_arg)
    item_tokens = rendered.meta.get("item_tokens", {})
    states: dict[str, dict[str, int]] = {}
    for it in commit.items:
        s = states.setdefault(it.state, {"items": 0, "tokens": 0})
        s["items"] += 1
        s["tokens"] += it.tokens if it.state != "summarized" else 0
    same_frame = _layer_texts(previous_situation) == _layer_texts(situation_arg)
    shared_items = _shared_items(previous, commit) if previous is not None and same_frame else 0
    total = estimate.input_tokens
    return {
        "provider": prov.name,
        "model": rendered.model,
        "endpoint": rendered.endpoint,
        "commit": commit.id,
        "body_bytes": len(rendered.body),
        "messages": rendered.meta.get("messages"),
        "degraded_tool_items": rendered.meta.get("degraded", 0),
        "input_tokens": total,
        "estimate": estimate.rules,
        "cache_read_tokens": cache.read_tokens,
        "cache_write_tokens": cache.write_tokens,
        "cache": {
            "rule": cache.rule,
            "warm": cache.warm,
            "ttl_seconds": cache.ttl_seconds,
            "elapsed_seconds": cache.elapsed_seconds,
            "min_tokens": cache.min_tokens,
            "reason": cache.reason,
        },
        "tokens": {
            "L0_session": header,
            "L1_situation": situation,
            # System nodes of the history: L0 before the first message, L1 after it.
            "system_items": int(item_tokens.get("system", 0)),
            "L2_task": {k: int(v) for k, v in item_tokens.items() if k != "system"},
            "total": header + situation + sum(int(v) for v in item_tokens.values()),
        },
        "states": states,
        "breakpoints": rendered.meta.get("breakpoints", []),
        # The same prediction in the older shape: the prefix shared with the previous
        # request, of this request's billed tokens; ``ratio`` is the share read.
        "predicted_cache": {
            "previous_commit": previous.id if previous is not None else None,
            "shared_items": shared_items,
            "shared_tokens": cache.shared_tokens,
            "total_tokens": total,
            "ratio": round(cache.read_tokens / total, 4) if total else 0.0,
        },
    }
