"""Google Gemini: ``POST /v1beta/models/{model}:generateContent``.

The body is written in Rust (``wire = "gemini"``); the model is part of the URL, and
``max_tokens`` becomes ``generationConfig.maxOutputTokens``.  This class adds usage
parsing (REST camelCase and the SDK's snake_case both read), the prompt-too-long error,
the structural validator, the billed-prompt estimate (``estimate_gemini``) and the
implicit prefix cache.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import msgspec

from ..errors import ValidationError
from .base import PromptTooLong, Provider, RequestOptions, Usage
from .estimate import (
    EstimateFrame,
    PromptEstimate,
    SegmentBuilder,
    compact_json,
    estimate_frame,
    format_unit,
    tool_unit,
    wire_tools,
)
from .images import GEMINI_IMAGE_RULE, core_image_rule, decoded_image_size, pdf_pages
from .models import ModelProfile

__all__ = [
    "GEMINI_3_CONTENT_TOKENS",
    "GEMINI_25_FLASH_FUNCTION_PART_TOKENS",
    "GEMINI_25_FLASH_SIGNATURE_SLOPE",
    "GEMINI_EMPTY_PARAMETERS",
    "GEMINI_FUNCTION_PART_TOKENS",
    "GEMINI_PDF_PAGE_TOKENS",
    "GEMINI_RESPONSE_SCHEMA_TEXT",
    "GEMINI_RESPONSE_SCHEMA_TOKENS",
    "GEMINI_SIGNATURE_CALLS",
    "GEMINI_SIGNATURE_OFFSET",
    "GEMINI_SIGNATURE_SLOPE",
    "PDF_TEXT_PER_PAGE_HIGH",
    "SERVER_TOOLS",
    "GeminiProvider",
    "declaration_texts",
    "estimate_gemini",
    "gemini_call_profile",
    "gemini_frame",
    "generate_content_args",
    "one_or_list",
    "validate_gemini",
]

_PART_FIELDS = {
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
}


def _get(d: Mapping[str, Any], camel: str) -> Any:
    """A field by its REST (camelCase) or SDK (snake_case) name."""
    if camel in d:
        return d[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return d.get(snake)


def one_or_list(value: Any) -> list[Any]:
    """A list field of a Gemini request as a list: the API also takes one object where
    it documents a list (``tools``, a content's ``parts``, ``systemInstruction.parts``;
    ellmer's 2025 requests send them so), which is that object alone.  A list is
    itself; anything else (absent, a string) no element."""
    if isinstance(value, list):
        return value
    return [value] if isinstance(value, dict) else []


def generate_content_args(body: Mapping[str, Any], model: str) -> dict[str, Any]:
    """The keyword arguments of google-genai's ``generate_content`` (and of
    ``client.aio.models.generate_content`` / ``generate_content_stream``) for a rendered
    Gemini ``body``: ``model``, ``contents`` and a ``config`` holding the rest, with
    ``generationConfig``'s fields flattened into it (the SDK's config takes them at its
    top level, under the REST names)."""
    config = {k: v for k, v in body.items() if k not in ("contents", "generationConfig")}
    generation = body.get("generationConfig")
    if isinstance(generation, Mapping):
        config.update(generation)
    return {"model": model, "contents": body.get("contents", []), "config": config}


def validate_gemini(body: Mapping[str, Any]) -> list[str]:
    """Problems of a generateContent body: roles, alternation, call/response pairing."""
    problems: list[str] = []
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return ["contents missing or empty"]
    if contents[0].get("role") != "user":
        problems.append("contents[0] is not the user's")
    pending: list[tuple[str | None, str]] = []  # (id, name) of the previous model turn's calls
    prev_role = None
    for i, c in enumerate(contents):
        role = c.get("role")
        where = f"contents[{i}]"
        if role not in ("user", "model"):
            problems.append(f"{where}: role {role!r}")
        if role == prev_role:
            problems.append(f"{where}: repeats role {role}")
        prev_role = role
        parts = one_or_list(c.get("parts"))
        if not parts:
            problems.append(f"{where}: no parts")
            continue
        calls: list[tuple[str | None, str]] = []
        answers: list[tuple[str | None, str]] = []
        for j, p in enumerate(parts):
            data = [k for k in p if k in _PART_FIELDS or k in ("function_call", "inline_data")]
            if len(data) != 1:
                problems.append(f"{where}.parts[{j}]: {len(data)} data fields (need 1)")
            fc = _get(p, "functionCall")
            fr = _get(p, "functionResponse")
            if fc is not None:
                if role != "model":
                    problems.append(f"{where}.parts[{j}]: functionCall in a user turn")
                if not isinstance(fc.get("args", {}), dict) or not fc.get("name"):
                    problems.append(f"{where}.parts[{j}]: functionCall without name/args")
                calls.append((fc.get("id"), fc.get("name")))
            if fr is not None:
                if role != "user":
                    problems.append(f"{where}.parts[{j}]: functionResponse in a model turn")
                if not isinstance(fr.get("response"), dict):
                    problems.append(f"{where}.parts[{j}]: functionResponse.response not an object")
                answers.append((fr.get("id"), fr.get("name")))
        for a in answers:
            if a not in pending:
                problems.append(f"{where}: orphan functionResponse {a}")
        if pending and sorted(map(str, answers)) != sorted(map(str, pending)):
            problems.append(f"{where}: does not answer the calls {pending}")
        pending = calls
    if pending:
        problems.append(f"functionCalls {pending} unanswered at the end")
    system = _get(body, "systemInstruction")
    if system is not None and not (
        isinstance(system, Mapping) and one_or_list(system.get("parts"))
    ):
        problems.append("systemInstruction without parts")
    return problems


#: Tokens of a Gemini functionCall / functionResponse part beyond its name and JSON;
#: fitted on the recorded Gemini 3 requests.
GEMINI_FUNCTION_PART_TOKENS = 6
#: Gemini 2.5 Flash bills a function part 12 tokens beyond its JSON: its conversations
#: grow 6 … 8 tokens an exchange (a call and its response) faster than their parts with
#: 6; over the fit set's 25 2.5 Flash requests (13 with function parts: chatlas' tool
#: tests, Google ADK) the mean error is least at 12.
GEMINI_25_FLASH_FUNCTION_PART_TOKENS = 12
#: Tokens of each content (a turn of the conversation) on Gemini 3, on its first part:
#: the profile's ``message`` rule (0 before Gemini 3).  Fitted jointly with the function
#: part on the fit set's Gemini 3 / 3.5 requests: their conversations grow 1.3 … 1.6
#: tokens per content faster than their parts alone (chatlas' data extraction, text
#: only: +2, +5, +7, +10 over 1 … 7 contents); the mean error is least at 1.6 with the
#: function part kept at 6.
GEMINI_3_CONTENT_TOKENS = 1.6
#: A Gemini 3 thought signature is billed as the thinking it carries; its tokens from
#: its base64 length (a line fitted on the four signatures of the recorded Gemini 3
#: requests, against the thoughtsTokenCount of the responses that produced them).
#: Gemini 2.5 bills none (its profile's ``signature_slope`` is 0), but for 2.5 Flash.
GEMINI_SIGNATURE_SLOPE = 0.225
GEMINI_SIGNATURE_OFFSET = 29.0
#: Gemini 2.5 Flash bills the current turn's signature of a streamed call as the
#: thinking it carries too: each billed exactly the ``thoughtsTokenCount`` of the
#: response that made it (chatlas' streamed tool tests of 2026-04: 48, 61, 82 + 57, 51,
#: 43 tokens over the same requests recorded in 2026-01 without signatures).  Its tokens
#: from its base64 length: the line through the origin over those six signatures and
#: what they billed (about 8.4 characters, 6.3 bytes, a token).
GEMINI_25_FLASH_SIGNATURE_SLOPE = 0.119
#: Which calls bill a thought signature sent back: the profile's ``signature_calls``,
#: ``"all"``, or ``"streamed"`` (Gemini 2.5 Flash: only calls to
#: ``streamGenerateContent``; every non-streamed 2.5 Flash call of the corpus with a
#: signature billed none, whenever recorded, and every streamed one billed it).
GEMINI_SIGNATURE_CALLS = "all"
#: Whether a ``responseSchema`` is billed as prompt: the profile's
#: ``response_schema_text``, ``"none"`` (not billed) or ``"json"`` (its compact JSON
#: plus ``response_schema`` tokens).  Measured on the fit set: counting the schema put
#: every request with one 34-137 % over its ``promptTokenCount``, and the least-squares
#: fit of the extra tokens goes below zero; a validation request of 2 billed tokens
#: carries a schema.  The switch is a word, apart from the amount, so that a fit of the
#: amount (``ctxrules calibrate``) cannot turn the schema's counting on.
GEMINI_RESPONSE_SCHEMA_TEXT = "none"
#: Tokens a counted ``responseSchema`` adds beyond its JSON.
GEMINI_RESPONSE_SCHEMA_TOKENS = 0


#: Tokens of one PDF page (Gemini tokens page: "each document page is equivalent to
#: 258 tokens"; Gemini 3 bills a page at its media resolution, 560 by default).
GEMINI_PDF_PAGE_TOKENS = 258
#: The most text a PDF page can add beyond its page image (the text Gemini extracts
#: from a PDF is billed too, and the body holds only the compressed file): a dense page,
#: the 3,000 tokens Anthropic's PDF page gives as its upper figure.
PDF_TEXT_PER_PAGE_HIGH = 3_000
#: Tools Google runs itself inside the request (their results are billed as prompt and
#: are not in the body), by their REST and SDK names.
SERVER_TOOLS = (
    "codeExecution",
    "googleSearch",
    "googleSearchRetrieval",
    "urlContext",
    "googleMaps",
    "fileSearch",
    "computerUse",
)


def _signature_tokens(part: Mapping[str, Any], slope: float, offset: float) -> float:
    sig = _get(part, "thoughtSignature")
    if not isinstance(sig, str) or not sig or not slope:
        return 0.0
    return max(0.0, slope * len(sig) - offset)


def _is_text(inline: Mapping[str, Any]) -> bool:
    mime = _get(inline, "mimeType")
    return isinstance(mime, str) and mime.startswith("text/")


def _inline_text(inline: Mapping[str, Any]) -> str:
    """A text file sent inline: its decoded text (the model reads it as text)."""
    data = inline.get("data")
    try:
        return base64.b64decode(data if isinstance(data, str) else "").decode("utf-8", "replace")
    except ValueError:
        return ""


def _schema_words(schema: Any) -> list[str]:
    """The words of a parameter schema: each type, description, enum value and
    property name, depth first (no JSON syntax, no ``required``, no titles)."""
    if not isinstance(schema, Mapping):
        return []
    out = []
    if schema.get("type") is not None:
        out.append(str(schema["type"]).lower())
    if schema.get("description"):
        out.append(str(schema["description"]))
    if isinstance(schema.get("enum"), list):
        out += [str(e) for e in schema["enum"]]
    props = schema.get("properties")
    for name, sub in props.items() if isinstance(props, Mapping) else ():
        out.append(str(name))
        out += _schema_words(sub)
    out += _schema_words(schema.get("items"))
    return out


#: What a function declaration without parameters is billed as: one declaring this
#: empty object schema (google-genai's form of it).  chatlas' ``test_tools_simple``
#: request bills 59 tokens on Gemini 2.5 Flash with its ``get_date`` declared with and
#: without it (est5's reading of its history); ellmer's ``google-tool.yml`` (fit set)
#: declares two tools without parameters and its requests were 24 … 28 tokens under
#: their bills counting none (the first −33.7 %), its one-parameter requests within 4 %.
GEMINI_EMPTY_PARAMETERS: dict[str, Any] = {"properties": {}, "required": [], "type": "OBJECT"}
_PARAMETER_KEYS = ("parameters", "parametersJsonSchema", "parameters_json_schema")


def _with_parameters(decl: Any) -> Any:
    """A declaration as billed: one without parameters with ``GEMINI_EMPTY_PARAMETERS``
    (a server tool, ``{"codeExecution": {}}``, is no declaration: as it is)."""
    if (
        not isinstance(decl, Mapping)
        or "name" not in decl
        or any(k in decl for k in _PARAMETER_KEYS)
    ):
        return decl
    return {**decl, "parameters": GEMINI_EMPTY_PARAMETERS}


def declaration_texts(decls: list[Any], profile: ModelProfile) -> list[str]:
    """The function declarations as the model's profile says they are read: their
    compact JSON (the default; a declaration without parameters as one declaring
    ``GEMINI_EMPTY_PARAMETERS``), or with ``declarations = "words"`` (Gemini 2.0,
    fitted) their words alone: name, description and the parameters' ``_schema_words``."""
    if profile.rule("declarations", "json") != "words":
        return [compact_json(_with_parameters(d)) for d in decls]
    out = []
    for d in decls:
        if not isinstance(d, Mapping):
            out.append(compact_json(d))
            continue
        params = _get(d, "parametersJsonSchema") or d.get("parameters")
        words = [str(d.get("name") or ""), str(d.get("description") or "")]
        out.append(" ".join(words + _schema_words(params)))
    return out


