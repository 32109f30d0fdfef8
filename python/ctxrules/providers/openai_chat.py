"""OpenAI Chat Completions: ``POST /v1/chat/completions``.

The body is written in Rust (``wire = "openai-chat"``); this module adds usage parsing,
the prompt-too-long error, the structural validator and the billed-prompt estimate
(``estimate_openai_chat``: the cookbook's message framing, tools as the ``namespace
functions`` declaration the models read); both OpenAI APIs cache prompt prefixes
automatically (``cache_rule``, ``ctxrules.providers.cache``).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .base import PromptTooLong, Provider, RequestOptions, Usage
from .cache import OPENAI_CACHE_MIN_TOKENS, OPENAI_CACHE_STEP_TOKENS
from .estimate import (
    EstimateFrame,
    PromptEstimate,
    SegmentBuilder,
    compact_json,
    estimate_frame,
    format_unit,
    tool_unit,
    wire_tools,
    without_key,
)
from .images import OPENAI_IMAGE_RULE, core_image_rule, decoded_image_size
from .models import ModelProfile

__all__ = [
    "OPENAI_AUDIO_TOKENS_PER_SECOND",
    "OPENAI_CHAT_RESPONSE_FORMAT_TOKENS",
    "OPENAI_GPT5_ASSISTANT_TEXT_TOKENS",
    "OPENAI_MESSAGE_TOKENS",
    "OPENAI_REPLY_TOKENS",
    "OPENAI_RESPONSE_FORMAT_TOKENS",
    "OPENAI_TOOL_CALL_TOKENS",
    "OpenAIChatProvider",
    "chat_framing",
    "chat_tool_prompt",
    "estimate_openai_chat",
    "openai_chat_frame",
    "openai_frame",
    "openai_framing",
    "openai_output_schema",
    "openai_parts",
    "openai_prompt_too_long",
    "openai_tool_namespace",
    "openai_tools",
    "openai_usage",
    "validate_openai_chat",
]

_ROLES = {"system", "developer", "user", "assistant", "tool"}


def validate_openai_chat(body: Mapping[str, Any]) -> list[str]:
    """Problems of a Chat Completions body: each call answered right after it, no orphans."""
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("model missing")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages missing or empty"]
    pending: set[str] = set()
    seen: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        where = f"messages[{i}]"
        if role not in _ROLES:
            problems.append(f"{where}: role {role!r}")
            continue
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid not in pending:
                problems.append(f"{where}: orphan tool message {cid!r}")
            pending.discard(cid)
            if not isinstance(m.get("content"), (str, list)):
                problems.append(f"{where}: tool content missing")
            continue
        if pending:
            problems.append(f"{where}: tool calls {sorted(pending)} unanswered before it")
            pending = set()
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if not calls and not m.get("content"):
                problems.append(f"{where}: assistant with neither content nor tool_calls")
            for j, c in enumerate(calls):
                fn = c.get("function") or {}
                cid = c.get("id")
                if not cid or cid in seen:
                    problems.append(f"{where}.tool_calls[{j}]: id missing or repeated")
                seen.add(cid)
                pending.add(cid)
                if c.get("type") != "function" or not fn.get("name"):
                    problems.append(f"{where}.tool_calls[{j}]: not a named function call")
                args = fn.get("arguments")
                if not isinstance(args, str):
                    problems.append(f"{where}.tool_calls[{j}]: arguments is not a string")
                else:
                    try:
                        json.loads(args)
                    except ValueError:
                        problems.append(f"{where}.tool_calls[{j}]: arguments is not JSON")
        elif m.get("content") in (None, "", []):
            problems.append(f"{where}: {role} message without content")
    if pending:
        problems.append(f"tool calls {sorted(pending)} unanswered at the end")
    for j, t in enumerate(body.get("tools") or []):
        if t.get("type") != "function" or not (t.get("function") or {}).get("name"):
            problems.append(f"tools[{j}]: not a named function")
    return problems


def openai_usage(response: Mapping[str, Any], prompt: str, output: str) -> Usage | None:
    """OpenAI's usage (both APIs, which name the counts ``prompt`` and ``output``): the
    prompt count includes the cached tokens, reported in ``{prompt}_details``."""
    u = response.get("usage")
    if not isinstance(u, Mapping):
        return None
    details = u.get(f"{prompt}_details") or {}
    cached = Provider._int(details.get("cached_tokens"))
    return Usage(
        input_tokens=Provider._int(u.get(prompt)) - cached,
        cache_read_tokens=cached,
        output_tokens=Provider._int(u.get(output)),
    )


def openai_prompt_too_long(status: int | None, body: Any) -> PromptTooLong | None:
    """OpenAI's refusal (both APIs): code ``context_length_exceeded`` or its message
    ("maximum context length", "exceeds the context window")."""
    err = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(err, Mapping):
        return None
    msg = str(err.get("message", ""))
    if status not in (None, 400):
        return None
    lowered = msg.lower()
    if err.get("code") != "context_length_exceeded" and not (
        "context length" in lowered or "context window" in lowered
    ):
        return None
    limit, tokens = Provider._numbers(
        r"maximum context length is (\d[\d,]*) tokens.*?(\d[\d,]*) tokens", msg
    )
    return PromptTooLong(f"openai: {msg}", tokens=tokens, limit=limit)


#: Tokens of one OpenAI tool call beyond its name and arguments (its message header
#: and the header of the result that answers it); fitted on the recorded gpt-5.4-mini
#: requests with tool calls.
OPENAI_TOOL_CALL_TOKENS = 12
#: OpenAI's framing of a message (``<|start|>role<|message|>…<|end|>``, the role
#: counted separately) and of the reply it primes, as tiktoken's cookbook counts them.
OPENAI_MESSAGE_TOKENS = 3
OPENAI_REPLY_TOKENS = 3
#: What an assistant message with text costs beyond ``OPENAI_MESSAGE_TOKENS`` on the
#: gpt-5 models (the profile's ``assistant_text``; 0 on the others): the channel its
#: final answer is written in, as in the harmony format (``<|channel|>final``, two
#: tokens).  Fitted on the fit set's six gpt-5 requests with an earlier assistant
#: message (Chat and Responses: 2 … 6 tokens under; the mean error least at 2).
OPENAI_GPT5_ASSISTANT_TEXT_TOKENS = 2
#: Tokens a ``json_schema`` structured-output format adds beyond its schema's JSON
#: (``_schema_json``) and description: fitted on the fit set's nine structured requests,
#: whose residual after the schema alone is −1 at the median (−7 … +6): 0, and the
#: format's name left uncounted (counting it over-counts them by 3 at the median).
OPENAI_RESPONSE_FORMAT_TOKENS = 0
#: What the same format adds on the Chat Completions API beyond it (the profile's
#: ``chat_response_format``): the fit set's Chat requests with a ``json_schema`` format
#: (gpt-4o, gpt-5.4) bill 6 … 7 tokens more than the schema where its Responses requests
#: bill what the schema counts; the mean error of the five is least at 6 (7.3 % -> 3.2 %).
OPENAI_CHAT_RESPONSE_FORMAT_TOKENS = 6


def _ts_type(schema: Any, defs: Mapping[str, Any] | None = None, depth: int = 0) -> str:
    """A JSON schema as the TypeScript type OpenAI's models read it.  A ``$ref`` to the
    root's ``$defs`` / ``definitions`` reads as the type it names (inlined, to a
    bounded depth: a recursive definition ends in ``any``); ``anyOf`` / ``oneOf`` as a
    union."""
    if not isinstance(schema, Mapping) or depth > 8:
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str) and defs:
        target = defs.get(ref.rsplit("/", 1)[-1])
        return _ts_type(target, defs, depth + 1) if target is not None else "any"
    union = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(union, list) and union:
        return " | ".join(_ts_type(s, defs, depth + 1) for s in union)
    if isinstance(schema.get("enum"), list):
        return " | ".join(compact_json(v) for v in schema["enum"]) or "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts_type({**schema, "type": k}, defs, depth) for k in kind) or "any"
    if kind == "string":
        return "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        return _ts_type(schema.get("items"), defs, depth + 1) + "[]"
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            return "object"
        required = set(schema.get("required") or ())
        lines = ["{"]
        for name, sub in props.items():
            if isinstance(sub, Mapping) and sub.get("description"):
                lines.append(f"// {sub['description']}")
            line = f"{name}{'' if name in required else '?'}: {_ts_type(sub, defs, depth + 1)},"
            if isinstance(sub, Mapping) and "default" in sub:
                line += f" // default: {_ts_default(sub['default'])}"
            lines.append(line)
        lines.append("}")
        return "\n".join(lines)
    return "any"


def _ts_default(value: Any) -> str:
    """A property's default as its comment shows it: a string as it is, other values as
    JSON."""
    return value if isinstance(value, str) else compact_json(value)


def _defs(schema: Any) -> Mapping[str, Any] | None:
    """The definitions a schema's ``$ref`` s point into (``$defs``, ``definitions``)."""
    if not isinstance(schema, Mapping):
        return None
    defs = schema.get("$defs") or schema.get("definitions")
    return defs if isinstance(defs, Mapping) else None


