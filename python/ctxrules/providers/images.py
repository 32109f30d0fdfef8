"""Image sizes from file headers, and what each vendor bills for an image.

The rules are the vendors' published ones; an image whose size cannot be read (a URL,
an unknown format) is counted at a stated default.
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Any

__all__ = [
    "ANTHROPIC_IMAGE_RULE",
    "GEMINI_IMAGE_RULE",
    "OPENAI_IMAGE_RULE",
    "anthropic_image_tokens",
    "decoded_image_size",
    "gemini_image_tokens",
    "image_size",
    "openai_image_tokens",
]


#: Each vendor's image rule as its numbers: what the functions below apply and what an
#: estimate frame hands the core (``ctxrules.providers.estimate.estimate_frame``).
ANTHROPIC_IMAGE_RULE: dict[str, Any] = {
    "kind": "anthropic",
    "max_edge": 1568,
    "max_pixels": 1_150_000,
    "pixels_per_token": 750,
    "unknown": 1_600,
}
OPENAI_IMAGE_RULE: dict[str, Any] = {
    "kind": "openai",
    "base": 85,
    "tile_tokens": 170,
    "tile": 512,
    "fit": 2048,
    "short_side": 768,
    "unknown_tiles": 4,
}
GEMINI_IMAGE_RULE: dict[str, Any] = {"kind": "gemini", "small": 384, "tokens": 258, "tile": 768}


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


def decoded_image_size(b64: str) -> tuple[int, int] | None:
    """The size of a base64-encoded image, from the first 48 KB decoded."""
    try:
        head = base64.b64decode(b64[: 64 * 1024 // 3 * 4], validate=False)
    except (ValueError, TypeError):
        return None
    return image_size(head)


def anthropic_image_tokens(size: tuple[int, int] | None) -> int:
    """Anthropic: width × height / 750 after scaling down to a 1568-pixel long edge and
    about 1.15 megapixels; an image of unknown size is counted at that cap (≈ 1,600)."""
    r = ANTHROPIC_IMAGE_RULE
    if size is None:
        return int(r["unknown"])
    w, h = size
    scale = min(1.0, r["max_edge"] / max(w, h, 1), math.sqrt(r["max_pixels"] / max(w * h, 1)))
    return max(1, math.ceil((w * scale) * (h * scale) / r["pixels_per_token"]))


def openai_image_tokens(size: tuple[int, int] | None, detail: str) -> int:
    """OpenAI (GPT-4o family): 85 at low detail; else fit in 2048 × 2048, scale the short
    side to 768, and add 170 per 512-pixel tile.  Unknown size: 2 × 2 tiles (765)."""
    r = OPENAI_IMAGE_RULE
    if detail == "low":
        return int(r["base"])
    if size is None:
        return int(r["base"] + r["tile_tokens"] * r["unknown_tiles"])
    w, h = (float(v) for v in size)
    if max(w, h) > r["fit"]:
        w, h = w * r["fit"] / max(w, h), h * r["fit"] / max(w, h)
    if min(w, h) > r["short_side"]:
        w, h = w * r["short_side"] / min(w, h), h * r["short_side"] / min(w, h)
    return int(r["base"] + r["tile_tokens"] * math.ceil(w / r["tile"]) * math.ceil(h / r["tile"]))


def gemini_image_tokens(size: tuple[int, int] | None) -> int:
    """Gemini: 258 for an image with both sides ≤ 384 pixels, else 258 per 768-pixel tile."""
    r = GEMINI_IMAGE_RULE
    if size is None:
        return int(r["tokens"])
    w, h = size
    if w <= r["small"] and h <= r["small"]:
        return int(r["tokens"])
    return int(r["tokens"] * math.ceil(w / r["tile"]) * math.ceil(h / r["tile"]))
