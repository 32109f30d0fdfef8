//! Image sizes from base64 data, and what each vendor bills for an image.
//!
//! The same reading as the specification (`ctxrules.providers.images`): the first
//! 87,380 characters of the base64 text decoded the way Python's
//! `base64.b64decode(…, validate=False)` decodes them (characters outside the alphabet
//! skipped, a pad sequence ends the data, a length that does not close a quad is no
//! data at all), then the width and height read from a PNG, GIF, WebP or JPEG header.
//! The vendors' rules take their numbers from the estimate's frame (`ImageRule`).

use serde::Deserialize;

/// Characters of base64 text decoded for a size (64 KiB of data).
const HEAD_CHARS: usize = 64 * 1024 / 3 * 4;

/// Width and height of the image whose base64 text is `b64`; `None` when unknown.
pub fn decoded_size(b64: &str) -> Option<(u64, u64)> {
    // Python slices code points and refuses non-ASCII text.
    let head = match b64.char_indices().nth(HEAD_CHARS) {
        Some((at, _)) => &b64[..at],
        None => b64,
    };
    if !head.is_ascii() {
        return None;
    }
    size(&a2b_base64(head.as_bytes())?)
}

/// The text a base64 `text/*` file decodes to (Python's
/// `base64.b64decode(…).decode("utf-8", "replace")`; empty when it does not decode).
pub fn decoded_text(b64: &str) -> String {
    a2b_base64(b64.as_bytes())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Pages of a base64 PDF, as the specification's `pdf_pages` counts them: matches of
/// `/Type\s*/Page(?![a-zA-Z])` in the decoded bytes (0 when it does not decode).
pub fn pdf_pages(b64: &str) -> u64 {
    let Some(data) = a2b_base64(b64.as_bytes()) else {
        return 0;
    };
    let mut pages = 0;
    let mut i = 0;
    while let Some(at) = find(&data[i..], b"/Type") {
        let mut j = i + at + 5;
        // Python's `\s` in a bytes pattern: space, \t, \n, \r, \x0b, \x0c.
        while j < data.len() && matches!(data[j], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            j += 1;
        }
        if data[j..].starts_with(b"/Page")
            && !data.get(j + 5).is_some_and(|c| c.is_ascii_alphabetic())
        {
            pages += 1;
        }
        i += at + 5;
    }
    pages
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// CPython's `binascii.a2b_base64(data, strict_mode=False)`.
fn a2b_base64(data: &[u8]) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 3);
    let (mut quad, mut left, mut pads) = (0u8, 0u8, 0u8);
    for &c in data {
        if c == b'=' {
            if quad >= 2 {
                pads += 1;
                if quad + pads >= 4 {
                    return Some(out); // a pad sequence ends the data
                }
            }
            continue;
        }
        let Some(v) = value(c) else {
            continue;
        };
        pads = 0;
        match quad {
            0 => {
                quad = 1;
                left = v;
            }
            1 => {
                quad = 2;
                out.push((left << 2) | (v >> 4));
                left = v & 0x0f;
            }
            2 => {
                quad = 3;
                out.push((left << 4) | (v >> 2));
                left = v & 0x03;
            }
            _ => {
                quad = 0;
                out.push((left << 6) | v);
                left = 0;
            }
        }
    }
    // An unfinished quad: "Incorrect padding" (or one character too many).
    (quad == 0).then_some(out)
}

fn be16(d: &[u8], at: usize) -> u64 {
    u64::from(u16::from_be_bytes([d[at], d[at + 1]]))
}

fn le16(d: &[u8], at: usize) -> u64 {
    u64::from(u16::from_le_bytes([d[at], d[at + 1]]))
}

fn le24(d: &[u8], at: usize) -> u64 {
    u64::from(d[at]) | u64::from(d[at + 1]) << 8 | u64::from(d[at + 2]) << 16
}