def _ref_title(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Any:
    ref = schema.get("$ref")
    target = defs.get(ref.rsplit("/", 1)[-1]) if isinstance(ref, str) else None
    return target.get("title") if isinstance(target, Mapping) else None


def _titled(schema: Any, defs: Mapping[str, Any]) -> Any:
    """``schema`` with each property's ``title`` (or the title of the definition its
    ``$ref`` names) read as a comment line before its description, as the Responses API
    writes them for the GPT-4o / 4.1 models (``responses_titles``)."""
    if isinstance(schema, list):
        return [_titled(s, defs) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {
        k: _titled(v, defs) if k in ("items", "anyOf", "oneOf") else v for k, v in schema.items()
    }
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), Mapping):
            out[key] = {k: _titled(v, defs) for k, v in schema[key].items()}
    props = schema.get("properties")
    if isinstance(props, Mapping):
        titled = {}
        for name, sub in props.items():
            if isinstance(sub, Mapping):
                title = sub.get("title") or _ref_title(sub, defs)
                sub = _titled(sub, defs)
                if isinstance(title, str) and title:
                    more = sub.get("description")
                    sub = {**sub, "description": f"{title}\n// {more}" if more else title}
            titled[name] = sub
        out["properties"] = titled
    return out


def openai_tool_namespace(tools: Sequence[Mapping[str, Any]], *, titles: bool = False) -> str:
    """The ``namespace functions`` declaration OpenAI's models read the tools as.

    Takes Chat Completions (``{type, function: {...}}``) or Responses (``{type, name,
    ...}``) function tools; other tool types are skipped.  With ``titles`` (the
    Responses API on the GPT-4o / 4.1 models) the parameters' titles and the
    parameters object's own title and description are comment lines too.
    """
    lines = ["namespace functions {", ""]
    for t in tools:
        fn = t.get("function") if isinstance(t.get("function"), Mapping) else t
        if not isinstance(fn, Mapping) or not fn.get("name"):
            continue
        if fn.get("description"):
            lines.append(f"// {fn['description']}")
        params = fn.get("parameters")
        if titles and isinstance(params, Mapping):
            for key in ("title", "description"):
                if isinstance(params.get(key), str) and params[key]:
                    lines.append(f"// {params[key]}")
            params = _titled(params, _defs(params) or {})
        if isinstance(params, Mapping) and params.get("properties"):
            lines.append(f"type {fn['name']} = (_: {_ts_type(params, _defs(params))}) => any;")
        else:
            lines.append(f"type {fn['name']} = () => any;")
        lines.append("")
    lines.append("} // namespace functions")
    return "\n".join(lines)