def _pdf(u: SegmentBuilder, inline: Mapping[str, Any], per_page: int) -> int:
    """A PDF sent inline: its pages at ``per_page``, flagged (``document_text``): the
    text Gemini extracts from it is billed too and the compressed file does not give
    its size (up to ``PDF_TEXT_PER_PAGE_HIGH`` a page)."""
    data = inline.get("data")
    try:
        pages = pdf_pages(base64.b64decode(data if isinstance(data, str) else "", validate=False))
    except ValueError:
        pages = 0
    pages = max(pages, 1)
    tokens = pages * per_page
    return u.unknown("document_text", tokens, tokens, tokens + pages * PDF_TEXT_PER_PAGE_HIGH)


def _cached(body: Mapping[str, Any], profile: ModelProfile) -> int:
    """What an explicit context cache the request names (``cachedContent``) can add: its
    contents are billed as prompt and are not in the body (up to the context window);
    0 when it names none."""
    return profile.context_window if _get(body, "cachedContent") else 0


def _current_turn(contents: list[Any]) -> int:
    """Index of the content that opens the current turn: the last user content with a
    text part (what follows it is the model's work on that turn: calls, results)."""
    for i in range(len(contents) - 1, -1, -1):
        c = contents[i]
        if isinstance(c, Mapping) and c.get("role", "user") == "user":
            parts = one_or_list(c.get("parts"))
            if any(isinstance(p, Mapping) and isinstance(p.get("text"), str) for p in parts):
                return i
    return 0


