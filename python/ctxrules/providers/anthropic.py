"""Anthropic Messages: ``POST /v1/messages``.

The body is written in Rust (``wire = "anthropic"``); this module adds usage parsing,
the prompt-too-long error, a structural validator that checks a body the way the API
would before accepting it, the billed-prompt estimate (``estimate_anthropic``) and the
cache rules (explicit breakpoints: ``ctxrules.providers.cache.predict_anthropic``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import msgspec

from .base import PromptTooLong, Provider, RequestOptions, Usage
from .estimate import (
    EstimateFrame,
    PromptEstimate,
    SegmentBuilder,
    compact_json,
    estimate_frame,
    format_unit,
    spaced_json,
    strip_cache_control,
    tool_unit,
    wire_tools,
)
from .images import ANTHROPIC_IMAGE_RULE, core_image_rule, decoded_image_size, pdf_pages
from .models import ModelProfile

__all__ = [
    "ANTHROPIC_LINE_BREAK_TOKENS",
    "ANTHROPIC_MESSAGE_TOKENS",
    "ANTHROPIC_OUTPUT_FORMAT_TOKENS",
    "ANTHROPIC_PDF_PAGE_TOKENS",
    "ANTHROPIC_REQUEST_TOKENS",
    "ANTHROPIC_THINKING_PROMPT_TOKENS",
    "ANTHROPIC_TOOL_BLOCK_TOKENS",
    "MAX_BREAKPOINTS",
    "SERVER_TOOLS",
    "AnthropicProvider",
    "anthropic_frame",
    "estimate_anthropic",
    "validate_anthropic",
]

#: Anthropic accepts at most this many ``cache_control`` breakpoints per request.
MAX_BREAKPOINTS = 4
_BLOCK_TYPES = {
    "user": {"text", "image", "tool_result", "document"},
    "assistant": {"text", "thinking", "redacted_thinking", "tool_use", "compaction"},
}


def _server_block(kind: Any) -> bool:
    """A server tool's block (web search, tool search, code execution, …): the API runs
    those tools itself, so they need no declaration in ``tools``."""
    return isinstance(kind, str) and (
        kind == "server_tool_use" or (kind.endswith("_tool_result") and kind != "tool_result")
    )


def validate_anthropic(body: Mapping[str, Any]) -> list[str]:
    """Problems of an Anthropic Messages body: pairing, roles, signatures, breakpoints,
    and client tool blocks in a request that declares no ``tools`` (the API answers
    400; server tool blocks need no declaration)."""
    problems: list[str] = []
    client_tool_blocks = 0
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("model missing")
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] <= 0:
        problems.append("max_tokens missing or not positive")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages missing or empty"]
    breakpoints = int("cache_control" in body)  # automatic caching counts as one
    system = body.get("system")
    if isinstance(system, list):
        for i, b in enumerate(system):
            if b.get("type") != "text" or not b.get("text"):
                problems.append(f"system[{i}] is not a non-empty text block")
            breakpoints += "cache_control" in b
    elif system is not None and not isinstance(system, str):
        problems.append("system is neither a string nor a list of text blocks")
    for t in body.get("tools") or []:
        breakpoints += "cache_control" in t
    if messages[0].get("role") != "user":
        problems.append("messages[0] is not the user's")
    pending: list[str] = []  # tool_use ids of the previous assistant message
    seen: set[str] = set()
    prev_role = None
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in _BLOCK_TYPES:
            problems.append(f"messages[{i}] has role {role!r}")
            continue
        if role == prev_role:
            problems.append(f"messages[{i}] repeats role {role}")
        prev_role = role
        content = m.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not content:
            problems.append(f"messages[{i}] has no content")
            continue
        answered: list[str] = []
        calls: list[str] = []
        opened = True  # tool_result blocks must come before anything else
        for j, b in enumerate(content):
            kind = b.get("type")
            where = f"messages[{i}].content[{j}]"
            if kind not in _BLOCK_TYPES[role] and not (role == "assistant" and _server_block(kind)):
                problems.append(f"{where}: {kind!r} block in a {role} message")
            client_tool_blocks += kind in ("tool_use", "tool_result")
            if "cache_control" in b:
                breakpoints += 1
                if kind in ("thinking", "redacted_thinking"):
                    problems.append(f"{where}: cache_control on a thinking block")
            if kind == "text" and not b.get("text"):
                problems.append(f"{where}: empty text block")
            if kind == "thinking" and not b.get("signature"):
                problems.append(f"{where}: thinking without signature")
            if kind == "compaction" and b.get("content") is not None and not _summary(b):
                problems.append(f"{where}: compaction content is not a non-empty string or null")
            if kind == "tool_use":
                tid = b.get("id")
                if not tid or tid in seen:
                    problems.append(f"{where}: tool_use id missing or repeated")
                seen.add(tid)
                calls.append(tid)
                if not isinstance(b.get("input"), dict):
                    problems.append(f"{where}: tool_use input is not an object")
            if kind == "tool_result":
                if not opened:
                    problems.append(f"{where}: tool_result after other content")
                if b.get("tool_use_id") not in pending:
                    problems.append(f"{where}: orphan tool_result {b.get('tool_use_id')!r}")
                answered.append(b.get("tool_use_id"))
            else:
                opened = False
        for tid in pending:
            if tid not in answered:
                problems.append(f"messages[{i}]: tool_use {tid!r} not answered here")
        pending = calls
    for tid in pending:
        problems.append(f"tool_use {tid!r} unanswered at the end")
    last = messages[-1]
    if last.get("role") == "assistant" and isinstance(last.get("content"), list):
        final = last["content"][-1] if last["content"] else {}
        if final.get("type") == "text" and final.get("text", "") != final.get("text", "").rstrip():
            problems.append("final assistant text ends with whitespace (refused as a prefill)")
    if client_tool_blocks and not body.get("tools"):
        problems.append(f"{client_tool_blocks} tool_use / tool_result blocks but no tools declared")
    if breakpoints > MAX_BREAKPOINTS:
        problems.append(f"{breakpoints} cache_control breakpoints (at most {MAX_BREAKPOINTS})")
    return problems


#: Tokens Anthropic adds around each tool_use and each tool_result block (their
#: wrappers in the prompt the model reads).  Fitted on the Claude Code transcripts'
#: request-to-request growth; the cassettes agree (benches/README.md).
ANTHROPIC_TOOL_BLOCK_TOKENS = 33
#: Tokens of an Anthropic request beyond its content (the turn markers around the
#: conversation and the primed reply), of each message's turn marker, and of the
#: prompt extended thinking adds: fitted on the fit set (benches/README.md).  The
#: thinking prompt was 25 from the pooled fit; refitted on the fit set's requests with
#: thinking alone (4 distinct bodies: 4 … 7 tokens under with 25, one 8 over), their
#: median residual is 0 and their mean error least at 29.
ANTHROPIC_REQUEST_TOKENS = 4
ANTHROPIC_MESSAGE_TOKENS = 4
ANTHROPIC_THINKING_PROMPT_TOKENS = 29
#: Tokens a structured-output format adds beyond its schema's JSON (``output_config``
#: / the beta ``output_format``): fitted on the fit set (benches/README.md).
ANTHROPIC_OUTPUT_FORMAT_TOKENS = 140
#: Tokens a line break in a text block or the system text adds beyond what the
#: tokenizer counts for it: fitted on the fit set's Anthropic requests (the mean error
#: is least at 1.75 … 2; prose without line breaks is billed as o200k counts it, 1,107
#: tokens within 1), benches/README.md.
ANTHROPIC_LINE_BREAK_TOKENS = 2


def _ttl(block: Mapping[str, Any]) -> str | None:
    cc = block.get("cache_control")
    if not isinstance(cc, Mapping):
        return None
    ttl = cc.get("ttl")
    return ttl if isinstance(ttl, str) and ttl else "5m"


#: Tools Anthropic runs itself (their ``type`` prefixes): what they find or run in the
#: request is billed as prompt and the body does not hold it.
SERVER_TOOLS = ("web_search_", "web_fetch_", "code_execution_", "tool_search_tool_")


def _search_result_text(block: Mapping[str, Any]) -> str:
    """A ``search_result`` block as the model reads it: source, title and its texts."""
    texts = [str(p.get("text") or "") for p in block.get("content") or [] if isinstance(p, Mapping)]
    return "\n".join([str(block.get("source") or ""), str(block.get("title") or ""), *texts])


def _cites(block: Mapping[str, Any]) -> bool:
    """A document or search result with citations enabled."""
    c = block.get("citations")
    return isinstance(c, Mapping) and c.get("enabled") is True


def _citations(u: SegmentBuilder, block: Mapping[str, Any], profile: ModelProfile) -> None:
    """Flag the citation prompt a block with citations enabled brings (``citations``):
    the citations page says enabling them adds system-prompt tokens and chunks the
    document, and gives no size."""
    if _cites(block):
        u.unknown("citations", 0, 0, profile.context_window)


def _result_parts(
    content: Any, u: SegmentBuilder, profile: ModelProfile
) -> tuple[list[str], list[Mapping[str, Any]]]:
    if isinstance(content, str):
        return [content], []
    texts, images = [], []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, Mapping):
            if part.get("type") == "image":
                images.append(part)
            elif part.get("type") == "search_result":
                texts.append(_search_result_text(part))
                _citations(u, part, profile)
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
    return texts, images


def _anthropic_image(u: SegmentBuilder, block: Mapping[str, Any], profile: ModelProfile) -> int:
    """An image block's tokens by the model's rule; a URL or file image has no size
    here (flagged by ``SegmentBuilder.image``)."""
    src = block.get("source") if isinstance(block.get("source"), Mapping) else {}
    data = src.get("data") if isinstance(src, Mapping) else None
    size = decoded_image_size(data) if isinstance(data, str) else None
    return u.image(profile.rule("image", ANTHROPIC_IMAGE_RULE), size)


#: Tokens of one PDF page (its text and its page image; the PDF page says 1,500-3,000
#: of text per page plus the image): fitted on the fit set.
ANTHROPIC_PDF_PAGE_TOKENS = 1_500


def _document(
    u: SegmentBuilder, block: Mapping[str, Any], profile: ModelProfile
) -> tuple[str, int]:
    """A document block: its text (a text source, or title and context) and fixed
    tokens (a base64 PDF's pages at the profile's ``pdf_page``; a PDF by URL or file id
    has no page count here: one page's worth, flagged, up to 100 pages)."""
    source = block.get("source")
    src: Mapping[str, Any] = source if isinstance(source, Mapping) else {}
    extra = " ".join(str(block.get(k) or "") for k in ("title", "context")).strip()
    if src.get("type") == "text":
        return f"{extra}\n{src.get('data') or ''}".strip(), 0
    if src.get("type") == "content":
        texts = [
            str(p.get("text") or "") for p in src.get("content") or [] if isinstance(p, Mapping)
        ]
        return "\n".join([extra, *texts]).strip(), 0
    per_page = int(profile.rule("pdf_page", ANTHROPIC_PDF_PAGE_TOKENS))
    data = src.get("data")
    if src.get("type") == "base64" and isinstance(data, str):
        try:
            pages = pdf_pages(base64.b64decode(data, validate=False))
        except ValueError:
            pages = 0
        if pages:
            return extra, pages * per_page
    return extra, u.unknown("document", per_page, per_page // 2, per_page * 100)


def _output_format(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The structured-output format of a request (``output_config.format``, or the
    beta's top-level ``output_format``)."""
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else None
    if not isinstance(fmt, Mapping):
        fmt = body.get("output_format")
    return fmt if isinstance(fmt, Mapping) else None


def _summary(block: Mapping[str, Any]) -> str:
    """The summary of a ``compaction`` block ("" when null: a no-op)."""
    content = block.get("content")
    return content if isinstance(content, str) else ""


def _compacted_from(messages: list[Mapping[str, Any]]) -> tuple[int, int]:
    """(message, block) of the latest compaction block with a summary, or (0, 0)."""
    for mi in range(len(messages) - 1, -1, -1):
        content = messages[mi].get("content")
        if not isinstance(content, list):
            continue
        for bi in range(len(content) - 1, -1, -1):
            b = content[bi]
            if isinstance(b, Mapping) and b.get("type") == "compaction" and _summary(b):
                return mi, bi
    return 0, 0


def _tool_prompt(profile: ModelProfile, choice: Any) -> int:
    """The tool prompt of a request whose ``tool_choice`` is ``choice``."""
    forced = isinstance(choice, Mapping) and choice.get("type") in ("any", "tool")
    return profile.tool_prompt_tokens_forced if forced else profile.tool_prompt_tokens


def _tool_text(tool: Mapping[str, Any]) -> str:
    """A tool definition as it is counted: its JSON, cache marker left out."""
    return spaced_json(strip_cache_control(tool))


def _output_unit(fmt: Mapping[str, Any], profile: ModelProfile) -> dict[str, Any]:
    """The segment of a structured-output format: its schema's JSON and the profile's
    ``output_format`` tokens."""
    return {
        "key_obj": {"output_format": fmt},
        "structured": [compact_json(fmt.get("schema", fmt))],
        "framing": profile.rule("output_format", ANTHROPIC_OUTPUT_FORMAT_TOKENS),
    }


def _request_tokens(body: Mapping[str, Any], profile: ModelProfile) -> float:
    """The request's own framing (the primed reply), and the prompt extended thinking
    adds when the request enables it."""
    thinking = body.get("thinking")
    on = isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")
    return profile.rule("request", ANTHROPIC_REQUEST_TOKENS) + (
        profile.rule("thinking_prompt", ANTHROPIC_THINKING_PROMPT_TOKENS) if on else 0
    )


def anthropic_frame(options: RequestOptions, profile: ModelProfile) -> EstimateFrame | None:
    """What the core estimates an Anthropic request with (``estimate_frame``): a
    segment per tool as the body declares it (``_tool_text``, the tool prompt on the
    first), a structured-output format among the extra fields, the profile's framing
    (tool blocks, each message, the request) and which thinking is kept, the image
    rule, and a top-level ``cache_control`` (a breakpoint on the last block)."""
    prompt = _tool_prompt(profile, options.extra.get("tool_choice"))
    tools = [
        {
            "name": t["name"],
            "description": t.get("description", ""),
            "input_schema": t.get("input_schema", {"type": "object", "properties": {}}),
        }
        for t in wire_tools(options.tools)
    ]
    units = [
        tool_unit(t, structured=[_tool_text(t)], tool_prompt=prompt if i == 0 else 0)
        for i, t in enumerate(tools)
    ]
    fmt = _output_format(options.extra)
    if fmt is not None:
        units.append(format_unit(_output_unit(fmt, profile)))
    marker = options.extra.get("cache_control")
    return estimate_frame(
        profile,
        wire="anthropic-messages",
        tools=units,
        framing={
            "tool_block": profile.rule("tool_block", ANTHROPIC_TOOL_BLOCK_TOKENS),
            "message": profile.rule("message", ANTHROPIC_MESSAGE_TOKENS),
            "request": _request_tokens(options.extra, profile),
            "thinking_all": 1.0 if profile.rule("thinking", "last") == "all" else 0.0,
            "line_break": profile.rule("line_break", ANTHROPIC_LINE_BREAK_TOKENS),
        },
        images=core_image_rule(profile.rule("image", ANTHROPIC_IMAGE_RULE)),
        auto_breakpoint=_ttl({"cache_control": marker}) if isinstance(marker, Mapping) else None,
    )


def estimate_anthropic(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """Anthropic Messages: tools, then system, then messages (the cache's prefix order).

    Thinking is counted in the last assistant message only where the model drops the
    thinking of earlier turns (the profile's ``thinking`` rule ``"last"``), in every
    assistant message where it keeps them (``"all"``: Opus 4.5+, Sonnet 4.6).  A
    structured-output schema is counted after the tools, with the profile's
    ``output_format`` tokens.  A ``compaction`` block with a summary makes the
    API ignore every message block before it (neither read nor billed): only the
    blocks from the latest such block on are counted, the block as its summary text; a
    block whose summary is null (a failed compaction) is a no-op and counts nothing.
    A top-level ``cache_control`` (automatic caching) is a breakpoint on the last block.
    A ``search_result`` (alone or in a tool result) counts its source, title and texts;
    a tool with ``defer_loading`` counts nothing until a tool search loads it.
    What the body does not hold is flagged with the range it implies: the citation
    prompt of a document or search result with citations enabled (``citations``), and
    the work of a server tool (``SERVER_TOOLS``, an MCP server) run inside the request
    (``server_tool_results``).
    """
    u = SegmentBuilder()
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
    choice = body.get("tool_choice")
    prompt = _tool_prompt(profile, choice)
    # What a server tool (or the MCP connector's servers) finds or runs in this request
    # is billed as prompt: flagged once.
    if body.get("mcp_servers") or any(
        isinstance(t.get("type"), str) and t["type"].startswith(SERVER_TOOLS) for t in tools
    ):
        u.unknown("server_tool_results", 0, 0, profile.context_window)
    for i, t in enumerate(tools):
        # A deferred tool is not in the prompt until the tool search finds it (the
        # tool-search page: ``defer_loading`` tools are not loaded initially).
        deferred = t.get("defer_loading") is True
        u.add(
            t,
            structured=[] if deferred else [_tool_text(t)],
            tool_prompt=prompt if i == 0 else 0,
            breakpoint=_ttl(t),
        )
    fmt = _output_format(body)
    if fmt is not None:
        out = _output_unit(fmt, profile)
        u.add(out["key_obj"], structured=out["structured"], framing=out["framing"])
    block_tokens = profile.rule("tool_block", ANTHROPIC_TOOL_BLOCK_TOKENS)
    keep_all_thinking = profile.rule("thinking", "last") == "all"
    line_break = profile.rule("line_break", ANTHROPIC_LINE_BREAK_TOKENS)
    system = body.get("system")
    if isinstance(system, str):
        u.add({"system": system}, prose=[system], framing=line_break * system.count("\n"))
    elif isinstance(system, list):
        for b in system:
            if isinstance(b, Mapping):
                text = str(b.get("text") or "")
                u.add(b, prose=[text], framing=line_break * text.count("\n"), breakpoint=_ttl(b))
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    last_assistant = max(
        (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1
    )
    start = _compacted_from(messages)
    per_message = profile.rule("message", ANTHROPIC_MESSAGE_TOKENS)
    for mi, m in enumerate(messages):
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        opened = len(u.units)
        for bi, b in enumerate(blocks if isinstance(blocks, list) else []):
            if not isinstance(b, Mapping) or (mi, bi) < start:
                continue
            kind = b.get("type")
            key = {"role": m.get("role"), "block": b}
            bp = _ttl(b)
            if kind == "text":
                text = str(b.get("text") or "")
                u.add(key, prose=[text], framing=line_break * text.count("\n"), breakpoint=bp)
            elif kind == "image":
                u.add(key, images=_anthropic_image(u, b, profile), breakpoint=bp)
            elif kind == "tool_use":
                u.add(
                    key,
                    structured=[str(b.get("name") or "") + spaced_json(b.get("input") or {})],
                    framing=block_tokens,
                    breakpoint=bp,
                )
            elif kind == "tool_result":
                texts, images = _result_parts(b.get("content", ""), u, profile)
                u.add(
                    key,
                    structured=texts,
                    images=sum(_anthropic_image(u, p, profile) for p in images),
                    framing=block_tokens,
                    breakpoint=bp,
                )
            elif kind == "thinking":
                kept = keep_all_thinking or mi == last_assistant
                text = str(b.get("thinking") or "") if kept else ""
                u.add(key, prose=[text], breakpoint=bp)
            elif kind == "document":
                text, tokens = _document(u, b, profile)
                _citations(u, b, profile)
                u.add(key, prose=[text], framing=tokens, breakpoint=bp)
            elif kind == "search_result":
                _citations(u, b, profile)
                u.add(key, prose=[_search_result_text(b)], breakpoint=bp)
            elif kind == "redacted_thinking":
                u.add(key, breakpoint=bp)  # opaque; dropped like thinking of earlier turns
            elif kind == "compaction":
                if _summary(b):  # null: a failed compaction, which the API ignores
                    u.add(key, prose=[_summary(b)], breakpoint=bp)
            else:  # server tool blocks, …: their JSON as a stand-in
                u.add(key, structured=[compact_json(strip_cache_control(b))], breakpoint=bp)
        if len(u.units) > opened:  # the message's turn marker, on its first block
            u.add_framing(opened, per_message)
    if isinstance(body.get("cache_control"), Mapping) and u.units:
        last = u.units[-1]
        u.units[-1] = (*last[:4], last[4] or _ttl(body) or "5m")
    # The request's own framing and the primed reply (after the last breakpoint), and
    # the prompt extended thinking adds.
    u.add({"reply": True}, framing=_request_tokens(body, profile))
    return u.finish(profile, prefix_tokens, wire="anthropic-messages")


def _anthropic_counts(u: Mapping[str, Any]) -> Usage:
    """The four counts of an Anthropic usage object (or of one of its iterations)."""
    return Usage(
        input_tokens=Provider._int(u.get("input_tokens")),
        cache_read_tokens=Provider._int(u.get("cache_read_input_tokens")),
        cache_write_tokens=Provider._int(u.get("cache_creation_input_tokens")),
        output_tokens=Provider._int(u.get("output_tokens")),
    )


class AnthropicProvider(Provider):
    """Anthropic Messages API."""

    name = "anthropic"
    wire = "anthropic"
    family = "anthropic"
    default_model = "claude-sonnet-4-5"
    reserved = frozenset({"model", "max_tokens", "system", "messages", "tools"})
    cache_rule = "anthropic-breakpoints"
    explicit_cache = True
    requires_max_tokens = True

    def endpoint(self, model: str) -> str:
        return "/v1/messages"

    def parse_usage(self, response: Mapping[str, Any]) -> Usage | None:
        """The top-level counts (the answer's own sampling, which server compaction
        leaves out) and, apart, the compaction iterations summed (``Usage.compaction``)."""
        u = response.get("usage")
        if not isinstance(u, Mapping):
            return None
        steps = [
            it
            for it in u.get("iterations") or ()
            if isinstance(it, Mapping) and it.get("type") == "compaction"
        ]
        compaction = None
        if steps:
            counted = [_anthropic_counts(it) for it in steps]
            compaction = Usage(
                input_tokens=sum(c.input_tokens for c in counted),
                cache_read_tokens=sum(c.cache_read_tokens for c in counted),
                cache_write_tokens=sum(c.cache_write_tokens for c in counted),
                output_tokens=sum(c.output_tokens for c in counted),
            )
        return msgspec.structs.replace(_anthropic_counts(u), compaction=compaction)

    def prompt_too_long(self, status: int | None, body: Any) -> PromptTooLong | None:
        """``prompt is too long: N tokens > M maximum`` (400, or 413 from a gateway), or
        ``input length and `max_tokens` exceed context limit: A + B > C`` (the prompt
        leaves no room for the output limit: compacting the prompt makes room)."""
        err = body.get("error") if isinstance(body, Mapping) else None
        msg = str(err.get("message", "")) if isinstance(err, Mapping) else str(body or "")
        if status not in (None, 400, 413):
            return None
        lowered = msg.lower()
        if "prompt is too long" in lowered:
            tokens, limit = self._numbers(r"(\d[\d,]*)\s*tokens\s*>\s*(\d[\d,]*)", msg)
        elif "exceed context limit" in lowered:
            tokens, limit = self._numbers(r"(\d[\d,]*)\s*\+\s*\d[\d,]*\s*>\s*(\d[\d,]*)", msg)
        else:
            return None
        return PromptTooLong(f"anthropic: {msg}", tokens=tokens, limit=limit)

    def validate(self, body: Mapping[str, Any]) -> list[str]:
        return validate_anthropic(body)

    estimate_prompt = staticmethod(estimate_anthropic)
    estimate_frame = staticmethod(anthropic_frame)