def _tool_texts(tools: list[Mapping[str, Any]], *, titles: bool = False) -> list[str]:
    """The tools as the model reads them (both APIs): the function namespace, and the
    JSON of any other (built-in) tool; nothing without tools."""
    functions = [t for t in tools if t.get("type", "function") == "function"]
    others = [t for t in tools if t not in functions]  # built-in tools: their JSON
    if not functions and not others:
        return []
    return [openai_tool_namespace(functions, titles=titles), *(compact_json(t) for t in others)]


def openai_tools(
    u: SegmentBuilder,
    tools: list[Mapping[str, Any]],
    profile: ModelProfile,
    tool_prompt: int | None = None,
    *,
    titles: bool = False,
) -> None:
    """Add the tools unit (both APIs): the function namespace (``titles``: with the
    parameters' titles) plus the tool prompt (``tool_prompt``, default the profile's)."""
    texts = _tool_texts(tools, titles=titles)
    if texts:
        prompt = profile.tool_prompt_tokens if tool_prompt is None else tool_prompt
        u.add({"tools": tools}, structured=texts, tool_prompt=prompt)


def openai_framing(profile: ModelProfile) -> dict[str, float]:
    """OpenAI's framing numbers for ``profile`` (both APIs), as an estimate frame states
    them: per message, priming the reply, per tool call, the one more of a name, the
    more of an assistant message with text (``assistant_text``, 0 unless the model's
    entry states it)."""
    return {
        "message": profile.rule("message", OPENAI_MESSAGE_TOKENS),
        "reply": profile.rule("reply", OPENAI_REPLY_TOKENS),
        "tool_call": profile.rule("tool_call", OPENAI_TOOL_CALL_TOKENS),
        "name": profile.rule("name", 1),
        "assistant_text": profile.rule("assistant_text", 0),
    }


