"""The billed prompt size of a request body, counted the way each vendor bills it.

``Provider.estimate_prompt(body, profile)`` walks a request body in the vendor's
prefix order and splits it into *segments* — the units a prompt cache can share (a
tool definition, a system block, a content block, a message) — each with its identity
(a hash of its bytes without cache markers) and its billed tokens.  The sum is
``input_tokens``: what the vendor's ``usage`` reports as input + cache writes + cache
reads for that body.  ``SegmentBuilder`` does the bookkeeping: one batch count of every
text of the body (one crossing into Rust), prose times ``ModelProfile.calibration``,
structured payloads (tool definitions, inputs, results) times
``structured_calibration``, plus fixed tokens.

Each built-in provider applies its vendor's rules (in its own module; the constants'
data and fit are in benches/README.md, "Fidelity"):

* the tool prompt the vendor adds when tools are declared
  (``ModelProfile.tool_prompt_tokens``, ``tool_prompt_tokens_forced``);
* framing: OpenAI's per-message tokens (3 + the role, 1 more for a ``name``, 3 that
  prime the reply; tools read as a ``namespace functions`` declaration), a fitted cost
  per tool call, Anthropic's per tool_use / tool_result block, Gemini's per function
  part;
* images by the model's image rule (``ctxrules.providers.images``); an image whose
  size cannot be known is flagged (``unknown_image_sizes``) and the estimate states
  the range it implies (``input_tokens_range``);
* a structured-output schema (``response_format``, ``text.format``,
  ``output_config.format``, ``responseSchema``) as the model reads it;
* Gemini 3 thought signatures, billed as the thinking they carry, from their length.

Every per-model number is a rule of the model's profile (``ModelProfile.rule``; the
table with each constant's source is ``ctxrules.providers._model_table``).

A provider without rules (a plugin that does not override ``estimate_prompt``) gets
``estimate_generic``: the body's whole JSON counted as structured text.

**This module and the providers' ``estimate_*`` functions are the specification.**  In
production the built-in wires are estimated by the core, where the body is made
(``crate::estimate``): the renderer returns a ``RequestEstimate`` with the body, in the
same crossing, summed from token counts it keeps per item.  What the rules are made of
crosses once per model profile and render options as an ``EstimateFrame``
(``estimate_frame``; each provider's ``Provider.estimate_frame`` fills it from the same
constants and helpers as its ``estimate_*``).  The two are held equal by tests on every
request of the corpus and on random commits; the specification still estimates bodies
the core did not make (plugin providers, a tokenizer the core does not have).
``estimate_counts`` says how many estimates each made.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .. import _core
from ..errors import ValidationError
from ..tokenizers import get_tokenizer
from .images import image_range, image_tokens
from .models import ModelProfile

__all__ = [
    "Estimate",
    "EstimateFrame",
    "PromptEstimate",
    "RequestEstimate",
    "Segment",
    "SegmentBuilder",
    "cache_key",
    "compact_json",
    "estimate_counts",
    "estimate_frame",
    "estimate_generic",
    "format_unit",
    "prompt_estimate",
    "spaced_json",
    "strip_cache_control",
    "tool_unit",
    "wire_tools",
    "without_key",
]

#: A request's estimate as the core makes it with the body (``_core.Estimate``): its
#: ``input_tokens`` and ``prefix_tokens``, and what the cache rules read —
#: ``breakpoints()``, ``cumulative(i)``, ``shared_prefix(previous)`` — without its
#: segments crossing; ``segments()`` and ``rules()`` to show it (``prompt_estimate``).
RequestEstimate = _core.Estimate
#: The rules a core estimate is made under, handed over once per profile and options.
EstimateFrame = _core.EstimateFrame


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

    # What the cache rules read (``ctxrules.providers.cache``), as ``RequestEstimate``
    # has it too.

    @property
    def prefix_tokens(self) -> int:
        """Tokens of the unrecorded harness prefix that lead the segments (0: none)."""
        first = self.segments[0] if self.segments else None
        return first.tokens if first is not None and first.key == _PREFIX_KEY else 0

    def breakpoints(self) -> list[tuple[int, int, str]]:
        """``(segment, tokens up to and with it, TTL)`` of each cache breakpoint."""
        out, total = [], 0
        for i, s in enumerate(self.segments):
            total += s.tokens
            if s.breakpoint:
                out.append((i, total, s.breakpoint))
        return out

    def cumulative(self, i: int) -> int:
        """Tokens of the segments up to and with segment ``i``."""
        return sum(s.tokens for s in self.segments[: i + 1])

    def shared_prefix(self, previous: object) -> tuple[int, int]:
        """``(segments, tokens)`` at the start of this estimate identical to
        ``previous``'s (the tokens are this estimate's).  Only estimates made the same
        way compare: a ``RequestEstimate``'s identities are the core's, so it shares
        nothing with a ``PromptEstimate``."""
        if not isinstance(previous, PromptEstimate):
            return 0, 0
        n = 0
        for a, b in zip(previous.segments, self.segments):
            if a.key != b.key:
                break
            n += 1
        return n, sum(s.tokens for s in self.segments[:n])


#: A request's estimate, made by the core with the body or by the specification.
Estimate = PromptEstimate | RequestEstimate

#: The key of the segment an unrecorded harness prefix is.
_PREFIX_KEY = "unrecorded-prefix"

#: Estimates the specification made (``SegmentBuilder.finish``), for ``estimate_counts``.
_spec_estimates = 0


def estimate_counts() -> dict[str, int]:
    """How many request estimates were made since the process started — by the core,
    with a body (``core``), and by the specification (``spec``) — how many item values
    the core worked out (``item_values``: each item's token counts, once per item
    however many requests hold it) and how many segment identities it worked out
    (``segments``: a content block's bytes written and hashed; a block a session's
    request shares with the previous request of its ``SessionRenderer`` keeps its
    segment).  What the tests of "nothing estimated twice" read."""
    core, values, segments = _core.estimate_stats()
    return {"core": core, "spec": _spec_estimates, "item_values": values, "segments": segments}


def prompt_estimate(estimate: Estimate) -> PromptEstimate:
    """``estimate`` as a ``PromptEstimate`` (a core estimate's segments and rules read
    out of the core)."""
    if isinstance(estimate, PromptEstimate):
        return estimate
    return PromptEstimate(
        input_tokens=estimate.input_tokens,
        segments=tuple(Segment(k, n, bp) for k, n, bp in estimate.segments()),
        rules=dict(estimate.rules()),
    )


# A ``"cache_control": {…}`` member in compact JSON, with the comma that joins it to its
# neighbour.  Inside a JSON string every quote is escaped, so the pattern can only match a
# real member; a marker's value is a flat object (``type``, ``ttl``).
_MARKER = re.compile(rb',"cache_control":\{[^{}]*\}|"cache_control":\{[^{}]*\},?')


def cache_key(obj: Any) -> str:
    """Identity of a unit: a hash of its JSON with every ``cache_control`` removed (a
    marker moves between requests; the cached bytes are what it marks).

    The markers are cut from the encoded bytes rather than from a stripped copy of the
    object: a request has a unit per content block, and copying each one in Python
    cost more than the rest of the estimate."""
    return hashlib.blake2b(_MARKER.sub(b"", msgspec.json.encode(obj)), digest_size=16).hexdigest()


def without_key(obj: Any, key: str) -> Any:
    """``obj`` without any ``key`` in its mappings, at any depth."""
    if isinstance(obj, Mapping):
        return {k: without_key(v, key) for k, v in obj.items() if k != key}
    if isinstance(obj, list):
        return [without_key(v, key) for v in obj]
    return obj


def strip_cache_control(obj: Any) -> Any:
    """``obj`` without any ``cache_control`` key, at any depth."""
    return without_key(obj, "cache_control")


def compact_json(obj: Any) -> str:
    """JSON without spaces (as request bodies carry it)."""
    return msgspec.json.encode(obj).decode()


def spaced_json(obj: Any) -> str:
    """JSON with ``", "`` and ``": "``, non-ASCII kept."""
    return json.dumps(obj, ensure_ascii=False)


class SegmentBuilder:
    """Segments under construction, in prefix order; ``finish`` counts them in one batch.

    ``add`` one unit per cacheable block: the object that identifies it (hashed without
    its cache markers), its texts to count as prose or as structured payload, and
    fixed tokens (framing, images, a tool prompt), each kept apart for the rules the
    estimate reports.  A provider plugin's ``estimate_prompt`` can build on it.
    """

    def __init__(self) -> None:
        self.units: list[tuple[str, list[str], list[str], float, str | None]] = []
        self.tool_prompt = 0
        self.framing = 0.0
        self.images = 0
        self.unknown_images = 0
        self.unknown_parts: dict[str, int] = {}
        self.image_low = 0
        self.image_high = 0

    def add_framing(self, index: int, framing: float) -> None:
        """Add framing tokens to the unit at ``index`` (a message's turn marker on its
        first block)."""
        key, prose, structured, fixed, bp = self.units[index]
        self.units[index] = (key, prose, structured, fixed + framing, bp)
        self.framing += framing

    def image(
        self, rule: Mapping[str, Any], size: tuple[int, int] | None, detail: str = "auto"
    ) -> int:
        """Tokens of one image under the model's image ``rule`` (pass them to ``add``);
        an image of unknown size is counted at the middle of its range, flagged, and
        widens the range the estimate states."""
        tokens, unknown = image_tokens(rule, size, detail)
        if unknown:
            low, high = image_range(rule, detail)
            self.unknown_images += 1
            self.image_low += low - tokens
            self.image_high += high - tokens
        return tokens

    def unknown(self, what: str, tokens: int, low: int, high: int) -> int:
        """Content whose size the body does not hold (a document by reference, a file
        id): counted at ``tokens``, flagged under ``what`` and widening the range the
        estimate states to ``low`` … ``high`` for it."""
        self.unknown_parts[what] = self.unknown_parts.get(what, 0) + 1
        self.image_low += low - tokens
        self.image_high += high - tokens
        return tokens

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
        """Add one unit; ``breakpoint`` is the TTL of a cache marker it carries."""
        self.framing += framing
        self.images += images
        self.tool_prompt += tool_prompt
        fixed = framing + images + tool_prompt
        self.units.append(
            (
                cache_key(key_obj),
                [t for t in prose if t],
                [t for t in structured if t],
                fixed,
                breakpoint,
            )
        )

    def finish(self, profile: ModelProfile, prefix_tokens: int, **rules: Any) -> PromptEstimate:
        """Count every text in one batch and return the estimate; ``prefix_tokens`` lead
        the segments, ``rules`` are added to what the estimate states."""

        global _spec_estimates
        _spec_estimates += 1
        if prefix_tokens < 0:
            raise ValidationError(
                f"prefix_tokens must be >= 0, got {prefix_tokens}",
                hint="the unrecorded prefix is what a harness sends before the body",
            )
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
            segments.append(Segment(_PREFIX_KEY, tokens.pop(0)))
        segments += [Segment(key, n, bp) for (key, _, _, _, bp), n in zip(self.units, tokens)]
        if self.unknown_images or self.unknown_parts:
            rules = {
                **rules,
                "unknown_image_sizes": self.unknown_images,
                "unknown_content": dict(self.unknown_parts),
                "input_tokens_range": [done + self.image_low, done + self.image_high],
            }
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


def estimate_generic(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """A body of an unknown wire format: its whole JSON, counted as structured text."""
    u = SegmentBuilder()
    u.add(body, structured=[compact_json(body)])
    return u.finish(profile, prefix_tokens, wire="generic-json")


def wire_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """Tool declarations (``ToolSpec``) as the core receives them with the render
    options: their JSON decoded (a field left at its default is absent, as there)."""
    out: list[dict[str, Any]] = msgspec.json.decode(msgspec.json.encode(list(tools)))
    return out


def tool_unit(
    key_obj: Any,
    *,
    prose: Sequence[str] = (),
    structured: Sequence[str] = (),
    tool_prompt: int = 0,
    framing: float = 0.0,
    tail: bool = False,
) -> dict[str, Any]:
    """One segment the render options make, before the conversation (see
    ``estimate_frame``): identified as the specification identifies it (``cache_key`` of
    ``key_obj``), with its texts, the tool prompt and framing tokens it carries.  A
    ``tail`` unit (a structured-output format) follows the tools and never carries
    their cache breakpoint."""
    return {
        "key": cache_key(key_obj),
        "prose": [t for t in prose if t],
        "structured": [t for t in structured if t],
        "tool_prompt": tool_prompt,
        "framing": framing,
        "tail": tail,
    }


def format_unit(segment: Mapping[str, Any]) -> dict[str, Any]:
    """The ``tail`` unit of a structured-output format, from the segment the
    specification adds for it (``key_obj``, ``structured`` texts, ``framing``)."""
    return tool_unit(
        segment["key_obj"],
        structured=segment["structured"],
        framing=segment["framing"],
        tail=True,
    )


def estimate_frame(
    profile: ModelProfile,
    *,
    wire: str,
    tools: Sequence[Mapping[str, Any]] = (),
    framing: Mapping[str, float] | None = None,
    images: Mapping[str, Any] | None = None,
    auto_breakpoint: str | None = None,
) -> EstimateFrame | None:
    """The rules a core estimate of one wire is made under, for ``profile``: its
    tokenizer and calibrations, the tool segments the render options make
    (``tool_unit``: the declarations as the model reads them, the tool prompt),
    the wire's ``framing`` numbers, its image rule (``images``: a ``kind`` and its
    numbers, see ``ctxrules.providers.images``), and Anthropic's breakpoint of a
    top-level ``cache_control`` (``auto_breakpoint``).  ``None`` when the profile's
    tokenizer is not one the core counts with (the specification estimates then)."""
    if profile.tokenizer not in _core.ENCODINGS:
        return None
    data = {
        "wire": wire,
        "encoding": profile.tokenizer,
        "calibration": profile.calibration,
        "structured_calibration": profile.structured_calibration,
        "tools": list(tools),
        "auto_breakpoint": auto_breakpoint,
        "framing": dict(framing or {}),
        "images": dict(images or {"kind": "none"}),
    }
    return _core.EstimateFrame(msgspec.json.encode(data))