def _response_schema(body: Mapping[str, Any]) -> Any:
    config = _get(body, "generationConfig")
    if not isinstance(config, Mapping):
        return None
    for camel in ("responseJsonSchema", "responseSchema"):
        schema = _get(config, camel)
        if isinstance(schema, Mapping):
            return schema
    return None


def _schema_unit(body: Mapping[str, Any], profile: ModelProfile) -> dict[str, Any] | None:
    """The segment of the request's response schema where the profile counts it
    (``response_schema_text`` is ``"json"``): its compact JSON and the profile's
    ``response_schema`` tokens; ``None`` where there is none or it is not billed."""
    schema = _response_schema(body)
    if schema is None or not _schema_counted(profile):
        return None
    return {
        "key_obj": {"responseSchema": schema},
        "structured": [compact_json(schema)],
        "framing": profile.rule("response_schema", GEMINI_RESPONSE_SCHEMA_TOKENS),
    }


def _schema_counted(profile: ModelProfile) -> bool:
    """Whether the model bills a ``responseSchema`` as prompt (the profile's
    ``response_schema_text``: ``"json"`` counts it, ``"none"`` does not)."""
    how = profile.rule("response_schema_text", GEMINI_RESPONSE_SCHEMA_TEXT)
    if how not in ("none", "json"):
        raise ValidationError(
            f"estimator rule 'response_schema_text' is {how!r}, not 'none' or 'json'",
            where=str(profile.sources.get("estimator.response_schema_text", profile.model)),
            hint="'none': a response schema is not billed; 'json': its compact JSON is",
        )
    return how == "json"