/// Width and height from a PNG, GIF, JPEG or WebP header (`images.image_size`).
pub fn size(d: &[u8]) -> Option<(u64, u64)> {
    if d.starts_with(b"\x89PNG\r\n\x1a\n") && d.len() >= 24 {
        let w = u32::from_be_bytes([d[16], d[17], d[18], d[19]]);
        let h = u32::from_be_bytes([d[20], d[21], d[22], d[23]]);
        return Some((u64::from(w), u64::from(h)));
    }
    if (d.starts_with(b"GIF87a") || d.starts_with(b"GIF89a")) && d.len() >= 10 {
        return Some((le16(d, 6), le16(d, 8)));
    }
    if d.starts_with(b"RIFF") && d.get(8..12) == Some(b"WEBP") && d.len() >= 30 {
        return match &d[12..16] {
            b"VP8X" => Some((1 + le24(d, 24), 1 + le24(d, 27))),
            b"VP8 " => Some((le16(d, 26) & 0x3FFF, le16(d, 28) & 0x3FFF)),
            b"VP8L" => {
                let b = u32::from_le_bytes([d[21], d[22], d[23], d[24]]);
                Some((u64::from(b & 0x3FFF) + 1, u64::from((b >> 14) & 0x3FFF) + 1))
            }
            _ => None,
        };
    }
    if d.starts_with(b"\xff\xd8") {
        let mut i = 2;
        while i + 9 <= d.len() {
            if d[i] != 0xFF {
                return None;
            }
            let marker = d[i + 1];
            if marker == 0xD8 || marker == 0x01 || (0xD0..=0xD7).contains(&marker) {
                i += 2;
                continue;
            }
            let length = be16(d, i + 2) as usize;
            // Start-of-frame markers (not DHT C4, JPG C8, DAC CC) hold the size.
            if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
                return Some((be16(d, i + 7), be16(d, i + 5)));
            }
            i += 2 + length;
        }
    }
    None
}

/// A vendor's rule for the tokens of an image (the numbers are the frame's, see
/// `ctxrules.providers.images.core_image_rule`).  An image of unknown size counts the
/// rule's `unknown` (the low end of its range) and can be `unknown_high`.
#[derive(Deserialize, Debug, Clone)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ImageRule {
    /// Width × height ÷ `pixels_per_token` after scaling down to a `max_edge` long edge
    /// and `max_pixels`.
    Anthropic {
        max_edge: f64,
        max_pixels: f64,
        pixels_per_token: f64,
        unknown: u64,
        #[serde(default)]
        unknown_high: u64,
    },
    /// `base` plus `tile_tokens` per `tile`-pixel tile after fitting in `fit` × `fit`
    /// and scaling the short side to `short_side`; `unknown_tiles` tiles when unknown.
    Openai {
        base: u64,
        tile_tokens: u64,
        tile: f64,
        fit: f64,
        short_side: f64,
        unknown_tiles: u64,
        #[serde(default)]
        unknown_high: u64,
    },
    /// `patch`-pixel patches (scaled into `max_patches` when more) × `multiplier`.
    #[serde(rename = "openai-patches")]
    OpenaiPatches {
        patch: f64,
        max_patches: f64,
        multiplier: f64,
        unknown: u64,
        #[serde(default)]
        unknown_high: u64,
    },
    /// `tokens` for an image with both sides at most `small`, else `tokens` per
    /// `tile`-pixel tile; `tokens` when the size is not known.
    Gemini {
        small: u64,
        tokens: u64,
        tile: f64,
        #[serde(default)]
        unknown_high: u64,
    },
    /// `tokens` whatever the size (Gemini 3).
    Fixed { tokens: u64 },
    /// Images count nothing (a wire that sends none).
    None,
}