def openai_frame(
    tools: Sequence[Mapping[str, Any]],
    profile: ModelProfile,
    *,
    wire: str,
    framing: Mapping[str, float] | None = None,
    tool_prompt: int | None = None,
    output_format: Any = None,
    titles: bool = False,
) -> EstimateFrame | None:
    """The frame of an OpenAI request (both APIs) whose body declares ``tools`` and
    asks for ``output_format`` (a structured-output format, or ``None``); ``titles``:
    the parameters' titles are read too (``openai_tool_namespace``)."""
    texts = _tool_texts(list(tools), titles=titles)
    prompt = profile.tool_prompt_tokens if tool_prompt is None else tool_prompt
    units = [tool_unit({"tools": tools}, structured=texts, tool_prompt=prompt)] if texts else []
    schema = _schema_unit(output_format, profile, chat=wire == "openai-chat")
    if schema is not None:
        units.append(format_unit(schema))
    return estimate_frame(
        profile,
        wire=wire,
        tools=units,
        framing=framing or openai_framing(profile),
        images=core_image_rule(profile.rule("image", OPENAI_IMAGE_RULE)),
    )


def openai_chat_frame(options: RequestOptions, profile: ModelProfile) -> EstimateFrame | None:
    """What the core estimates a Chat Completions request with (``estimate_frame``)."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                **({"description": t["description"]} if t.get("description") else {}),
                "parameters": t.get("input_schema", {"type": "object", "properties": {}}),
            },
        }
        for t in wire_tools(options.tools)
    ]
    return openai_frame(
        tools,
        profile,
        wire="openai-chat",
        framing=chat_framing(profile, bool(tools)),
        tool_prompt=chat_tool_prompt(profile, tools, options.extra),
        output_format=options.extra.get("response_format"),
    )


def chat_tool_prompt(
    profile: ModelProfile, tools: Sequence[Mapping[str, Any]], body: Mapping[str, Any]
) -> int:
    """The Chat tool section's tokens beyond the declarations: the profile's tool prompt,
    plus ``tool_forced`` when ``tool_choice`` names a function and ``parallel_off`` when
    ``parallel_tool_calls`` is false (both 0 unless the model's entry states them)."""
    if not tools:
        return profile.tool_prompt_tokens
    choice = body.get("tool_choice") or body.get("function_call")
    # A named function (``{"type": "function", "function": {"name": …}}``, the legacy
    # ``{"name": …}``); "auto", "required" and "none" leave the section as it is.
    forced = isinstance(choice, Mapping) and (
        choice.get("type") == "function" or "function" in choice or "name" in choice
    )
    parallel_off = body.get("parallel_tool_calls") is False
    return int(
        profile.tool_prompt_tokens
        + (profile.rule("tool_forced", 0) if forced else 0)
        + (profile.rule("parallel_off", 0) if parallel_off else 0)
    )


def chat_framing(profile: ModelProfile, declared: bool) -> dict[str, float]:
    """Chat's framing numbers for a request that declares tools (``declared``) or not: a
    tool call costs ``chat_tool_call`` where tools are declared and
    ``tool_call_undeclared`` where none are (each defaulting to ``tool_call``); when
    tools are declared the system message costs ``tool_system_saving`` less (the
    declarations join it; ``system`` in the frame, 0 unless the model's entry states
    it)."""
    framing = openai_framing(profile)
    key = "chat_tool_call" if declared else "tool_call_undeclared"
    framing["tool_call"] = profile.rule(key, framing["tool_call"])
    framing["system"] = -profile.rule("tool_system_saving", 0) if declared else 0
    return framing


def openai_parts(content: Any, u: SegmentBuilder, profile: ModelProfile) -> tuple[list[str], int]:
    """Texts and image tokens of a message's content (string or parts, either API);
    images by the model's image rule (``u.image``: a URL's size is unknown)."""
    if isinstance(content, str):
        return [content], 0
    texts, images = [], 0
    for p in content if isinstance(content, list) else []:
        if not isinstance(p, Mapping):
            continue
        if isinstance(p.get("text"), str):
            texts.append(p["text"])
        elif isinstance(p.get("refusal"), str):
            texts.append(p["refusal"])
        elif p.get("type") == "input_audio":
            images += _audio(u, p.get("input_audio"), profile)
        elif p.get("type") in ("image_url", "input_image"):
            ref = p.get("image_url")
            url = ref.get("url") if isinstance(ref, Mapping) else ref
            detail = (ref.get("detail") if isinstance(ref, Mapping) else None) or p.get("detail")
            size = None
            if isinstance(url, str) and url.startswith("data:") and "," in url:
                size = decoded_image_size(url.split(",", 1)[1])
            images += u.image(profile.rule("image", OPENAI_IMAGE_RULE), size, str(detail or "auto"))
    return texts, images


#: Tokens of a second of user audio (OpenAI's realtime cost guide: user audio is one
#: token per 100 ms).
OPENAI_AUDIO_TOKENS_PER_SECOND = 10


def _wav_seconds(data: bytes) -> float | None:
    """The length of a PCM WAV file from its header, or ``None``."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE" or len(data) < 44:
        return None
    channels, rate = int.from_bytes(data[22:24], "little"), int.from_bytes(data[24:28], "little")
    bits = int.from_bytes(data[34:36], "little")
    per_second = channels * rate * bits // 8
    return (len(data) - 44) / per_second if per_second else None


def _audio(u: SegmentBuilder, audio: Any, profile: ModelProfile) -> int:
    """An ``input_audio`` part: a WAV's length at ``OPENAI_AUDIO_TOKENS_PER_SECOND``,
    flagged (``audio``: the models bill more than that rule for a short clip, and
    another format's length is not read), with the range up to the context window."""
    data = audio.get("data") if isinstance(audio, Mapping) else None
    try:
        raw = base64.b64decode(data[:64] if isinstance(data, str) else "", validate=False)
        # The header is in the first bytes; the length is the whole decoded size.
        full = len(data.strip().rstrip("=")) * 3 // 4 if isinstance(data, str) else 0
        seconds = _wav_seconds(raw + bytes(max(0, full - len(raw))))
    except ValueError:
        seconds = None
    tokens = math.ceil(seconds * OPENAI_AUDIO_TOKENS_PER_SECOND) if seconds else 0
    return u.unknown("audio", tokens, tokens, profile.context_window)


def _schema_json(schema: Any) -> str:
    """A structured-output schema as the model reads it: its compact JSON without the
    ``additionalProperties`` strict mode requires on every object.  Fitted on the fit
    set against the TypeScript type tools are read as (which left 18 … 86 tokens
    unexplained per request) and the JSON with or without titles: this form left the
    smallest spread (benches/README.md, "Per-model estimates")."""
    return compact_json(without_key(schema, "additionalProperties")) if schema is not None else ""


def _schema_unit(fmt: Any, profile: ModelProfile, *, chat: bool = False) -> dict[str, Any] | None:
    """The segment of a ``json_schema`` structured-output format (Chat
    ``response_format``, Responses ``text.format``): its description and the schema's
    JSON (``_schema_json``), plus the profile's ``response_format`` tokens (on the Chat
    API, ``chat``, its ``chat_response_format`` more)."""
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    inner = fmt.get("json_schema")
    spec: Mapping[str, Any] = inner if isinstance(inner, Mapping) else fmt
    return {
        "key_obj": {"response_format": fmt},
        "structured": [
            str(spec.get("description") or ""),
            _schema_json(spec.get("schema")),
        ],
        "framing": profile.rule("response_format", OPENAI_RESPONSE_FORMAT_TOKENS)
        + (profile.rule("chat_response_format", OPENAI_CHAT_RESPONSE_FORMAT_TOKENS) if chat else 0),
    }


def openai_output_schema(
    u: SegmentBuilder, fmt: Any, profile: ModelProfile, *, chat: bool = False
) -> None:
    """Add a structured-output format's segment (``_schema_unit``; ``chat``: sent over
    the Chat Completions API), if it has one."""
    unit = _schema_unit(fmt, profile, chat=chat)
    if unit is not None:
        u.add(unit["key_obj"], structured=unit["structured"], framing=unit["framing"])


def estimate_openai_chat(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """OpenAI Chat Completions: the tools, each message with its framing (an assistant
    message with text the profile's ``assistant_text`` more), the reply primer."""
    u = SegmentBuilder()
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
    # The legacy ``functions`` parameter declares functions the same way.
    tools += [
        {"type": "function", "function": f}
        for f in body.get("functions") or []
        if isinstance(f, Mapping)
    ]
    openai_tools(u, tools, profile, chat_tool_prompt(profile, tools, body))
    openai_output_schema(u, body.get("response_format"), profile, chat=True)
    rules = chat_framing(profile, bool(_tool_texts(tools)))
    per_message, per_call = rules["message"], rules["tool_call"]
    system_extra, assistant_text = rules["system"], rules["assistant_text"]
    for m in body.get("messages") or []:
        if not isinstance(m, Mapping):
            continue
        texts, images = openai_parts(m.get("content"), u, profile)
        framing = per_message + (profile.rule("name", 1) if m.get("name") else 0)
        if m.get("role") in ("system", "developer") and system_extra:
            framing += system_extra  # once: the declarations join the first system message
            system_extra = 0
        if m.get("role") == "assistant" and texts:
            framing += assistant_text
        structured: list[str] = []
        if m.get("role") == "tool":
            structured, texts = texts, []
        calls = list(m.get("tool_calls") or [])
        if isinstance(m.get("function_call"), Mapping):  # the legacy single call
            calls.append({"function": m["function_call"]})
        for call in calls:
            fn = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(fn, Mapping):
                structured.append(str(fn.get("name") or "") + str(fn.get("arguments") or ""))
                framing += per_call
        u.add(
            m,
            prose=[str(m.get("role") or ""), *texts, str(m.get("name") or "")],
            structured=structured,
            framing=framing,
            images=images,
        )
    u.add({"reply": True}, framing=profile.rule("reply", OPENAI_REPLY_TOKENS))
    return u.finish(profile, prefix_tokens, wire="openai-chat")


class OpenAIChatProvider(Provider):
    """OpenAI Chat Completions API."""

    name = "openai-chat"
    wire = "openai-chat"
    family = "openai"
    default_model = "gpt-4o"
    reserved = frozenset({"model", "messages", "tools", "max_completion_tokens"})
    max_tokens_fields = (("max_completion_tokens",), ("max_tokens",))
    cache_rule = "openai-automatic-prefix"
    cache_step = OPENAI_CACHE_STEP_TOKENS
    cache_min_tokens = OPENAI_CACHE_MIN_TOKENS

    def endpoint(self, model: str) -> str:
        return "/v1/chat/completions"

    def parse_usage(self, response: Mapping[str, Any]) -> Usage | None:
        return openai_usage(response, "prompt_tokens", "completion_tokens")

    def prompt_too_long(self, status: int | None, body: Any) -> PromptTooLong | None:
        return openai_prompt_too_long(status, body)

    def validate(self, body: Mapping[str, Any]) -> list[str]:
        return validate_openai_chat(body)

    estimate_prompt = staticmethod(estimate_openai_chat)
    estimate_frame = staticmethod(openai_chat_frame)