def gemini_frame(options: RequestOptions, profile: ModelProfile) -> EstimateFrame | None:
    """What the core estimates a Gemini request with (``estimate_frame``): the function
    declarations as one segment with the tool prompt, the profile's framing of function
    parts and thought signatures, the image rule."""
    decls = [
        {
            "name": t["name"],
            "description": t.get("description", ""),
            **({"parametersJsonSchema": t["input_schema"]} if "input_schema" in t else {}),
        }
        for t in wire_tools(options.tools)
    ]
    units = (
        [
            tool_unit(
                {"tools": decls},
                structured=declaration_texts(decls, profile),
                tool_prompt=profile.tool_prompt_tokens,
            )
        ]
        if decls
        else []
    )
    schema = _schema_unit(options.extra, profile)
    if schema is not None:
        units.append(format_unit(schema))
    return estimate_frame(
        profile,
        wire="gemini",
        tools=units,
        framing={
            "function_part": profile.rule("function_part", GEMINI_FUNCTION_PART_TOKENS),
            "message": profile.rule("message", 0),
            "signature_slope": profile.rule("signature_slope", GEMINI_SIGNATURE_SLOPE),
            "signature_offset": profile.rule("signature_offset", GEMINI_SIGNATURE_OFFSET),
            "signature_all": 1.0 if profile.rule("signature_turns", "current") == "all" else 0.0,
            "pdf_page": profile.rule("pdf_page", GEMINI_PDF_PAGE_TOKENS),
            "pdf_text_high": PDF_TEXT_PER_PAGE_HIGH,
            "stored_conversation": _cached(options.extra, profile),
        },
        images=core_image_rule(profile.rule("image", GEMINI_IMAGE_RULE)),
    )


