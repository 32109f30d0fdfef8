"""Image sizes from file headers, and what each model bills for an image.

An image rule is data (a model profile's ``image`` estimator rule, see
``ctxrules.providers._model_table``): a ``kind`` and its numbers, the vendor's
published rule for that model.  ``image_tokens(rule, size, detail)`` applies it.  An
image whose size cannot be read (a URL, a file id, an unknown format) has no exact
count: ``image_tokens`` returns the low end of the rule's range (a small image; the
fit set's images by URL are icons and logos) and says the size was unknown, and
``image_range`` gives the range, so an estimate states it instead of counting a
silent constant.
"""

from __future__ import annotations

import base64
import math
import re
import struct
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANTHROPIC_IMAGE_RULE",
    "GEMINI_IMAGE_RULE",
    "OPENAI_IMAGE_RULE",
    "anthropic_image_tokens",
    "core_image_rule",
    "decoded_image_size",
    "gemini_image_tokens",
    "image_range",
    "image_size",
    "image_tokens",
    "openai_image_tokens",
    "pdf_pages",
]

#: The wires' default image rules (each wire's least specific model entry states its
#: own; a model's entry replaces the whole rule).  Anthropic (vision page): width x
#: height / 750 after scaling into a 1,568-pixel long edge and about 1.15 megapixels.
ANTHROPIC_IMAGE_RULE: dict[str, Any] = {
    "kind": "anthropic",
    "max_edge": 1568,
    "max_pixels": 1_150_000,
    "pixels_per_token": 750,
}
#: OpenAI tile models (images-vision guide): ``base`` + ``tile_tokens`` per 512-pixel
#: tile after fitting into 2048 x 2048 and scaling the short side to 768; low detail:
#: the base alone.
OPENAI_IMAGE_RULE: dict[str, Any] = {
    "kind": "openai",
    "base": 85,
    "tile_tokens": 170,
    "tile": 512,
    "fit": 2048,
    "short_side": 768,
}
#: Gemini 2.x (tokens page): 258 for an image with both sides <= 384 pixels, else 258
#: per 768-pixel tile.
GEMINI_IMAGE_RULE: dict[str, Any] = {
    "kind": "gemini",
    "small": 384,
    "tokens": 258,
    "tile": 768,
}


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


_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def pdf_pages(data: bytes) -> int:
    """Pages of a PDF: its ``/Type /Page`` objects (0 when none is readable, e.g. in
    compressed object streams)."""
    return len(_PDF_PAGE.findall(data))