impl ImageRule {
    /// How many more tokens than its count an image of unknown size can be (`None`:
    /// the rule does not depend on the size, nothing to flag).
    pub fn unknown_extra(&self) -> Option<u64> {
        match *self {
            ImageRule::Anthropic {
                unknown,
                unknown_high,
                ..
            }
            | ImageRule::OpenaiPatches {
                unknown,
                unknown_high,
                ..
            } => Some(unknown_high.saturating_sub(unknown)),
            ImageRule::Openai {
                base,
                tile_tokens,
                unknown_tiles,
                unknown_high,
                ..
            } => Some(unknown_high.saturating_sub(base + tile_tokens * unknown_tiles)),
            ImageRule::Gemini {
                tokens,
                unknown_high,
                ..
            } => Some(unknown_high.saturating_sub(tokens)),
            ImageRule::Fixed { .. } | ImageRule::None => None,
        }
    }

    /// The tokens of an image of `size` (`None`: unknown).
    pub fn tokens(&self, size: Option<(u64, u64)>) -> u64 {
        match *self {
            ImageRule::Anthropic {
                max_edge,
                max_pixels,
                pixels_per_token,
                unknown,
                ..
            } => {
                let Some((w, h)) = size else {
                    return unknown;
                };
                let (w, h) = (w as f64, h as f64);
                let scale = 1f64
                    .min(max_edge / w.max(h).max(1.0))
                    .min((max_pixels / (w * h).max(1.0)).sqrt());
                ((w * scale) * (h * scale) / pixels_per_token)
                    .ceil()
                    .max(1.0) as u64
            }
            ImageRule::Openai {
                base,
                tile_tokens,
                tile,
                fit,
                short_side,
                unknown_tiles,
                ..
            } => {
                let Some((w, h)) = size else {
                    return base + tile_tokens * unknown_tiles;
                };
                let (mut w, mut h) = (w as f64, h as f64);
                if w.max(h) > fit {
                    let m = w.max(h);
                    (w, h) = (w * fit / m, h * fit / m);
                }
                if w.min(h) > short_side {
                    let m = w.min(h);
                    (w, h) = (w * short_side / m, h * short_side / m);
                }
                base + tile_tokens * (w / tile).ceil() as u64 * (h / tile).ceil() as u64
            }
            ImageRule::OpenaiPatches {
                patch,
                max_patches,
                multiplier,
                unknown,
                ..
            } => {
                let Some((w, h)) = size else {
                    return unknown;
                };
                let (mut w, mut h) = (w as f64, h as f64);
                if (w / patch).ceil() * (h / patch).ceil() > max_patches {
                    let mut r = (patch * patch * max_patches / (w * h)).sqrt();
                    r *= ((w * r / patch).floor() / (w * r / patch))
                        .min((h * r / patch).floor() / (h * r / patch));
                    (w, h) = (w * r, h * r);
                }
                let patches = max_patches.min((w / patch).ceil() * (h / patch).ceil());
                (patches * multiplier).ceil() as u64
            }
            ImageRule::Gemini {
                small,
                tokens,
                tile,
                ..
            } => match size {
                None => tokens,
                Some((w, h)) if w <= small && h <= small => tokens,
                Some((w, h)) => {
                    tokens * (w as f64 / tile).ceil() as u64 * (h as f64 / tile).ceil() as u64
                }
            },
            ImageRule::Fixed { tokens } => tokens,
            ImageRule::None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_read_as_python_reads_it() {
        assert_eq!(a2b_base64(b"aGVsbG8="), Some(b"hello".to_vec()));
        assert_eq!(a2b_base64(b"aGVs\nbG8="), Some(b"hello".to_vec()));
        assert_eq!(a2b_base64(b"aGVsbG8"), None); // incorrect padding
        assert_eq!(a2b_base64(b"aGVsbA==tail"), Some(b"hell".to_vec()));
        assert_eq!(a2b_base64(b"a"), None);
        assert_eq!(a2b_base64(b""), Some(Vec::new()));
    }

    #[test]
    fn png_header_size() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(size(&png), Some((640, 480)));
    }
}