def gemini_call_profile(profile: ModelProfile, *, streamed: bool | None) -> ModelProfile:
    """``profile`` for one call, streamed or not (``None``: not known).  Where the model
    bills thought signatures on streamed calls only (its ``signature_calls`` is
    ``"streamed"``: Gemini 2.5 Flash), a call known not to be streamed counts none; a
    call of unknown kind counts them (the request body does not say which endpoint it
    goes to)."""
    billed_on = profile.rule("signature_calls", GEMINI_SIGNATURE_CALLS)
    if billed_on != "streamed" or streamed is not False:
        return profile
    return msgspec.structs.replace(profile, estimator={**profile.estimator, "signature_slope": 0})


def estimate_gemini(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """Gemini generateContent: tools, system instruction, a response schema, then each
    content's parts, each content framed by the profile's ``message`` tokens (on its
    first part; Gemini 3).  Thought signatures count (where the model bills them: the
    profile's ``signature_slope``) in the current turn only (in every turn where its
    ``signature_turns`` is ``"all"``); an inline text file counts
    as its text; an inline PDF its pages (the profile's ``pdf_page``), flagged for the
    text extracted from it; code the model ran and its output as their text; an image
    by URI has no size (flagged); a server-side tool (``SERVER_TOOLS``) is flagged:
    what it finds in the request is billed as prompt; so is an explicit context cache
    the request names (``cachedContent``, flagged as ``stored_conversation``)."""
    u = SegmentBuilder()
    decls: list[Any] = []
    server = False
    for t in one_or_list(body.get("tools")):  # a list, or one Tool object alone
        if isinstance(t, Mapping):
            fd = _get(t, "functionDeclarations")
            decls.extend(fd if isinstance(fd, list) else [t])
            server = server or any(_get(t, name) is not None for name in SERVER_TOOLS)
    if server:  # what the tools find or run in this request is billed as prompt
        u.unknown("server_tool_results", 0, 0, profile.context_window)
    if _cached(body, profile):  # an explicit cache's contents, stored with the vendor
        u.unknown("stored_conversation", 0, 0, _cached(body, profile))
    if decls:
        u.add(
            {"tools": decls},
            structured=declaration_texts(decls, profile),
            tool_prompt=profile.tool_prompt_tokens,
        )
    schema = _schema_unit(body, profile)
    if schema is not None:  # only where the profile says it is billed (see the constant)
        u.add(schema["key_obj"], structured=schema["structured"], framing=schema["framing"])
    part_tokens = profile.rule("function_part", GEMINI_FUNCTION_PART_TOKENS)
    per_content = profile.rule("message", 0)
    slope = profile.rule("signature_slope", GEMINI_SIGNATURE_SLOPE)
    offset = profile.rule("signature_offset", GEMINI_SIGNATURE_OFFSET)
    all_turns = profile.rule("signature_turns", "current") == "all"
    image_rule = profile.rule("image", GEMINI_IMAGE_RULE)
    pdf_page = int(profile.rule("pdf_page", GEMINI_PDF_PAGE_TOKENS))
    system = _get(body, "systemInstruction")
    if isinstance(system, Mapping):
        texts = [
            p["text"]
            for p in one_or_list(system.get("parts"))
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
        u.add({"system": system}, prose=texts)
    contents = body.get("contents") or []
    turn = _current_turn(contents) if isinstance(contents, list) else 0
    for ci, c in enumerate(contents if isinstance(contents, list) else []):
        if not isinstance(c, Mapping):
            continue
        first = len(u.units)
        for p in one_or_list(c.get("parts")):  # a list, or one part alone
            if not isinstance(p, Mapping):
                continue
            key = {"role": c.get("role"), "part": p}
            # Signatures of earlier turns are not billed (like earlier thinking), except
            # where the profile's ``signature_turns`` is "all" (Gemini 3.5).
            sig = _signature_tokens(p, slope, offset) if ci >= turn or all_turns else 0.0
            fc, fr = _get(p, "functionCall"), _get(p, "functionResponse")
            inline = _get(p, "inlineData")
            code, result = _get(p, "executableCode"), _get(p, "codeExecutionResult")
            if isinstance(code, Mapping) or isinstance(result, Mapping):
                # The code the model ran and its output, sent back: their text.
                text = str((code or {}).get("code") or (result or {}).get("output") or "")
                u.add(key, structured=[text], framing=part_tokens + sig)
            elif isinstance(fc, Mapping):
                text = str(fc.get("name") or "") + compact_json(fc.get("args") or {})
                u.add(key, structured=[text], framing=part_tokens + sig)
            elif isinstance(fr, Mapping):
                text = str(fr.get("name") or "") + compact_json(fr.get("response") or {})
                u.add(key, structured=[text], framing=part_tokens + sig)
            elif isinstance(inline, Mapping) and _is_text(inline):
                u.add(key, prose=[_inline_text(inline)], framing=sig)
            elif isinstance(inline, Mapping) and _get(inline, "mimeType") == "application/pdf":
                u.add(key, framing=_pdf(u, inline, pdf_page) + sig)
            elif isinstance(inline, Mapping):
                data = inline.get("data")
                size = decoded_image_size(data) if isinstance(data, str) else None
                u.add(key, images=u.image(image_rule, size), framing=sig)
            elif isinstance(_get(p, "fileData"), Mapping):  # by URI: its size is unknown
                u.add(key, images=u.image(image_rule, None), framing=sig)
            else:
                u.add(key, prose=[str(p.get("text") or "")], framing=sig)
        if per_content and len(u.units) > first:  # a content without parts has no segment
            u.add_framing(first, per_content)
    return u.finish(profile, prefix_tokens, wire="gemini")


class GeminiProvider(Provider):
    """Google Gemini generateContent API."""

    name = "gemini"
    wire = "gemini"
    family = "gemini"
    default_model = "gemini-2.5-flash"
    reserved = frozenset({"contents", "systemInstruction", "tools"})
    max_tokens_fields = (("generationConfig", "maxOutputTokens"),)
    cache_rule = "gemini-implicit"

    def endpoint(self, model: str) -> str:
        return f"/v1beta/models/{model}:generateContent"

    def adapt_options(self, options: RequestOptions) -> RequestOptions:
        if options.max_tokens is None:
            return options
        extra = dict(options.extra)
        config = dict(extra.get("generationConfig") or {})
        config.setdefault("maxOutputTokens", options.max_tokens)
        extra["generationConfig"] = config
        return msgspec.structs.replace(options, max_tokens=None, extra=extra)

    def parse_usage(self, response: Mapping[str, Any]) -> Usage | None:
        u = _get(response, "usageMetadata")
        if not isinstance(u, Mapping):
            return None
        prompt = self._int(_get(u, "promptTokenCount")) + self._int(
            _get(u, "toolUsePromptTokenCount")
        )
        cached = self._int(_get(u, "cachedContentTokenCount"))
        return Usage(
            input_tokens=prompt - cached,
            cache_read_tokens=cached,
            output_tokens=self._int(_get(u, "candidatesTokenCount"))
            + self._int(_get(u, "thoughtsTokenCount")),
        )

    def prompt_too_long(self, status: int | None, body: Any) -> PromptTooLong | None:
        """``The input token count (N) exceeds the maximum number of tokens allowed
        (M).`` or the older ``Input request contains (N) tokens, which is more than the
        max tokens limit allowed: (M)`` (400 INVALID_ARGUMENT)."""
        err = body.get("error") if isinstance(body, Mapping) else None
        if status not in (None, 400) or not isinstance(err, Mapping):
            return None
        msg = str(err.get("message", ""))
        if (
            "exceeds the maximum number of tokens" not in msg
            and "more than the max tokens limit" not in msg
        ):
            return None
        tokens, limit = self._numbers(r"\((\d+)\).*?\((\d+)\)", msg)
        return PromptTooLong(f"gemini: {msg}", tokens=tokens, limit=limit)

    def validate(self, body: Mapping[str, Any]) -> list[str]:
        return validate_gemini(body)

    estimate_prompt = staticmethod(estimate_gemini)
    estimate_frame = staticmethod(gemini_frame)
