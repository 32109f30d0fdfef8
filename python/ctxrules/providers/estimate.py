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
* images by each vendor's published rule (``ctxrules.providers.images``);
* Gemini thought signatures, billed as the thinking they carry, from their length.

A provider without rules (a plugin that does not override ``estimate_prompt``) gets
``estimate_generic``: the body's whole JSON counted as structured text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..errors import ValidationError
from ..tokenizers import get_tokenizer
from .models import ModelProfile

__all__ = [
    "PromptEstimate",
    "Segment",
    "SegmentBuilder",
    "cache_key",
    "compact_json",
    "estimate_generic",
    "spaced_json",
    "strip_cache_control",
]


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


def strip_cache_control(obj: Any) -> Any:
    """``obj`` without any ``cache_control`` key, at any depth."""
    if isinstance(obj, Mapping):
        return {k: strip_cache_control(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [strip_cache_control(v) for v in obj]
    return obj


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


def estimate_generic(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """A body of an unknown wire format: its whole JSON, counted as structured text."""
    u = SegmentBuilder()
    u.add(body, structured=[compact_json(body)])
    return u.finish(profile, prefix_tokens, wire="generic-json")