def decoded_image_size(b64: str) -> tuple[int, int] | None:
    """The size of a base64-encoded image, from the first 48 KB decoded."""
    try:
        head = base64.b64decode(b64[: 64 * 1024 // 3 * 4], validate=False)
    except (ValueError, TypeError):
        return None
    return image_size(head)


def _n(rule: Mapping[str, Any], key: str) -> float:
    return float(rule[key])


def _exact(rule: Mapping[str, Any], size: tuple[int, int], detail: str) -> int:
    kind = rule.get("kind")
    w, h = (float(v) for v in size)
    if kind == "anthropic":
        scale = min(
            1.0,
            _n(rule, "max_edge") / max(w, h, 1.0),
            math.sqrt(_n(rule, "max_pixels") / max(w * h, 1.0)),
        )
        return max(1, math.ceil((w * scale) * (h * scale) / _n(rule, "pixels_per_token")))
    if kind == "openai":
        if detail == "low":
            return int(_n(rule, "base"))
        fit, short = _n(rule, "fit"), _n(rule, "short_side")
        if max(w, h) > fit:
            w, h = w * fit / max(w, h), h * fit / max(w, h)
        if min(w, h) > short:
            w, h = w * short / min(w, h), h * short / min(w, h)
        tile = _n(rule, "tile")
        tiles = math.ceil(w / tile) * math.ceil(h / tile)
        return int(_n(rule, "base") + _n(rule, "tile_tokens") * tiles)
    if kind == "openai-patches":
        # 32-pixel patches; above the budget the image is scaled down to fit it, then
        # to whole patches on its tighter side (the images-vision guide's steps).
        patch, budget = _n(rule, "patch"), _n(rule, "max_patches")
        if math.ceil(w / patch) * math.ceil(h / patch) > budget:
            r = math.sqrt(patch * patch * budget / (w * h))
            r *= min(
                math.floor(w * r / patch) / (w * r / patch),
                math.floor(h * r / patch) / (h * r / patch),
            )
            w, h = w * r, h * r
        patches = min(budget, math.ceil(w / patch) * math.ceil(h / patch))
        return math.ceil(patches * _n(rule, "multiplier"))
    if kind == "gemini":
        small, tile = _n(rule, "small"), _n(rule, "tile")
        if w <= small and h <= small:
            return int(_n(rule, "tokens"))
        return int(_n(rule, "tokens") * math.ceil(w / tile) * math.ceil(h / tile))
    if kind == "fixed":
        return int(_n(rule, "tokens"))
    raise ValueError(f"unknown image rule kind {kind!r}")


def image_range(rule: Mapping[str, Any], detail: str = "auto") -> tuple[int, int]:
    """The fewest and most tokens an image of any size can bill under ``rule``."""
    kind = rule.get("kind")
    if kind == "anthropic":
        cap = _n(rule, "max_pixels")
        edge = _n(rule, "max_edge")
        # From a 200-pixel square (the vision page's smallest example, 54 tokens) to
        # the largest billed area: the pixel budget, or a square of the edge if smaller.
        return _exact(rule, (200, 200), "auto"), math.ceil(
            min(cap, edge * edge) / _n(rule, "pixels_per_token")
        )
    if kind == "openai":
        low = int(_n(rule, "base"))
        if detail == "low":
            return low, low
        return low + int(_n(rule, "tile_tokens")), _exact(rule, (2048, 768), "high")
    if kind == "openai-patches":
        return math.ceil(_n(rule, "multiplier")), math.ceil(
            _n(rule, "max_patches") * _n(rule, "multiplier")
        )
    if kind == "gemini":
        # An unknown size is taken to be at most 4 tiles (a 1536-pixel square).
        return int(_n(rule, "tokens")), int(_n(rule, "tokens")) * 4
    if kind == "fixed":
        return int(_n(rule, "tokens")), int(_n(rule, "tokens"))
    raise ValueError(f"unknown image rule kind {kind!r}")


def image_tokens(
    rule: Mapping[str, Any], size: tuple[int, int] | None, detail: str = "auto"
) -> tuple[int, bool]:
    """Tokens of one image under ``rule`` and whether its size was unknown (then the
    low end of ``image_range``)."""
    if size is None:
        low = image_range(rule, detail)[0]
        if rule.get("kind") == "openai" and detail == "low":
            return low, False
        if rule.get("kind") == "fixed":
            return low, False
        return low, True
    return _exact(rule, size, detail), False


def anthropic_image_tokens(size: tuple[int, int] | None) -> int:
    """Anthropic's default rule (``ANTHROPIC_IMAGE_RULE``) for an image of ``size``."""
    return image_tokens(ANTHROPIC_IMAGE_RULE, size)[0]


def openai_image_tokens(size: tuple[int, int] | None, detail: str) -> int:
    """OpenAI's tile rule (``OPENAI_IMAGE_RULE``: GPT-4o, GPT-4.1) for an image of ``size``."""
    return image_tokens(OPENAI_IMAGE_RULE, size, detail)[0]


def gemini_image_tokens(size: tuple[int, int] | None) -> int:
    """Gemini 2.x's rule (``GEMINI_IMAGE_RULE``) for an image of ``size``."""
    return image_tokens(GEMINI_IMAGE_RULE, size)[0]


def core_image_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    """``rule`` as an estimate frame hands it to the core: its numbers, and what an
    image of unknown size counts (``unknown``: the low end of ``image_range``; for a
    tile rule as ``unknown_tiles``) and can reach (``unknown_high``)."""
    low, high = image_range(rule)
    out: dict[str, Any] = {**rule, "unknown": low, "unknown_high": high}
    if rule.get("kind") == "openai":
        out["unknown_tiles"] = (low - int(rule["base"])) // int(rule["tile_tokens"])
    return out
