"""The billed prompt size of a request body, counted the way each vendor bills it.

``estimate_prompt(provider, body, profile)`` (what ``Provider.estimate_prompt`` calls)
walks a request body in the vendor's prefix order and splits it into *segments* —
the units a prompt cache can share (a tool definition, a system block, a content
block, a message) — each with its identity (a hash of its bytes without cache
markers) and its billed tokens.  The sum is ``input_tokens``: what the vendor's
``usage`` reports as input + cache writes + cache reads for that body.

What is counted, per vendor (the constants' data and fit are in benches/README.md,
"Fidelity"):

* every text with the model's tokenizer, times ``ModelProfile.calibration`` for prose
  (system, messages, thinking) or ``structured_calibration`` for tool definitions,
  tool inputs and tool results — one batch count for the whole body;
* the tool prompt the vendor adds when tools are declared
  (``ModelProfile.tool_prompt_tokens``, ``tool_prompt_tokens_forced`` for Anthropic's
  ``any`` / ``tool`` choice);
* framing: OpenAI's per-message tokens (3 + the role, 1 more for a ``name``, 3 that
  prime the reply; tools written as the ``namespace functions`` declaration the models
  read), a fitted cost per tool call, Anthropic's per tool_use / tool_result block,
  Gemini's per function part;
* images by each vendor's published rule (Anthropic width × height / 750 after its
  resize, OpenAI 85 + 170 per 512-pixel tile, Gemini 258 per 768-pixel tile);
* Gemini thought signatures, billed as the thinking they carry, from their length.

All counts cross into Rust once (``count_batch`` of every text of the body).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .models import ModelProfile

__all__ = [
    "ANTHROPIC_TOOL_BLOCK_TOKENS",
    "GEMINI_FUNCTION_PART_TOKENS",
    "OPENAI_TOOL_CALL_TOKENS",
    "PromptEstimate",
    "Segment",
    "estimate_anthropic",
    "estimate_gemini",
    "estimate_generic",
    "estimate_openai_chat",
    "estimate_openai_responses",
    "image_size",
    "openai_tool_namespace",
]

#: Tokens Anthropic adds around each tool_use and each tool_result block (their
#: wrappers in the prompt the model reads).  Fitted on the Claude Code transcripts'
#: request-to-request growth; the cassettes agree (benches/README.md).
ANTHROPIC_TOOL_BLOCK_TOKENS = 33
#: Tokens of one OpenAI tool call beyond its name and arguments (its message header
#: and the header of the result that answers it); fitted on the recorded gpt-5.4-mini
#: requests with tool calls.
OPENAI_TOOL_CALL_TOKENS = 12
#: OpenAI's framing of a message (``<|start|>role<|message|>…<|end|>``, the role
#: counted separately) and of the reply it primes, as tiktoken's cookbook counts them.
OPENAI_MESSAGE_TOKENS = 3
OPENAI_REPLY_TOKENS = 3
#: Tokens of a Gemini functionCall / functionResponse part beyond its name and JSON;
#: fitted on the recorded Gemini 3 requests.
GEMINI_FUNCTION_PART_TOKENS = 6
#: A Gemini thought signature is billed as the thinking it carries; its tokens from its
#: base64 length (a line fitted on the four signatures of the recorded Gemini 3
#: requests, against the thoughtsTokenCount of the responses that produced them).
GEMINI_SIGNATURE_SLOPE = 0.225
GEMINI_SIGNATURE_OFFSET = 29.0


class Segment(msgspec.Struct, frozen=True):
    """One unit of a request in prefix order: its identity, its billed tokens, and the
    cache breakpoint it carries (an Anthropic ``cache_control`` TTL, else ``None``)."""

    key: str
    tokens: int
    breakpoint: str | None = None


class PromptEstimate(msgspec.Struct, frozen=True, kw_only=True):
    """The estimated billed prompt of one request body.

    ``input_tokens`` is input + cache writes + cache reads as the vendor's usage would
    report them; ``segments`` split it in prefix order (their tokens add up to it);
    ``rules`` states what was applied: tokenizer, calibrations, tool prompt, framing,
    image, content and unrecorded-prefix tokens.
    """

    input_tokens: int
    segments: tuple[Segment, ...]
    rules: dict[str, Any]


def _key(obj: Any) -> str:
    """Identity of a unit: a hash of its JSON with every ``cache_control`` removed (a
    marker moves between requests; the cached bytes are what it marks)."""
    return hashlib.blake2b(msgspec.json.encode(_strip(obj)), digest_size=16).hexdigest()


def _strip(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: _strip(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _json(obj: Any) -> str:
    return msgspec.json.encode(obj).decode()


def _json_spaced(obj: Any) -> str:
    # Anthropic's prompt shows tool definitions and inputs as JSON with ", " and ": "
    # (the form the calibration was fitted on; compact JSON counts ~5 % fewer tokens).
    return json.dumps(obj, ensure_ascii=False)


class _Units:
    """Segments under construction: texts to count (prose or structured) and fixed tokens."""

    def __init__(self) -> None:
        self.units: list[tuple[str, list[str], list[str], float, str | None]] = []
        self.tool_prompt = 0
        self.framing = 0.0
        self.images = 0

    def add(
        self,
        key_obj: Any,
        *,
        prose: Sequence[str] = (),
        structured: Sequence[str] = (),
        framing: float = 0.0,
        images: int = 0,
        tool_prompt: int = 0,
        breakpoint: str | None = None,
    ) -> None:
        self.framing += framing
        self.images += images
        self.tool_prompt += tool_prompt
        fixed = framing + images + tool_prompt
        self.units.append(
            (
                _key(key_obj),
                [t for t in prose if t],
                [t for t in structured if t],
                fixed,
                breakpoint,
            )
        )

    def finish(self, profile: ModelProfile, prefix_tokens: int, **rules: Any) -> PromptEstimate:
        from ..tokenizers import get_tokenizer

        texts = [t for _, prose, structured, _, _ in self.units for t in (*prose, *structured)]
        counts = iter(get_tokenizer(profile.tokenizer).count_batch(texts) if texts else [])
        raw: list[float] = []
        content = 0.0
        if prefix_tokens:
            raw.append(float(prefix_tokens))
        for _, prose, structured, fixed, _ in self.units:
            c = sum(next(counts) for _ in prose) * profile.calibration
            c += sum(next(counts) for _ in structured) * profile.structured_calibration
            content += c
            raw.append(c + fixed)
        # Round the running total, so the segments add up to the rounded whole.
        tokens, total, done = [], 0.0, 0
        for r in raw:
            total += r
            tokens.append(round(total) - done)
            done = round(total)
        segments = []
        if prefix_tokens:
            segments.append(Segment("unrecorded-prefix", tokens.pop(0)))
        segments += [Segment(key, n, bp) for (key, _, _, _, bp), n in zip(self.units, tokens)]
        return PromptEstimate(
            input_tokens=done,
            segments=tuple(segments),
            rules={
                "tokenizer": profile.tokenizer,
                "calibration": profile.calibration,
                "structured_calibration": profile.structured_calibration,
                "tool_prompt_tokens": self.tool_prompt,
                "framing_tokens": round(self.framing),
                "image_tokens": self.images,
                "content_tokens": round(content),
                "unrecorded_prefix_tokens": prefix_tokens,
                **rules,
            },
        )


# ---- images -----------------------------------------------------------------------


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG, GIF, JPEG or WebP header; ``None`` if unknown."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return w, h
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return w, h
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        kind = data[12:16]
        if kind == b"VP8X":
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(
                data[27:30], "little"
            )
        if kind == b"VP8 " and len(data) >= 30:
            w, h = struct.unpack("<HH", data[26:30])
            return w & 0x3FFF, h & 0x3FFF
        if kind == b"VP8L" and len(data) >= 25:
            b = int.from_bytes(data[21:25], "little")
            return (b & 0x3FFF) + 1, ((b >> 14) & 0x3FFF) + 1
        return None
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 <= len(data):
            if data[i] != 0xFF:
                return None
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            length = int.from_bytes(data[i + 2 : i + 4], "big")
            # Start-of-frame markers (not DHT C4, JPG C8, DAC CC) hold the size.
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                return w, h
            i += 2 + length
    return None


def _decoded_size(b64: str) -> tuple[int, int] | None:
    try:
        head = base64.b64decode(b64[: 64 * 1024 // 3 * 4], validate=False)
    except (ValueError, TypeError):
        return None
    return image_size(head)


def _anthropic_image_tokens(size: tuple[int, int] | None) -> int:
    """Anthropic: width × height / 750 after scaling down to a 1568-pixel long edge and
    about 1.15 megapixels; an image of unknown size is counted at that cap (≈ 1,600)."""
    if size is None:
        return 1_600
    w, h = size
    scale = min(1.0, 1568 / max(w, h, 1), math.sqrt(1_150_000 / max(w * h, 1)))
    return max(1, math.ceil((w * scale) * (h * scale) / 750))


def _openai_image_tokens(size: tuple[int, int] | None, detail: str) -> int:
    """OpenAI (GPT-4o family): 85 at low detail; else fit in 2048 × 2048, scale the short
    side to 768, and add 170 per 512-pixel tile.  Unknown size: 2 × 2 tiles (765)."""
    if detail == "low":
        return 85
    if size is None:
        return 85 + 170 * 4
    w, h = (float(v) for v in size)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def _gemini_image_tokens(size: tuple[int, int] | None) -> int:
    """Gemini: 258 for an image with both sides ≤ 384 pixels, else 258 per 768-pixel tile."""
    if size is None:
        return 258
    w, h = size
    if w <= 384 and h <= 384:
        return 258
    return 258 * math.ceil(w / 768) * math.ceil(h / 768)


# ---- Anthropic --------------------------------------------------------------------


def _ttl(block: Mapping[str, Any]) -> str | None:
    cc = block.get("cache_control")
    if not isinstance(cc, Mapping):
        return None
    ttl = cc.get("ttl")
    return ttl if isinstance(ttl, str) and ttl else "5m"


def _result_parts(content: Any) -> tuple[list[str], list[Mapping[str, Any]]]:
    if isinstance(content, str):
        return [content], []
    texts, images = [], []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, Mapping):
            if part.get("type") == "image":
                images.append(part)
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
    return texts, images


def _anthropic_image(block: Mapping[str, Any]) -> int:
    src = block.get("source") if isinstance(block.get("source"), Mapping) else {}
    data = src.get("data") if isinstance(src, Mapping) else None
    return _anthropic_image_tokens(_decoded_size(data) if isinstance(data, str) else None)


def estimate_anthropic(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """Anthropic Messages: tools, then system, then messages (the cache's prefix order).

    Thinking is counted in the last assistant message only: Anthropic drops the thinking
    of earlier turns from the prompt.  A top-level ``cache_control`` (automatic caching)
    is a breakpoint on the last block.
    """
    u = _Units()
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
    choice = body.get("tool_choice")
    forced = isinstance(choice, Mapping) and choice.get("type") in ("any", "tool")
    prompt = profile.tool_prompt_tokens_forced if forced else profile.tool_prompt_tokens
    for i, t in enumerate(tools):
        u.add(
            t,
            structured=[_json_spaced(_strip(t))],
            tool_prompt=prompt if i == 0 else 0,
            breakpoint=_ttl(t),
        )
    system = body.get("system")
    if isinstance(system, str):
        u.add({"system": system}, prose=[system])
    elif isinstance(system, list):
        for b in system:
            if isinstance(b, Mapping):
                u.add(b, prose=[str(b.get("text") or "")], breakpoint=_ttl(b))
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    last_assistant = max(
        (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1
    )
    for mi, m in enumerate(messages):
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for b in blocks if isinstance(blocks, list) else []:
            if not isinstance(b, Mapping):
                continue
            kind = b.get("type")
            key = {"role": m.get("role"), "block": b}
            bp = _ttl(b)
            if kind == "text":
                u.add(key, prose=[str(b.get("text") or "")], breakpoint=bp)
            elif kind == "image":
                u.add(key, images=_anthropic_image(b), breakpoint=bp)
            elif kind == "tool_use":
                u.add(
                    key,
                    structured=[str(b.get("name") or "") + _json_spaced(b.get("input") or {})],
                    framing=ANTHROPIC_TOOL_BLOCK_TOKENS,
                    breakpoint=bp,
                )
            elif kind == "tool_result":
                texts, images = _result_parts(b.get("content", ""))
                u.add(
                    key,
                    structured=texts,
                    images=sum(_anthropic_image(p) for p in images),
                    framing=ANTHROPIC_TOOL_BLOCK_TOKENS,
                    breakpoint=bp,
                )
            elif kind == "thinking":
                text = str(b.get("thinking") or "") if mi == last_assistant else ""
                u.add(key, prose=[text], breakpoint=bp)
            elif kind == "redacted_thinking":
                u.add(key, breakpoint=bp)  # opaque; dropped like thinking of earlier turns
            else:  # documents, server tool blocks, …: their JSON as a stand-in
                u.add(key, structured=[_json(_strip(b))], breakpoint=bp)
    if isinstance(body.get("cache_control"), Mapping) and u.units:
        last = u.units[-1]
        u.units[-1] = (*last[:4], last[4] or _ttl(body) or "5m")
    return u.finish(profile, prefix_tokens, rules="anthropic-messages")


# ---- OpenAI -----------------------------------------------------------------------


def _ts_type(schema: Any) -> str:
    """A JSON schema as the TypeScript type OpenAI's models read it."""
    if not isinstance(schema, Mapping):
        return "any"
    if isinstance(schema.get("enum"), list):
        return " | ".join(_json(v) for v in schema["enum"]) or "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts_type({**schema, "type": k}) for k in kind) or "any"
    if kind == "string":
        return "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        return _ts_type(schema.get("items")) + "[]"
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            return "object"
        required = set(schema.get("required") or ())
        lines = ["{"]
        for name, sub in props.items():
            if isinstance(sub, Mapping) and sub.get("description"):
                lines.append(f"// {sub['description']}")
            lines.append(f"{name}{'' if name in required else '?'}: {_ts_type(sub)},")
        lines.append("}")
        return "\n".join(lines)
    return "any"


def openai_tool_namespace(tools: Sequence[Mapping[str, Any]]) -> str:
    """The ``namespace functions`` declaration OpenAI's models read the tools as.

    Takes Chat Completions (``{type, function: {...}}``) or Responses (``{type, name,
    ...}``) function tools; other tool types are skipped.
    """
    lines = ["namespace functions {", ""]
    for t in tools:
        fn = t.get("function") if isinstance(t.get("function"), Mapping) else t
        if not isinstance(fn, Mapping) or not fn.get("name"):
            continue
        if fn.get("description"):
            lines.append(f"// {fn['description']}")
        params = fn.get("parameters")
        if isinstance(params, Mapping) and params.get("properties"):
            lines.append(f"type {fn['name']} = (_: {_ts_type(params)}) => any;")
        else:
            lines.append(f"type {fn['name']} = () => any;")
        lines.append("")
    lines.append("} // namespace functions")
    return "\n".join(lines)


def _openai_tools(u: _Units, tools: list[Mapping[str, Any]], profile: ModelProfile) -> None:
    functions = [t for t in tools if t.get("type", "function") == "function"]
    others = [t for t in tools if t not in functions]  # built-in tools: their JSON
    if functions or others:
        u.add(
            {"tools": tools},
            structured=[openai_tool_namespace(functions), *(_json(t) for t in others)],
            tool_prompt=profile.tool_prompt_tokens,
        )


def _openai_parts(content: Any) -> tuple[list[str], int]:
    """Texts and image tokens of a message's content (string or parts, either API)."""
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
        elif p.get("type") in ("image_url", "input_image"):
            ref = p.get("image_url")
            url = ref.get("url") if isinstance(ref, Mapping) else ref
            detail = (ref.get("detail") if isinstance(ref, Mapping) else None) or p.get("detail")
            size = None
            if isinstance(url, str) and url.startswith("data:") and "," in url:
                size = _decoded_size(url.split(",", 1)[1])
            images += _openai_image_tokens(size, str(detail or "auto"))
    return texts, images


def estimate_openai_chat(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """OpenAI Chat Completions: the tools, each message with its framing, the reply primer."""
    u = _Units()
    _openai_tools(u, [t for t in body.get("tools") or [] if isinstance(t, Mapping)], profile)
    for m in body.get("messages") or []:
        if not isinstance(m, Mapping):
            continue
        texts, images = _openai_parts(m.get("content"))
        framing = OPENAI_MESSAGE_TOKENS + (1 if m.get("name") else 0)
        structured: list[str] = []
        if m.get("role") == "tool":
            structured, texts = texts, []
        for call in m.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(fn, Mapping):
                structured.append(str(fn.get("name") or "") + str(fn.get("arguments") or ""))
                framing += OPENAI_TOOL_CALL_TOKENS
        u.add(
            m,
            prose=[str(m.get("role") or ""), *texts, str(m.get("name") or "")],
            structured=structured,
            framing=framing,
            images=images,
        )
    u.add({"reply": True}, framing=OPENAI_REPLY_TOKENS)
    return u.finish(profile, prefix_tokens, rules="openai-chat")


def estimate_openai_responses(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """OpenAI Responses: tools, instructions, then the input items as chat messages."""
    u = _Units()
    _openai_tools(u, [t for t in body.get("tools") or [] if isinstance(t, Mapping)], profile)
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        u.add(
            {"instructions": body["instructions"]},
            prose=["developer", body["instructions"]],
            framing=OPENAI_MESSAGE_TOKENS,
        )
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    previous = None
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, Mapping):
            continue
        kind = it.get("type", "message")
        if kind == "function_call":
            # Consecutive calls share one assistant message header.
            framing = OPENAI_TOOL_CALL_TOKENS + (
                OPENAI_MESSAGE_TOKENS + 1 if previous != "function_call" else 0
            )
            u.add(
                it,
                structured=[str(it.get("name") or "") + str(it.get("arguments") or "")],
                framing=framing,
            )
        elif kind == "function_call_output":
            texts, images = _openai_parts(it.get("output"))
            u.add(it, structured=texts, framing=OPENAI_MESSAGE_TOKENS + 1, images=images)
        else:
            texts, images = _openai_parts(it.get("content"))
            u.add(
                it,
                prose=[str(it.get("role") or ""), *texts],
                framing=OPENAI_MESSAGE_TOKENS,
                images=images,
            )
        previous = kind
    u.add({"reply": True}, framing=OPENAI_REPLY_TOKENS)
    return u.finish(profile, prefix_tokens, rules="openai-responses")


# ---- Gemini -----------------------------------------------------------------------


def _get(d: Mapping[str, Any], camel: str) -> Any:
    if camel in d:
        return d[camel]
    return d.get("".join(f"_{c.lower()}" if c.isupper() else c for c in camel))


def _signature_tokens(part: Mapping[str, Any]) -> float:
    sig = _get(part, "thoughtSignature")
    if not isinstance(sig, str) or not sig:
        return 0.0
    return max(0.0, GEMINI_SIGNATURE_SLOPE * len(sig) - GEMINI_SIGNATURE_OFFSET)


def estimate_gemini(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """Gemini generateContent: tools, system instruction, then each content's parts."""
    u = _Units()
    decls: list[Any] = []
    for t in body.get("tools") or []:
        if isinstance(t, Mapping):
            fd = _get(t, "functionDeclarations")
            decls.extend(fd if isinstance(fd, list) else [t])
    if decls:
        u.add(
            {"tools": decls},
            structured=[_json(d) for d in decls],
            tool_prompt=profile.tool_prompt_tokens,
        )
    system = _get(body, "systemInstruction")
    if isinstance(system, Mapping):
        texts = [
            p["text"]
            for p in system.get("parts") or []
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
        u.add({"system": system}, prose=texts)
    for c in body.get("contents") or []:
        if not isinstance(c, Mapping):
            continue
        for p in c.get("parts") or []:
            if not isinstance(p, Mapping):
                continue
            key = {"role": c.get("role"), "part": p}
            sig = _signature_tokens(p)
            fc, fr = _get(p, "functionCall"), _get(p, "functionResponse")
            inline = _get(p, "inlineData")
            if isinstance(fc, Mapping):
                text = str(fc.get("name") or "") + _json(fc.get("args") or {})
                u.add(key, structured=[text], framing=GEMINI_FUNCTION_PART_TOKENS + sig)
            elif isinstance(fr, Mapping):
                text = str(fr.get("name") or "") + _json(fr.get("response") or {})
                u.add(key, structured=[text], framing=GEMINI_FUNCTION_PART_TOKENS + sig)
            elif isinstance(inline, Mapping):
                data = inline.get("data")
                size = _decoded_size(data) if isinstance(data, str) else None
                u.add(key, images=_gemini_image_tokens(size), framing=sig)
            else:
                u.add(key, prose=[str(p.get("text") or "")], framing=sig)
    return u.finish(profile, prefix_tokens, rules="gemini")


def estimate_generic(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """A body of an unknown wire format: its whole JSON, counted as structured text."""
    u = _Units()
    u.add(body, structured=[_json(body)])
    return u.finish(profile, prefix_tokens, rules="generic-json")
