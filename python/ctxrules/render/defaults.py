"""What a session recorded about its requests, turned into render options: the one
place that decides a stored session's model, system text, tools and parameters
(``session_defaults``); ``ctxrules.requests.render_defaults`` adds what the store knows
(the answer's model, the tools the session called)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..errors import RenderError
from ..importers._defaults import NOT_PARAMS, WIRE_PROVIDERS
from ..model import ToolSpec
from ..providers import provider_names
from ..providers.base import Provider
from ..providers.models import model_families, model_in_family
from .options import SystemArg, default_max_tokens, provider_of, tool_specs

__all__ = ["RecordedRequest", "RenderDefaults", "recorded_request", "session_defaults"]

#: What a model name looks like; anything else (Claude Code's ``<synthetic>``) is no model.
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*")


class RecordedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a session's metadata says its requests carried (``recorded_request``).

    ``system`` is the recorded system prompt (informational: the history holds it as a
    system node too); ``tools`` is ``None`` when no declarations were recorded (``()``:
    recorded as none); ``provider`` the provider whose wire it was recorded from;
    ``params`` the other request parameters in that provider's own shape (max_tokens,
    tool_choice, …).  ``system_sent`` is the system prompt as sent when the history
    does not hold it (what ``ctxrules.engine.Engine`` records: its parts in order);
    ``system`` is then their text.
    """

    system: str | None = None
    tools: tuple[ToolSpec, ...] | None = None
    model: str | None = None
    provider: str | None = None
    params: dict[str, Any] = {}
    system_sent: tuple[str, ...] | None = None


def recorded_request(metadata: Mapping[str, Any]) -> RecordedRequest:
    """The recorded request of a session, from its metadata.

    Importers set ``system`` (str), ``tools`` (a list in any vendor's shape),
    ``model``, ``provider`` and ``params``.  A cassette keeps the whole recorded body
    (without its conversation) as ``request`` and its API as ``wire``: tools, model
    (or the model in a Gemini URL), provider and parameters are read from those when
    the fields above are absent; the parameters are the keys the importers take for
    parameters (``NOT_PARAMS`` is their one list of the others: conversation, system,
    tools, model, streaming), so a recording without any reads as none.  The engine
    sets the same keys for the sessions it serves, ``system`` as the list of the
    system prompt's parts as sent (its history holds no system node).
    """
    raw = metadata.get("request")
    request: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    system = metadata.get("system")
    sent = None
    if isinstance(system, list) and all(isinstance(t, str) for t in system):
        # The engine's record: the parts as sent, which the history does not hold.
        sent = tuple(system)
        system = "\n\n".join(system)
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
        system_sent=sent,
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


def _family_of(provider: str | None) -> str | None:
    """The model family of a provider name (``openai-chat`` → ``openai``)."""
    if provider is None:
        return None
    if provider in provider_names():
        return provider_of(provider).model_family
    return provider


def _choose_model(
    prov: Provider, rec: RecordedRequest, answer_model: str | None, model: str | None
) -> tuple[str | None, dict[str, Any]]:
    """The model of a session's request: the option, else the recorded one (the answer
    node's, then the session's) when it belongs to the provider's family, else none
    (the provider's default)."""
    if model:
        return model, {"source": "option"}
    family = prov.model_family
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
    if inner or value is None:
        # A parent recorded empty stays as it was recorded (Gemini's
        # ``generationConfig: {}``).
        params[head] = inner
    else:
        params.pop(head)
    return value


def _recorded_max_tokens(
    rec: RecordedRequest, params: dict[str, Any]
) -> tuple[int | None, tuple[str, ...] | None]:
    """The output limit among the recorded parameters (taken out of ``params``), and
    the field it was recorded under."""
    if rec.provider is not None and rec.provider in provider_names():
        fields = provider_of(rec.provider).max_tokens_fields
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
    recorded: bool = True,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``max_tokens`` and ``extra`` options from the recorded parameters: the output limit
    is neutral (mapped to the provider's field); the rest passes through only to the
    provider it was recorded from (a vendor-shaped ``tool_choice`` means nothing to
    another).  Returns the options and what ``explain`` says about them."""
    params = dict(rec.params) if recorded else {}
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
    recorded_params: bool = True,
) -> RenderDefaults:
    """The render options of a session's request for ``provider``: what was recorded
    (``recorded_request``), with the given options taking precedence.

    * model: ``model``, else the recorded one (``answer_model`` — the model that
      answered the request — then the session's) when it belongs to the provider's
      family (``model_in_family``; a name no family knows is used when it was
      recorded for this provider's family), else the provider's default;
    * system text: ``system`` (``""``: none), else the system prompt the session
      recorded as sent when its history does not hold it (``system_sent``: a session
      the engine served), else none besides the commit's system items, which carry the
      recorded system prompt (importers keep it as a system node);
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
    prov = provider_of(provider)
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
    elif rec.system_sent:
        # Sent by the engine and not in the history: the request carried it, so do we.
        options["system"] = list(rec.system_sent)
        system_source = "recorded"
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
        prov, rec, chosen or prov.default_model, max_tokens, extra, recorded_params
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
