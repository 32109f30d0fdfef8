//! A small append-only JSON writer: the request bodies are written straight into one
//! byte buffer, keys in a fixed order, so equal input gives equal bytes.
//!
//! Every string that may come from content goes through `str`, which escapes exactly
//! what serde_json escapes (quote, backslash, control characters); content can never
//! close a string or inject a key.  The escaper copies unescaped runs in one go, which
//! is most of the work of rendering a large commit.

use serde_json::value::RawValue;

/// For each byte: 0 when it is copied as is, else the letter after the backslash
/// (`u` means `\\u00XX`).  Bytes ≥ 0x80 are parts of UTF-8 sequences: copied as is.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// High bit set in each byte of `w` (little-endian) that may need an escape: a control
/// character, `"` or `\\`.  No false negatives, and the lowest flagged byte is exact.
#[inline]
fn escape_mask(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    control | has_zero(w ^ (ONES * b'"' as u64)) | has_zero(w ^ (ONES * b'\\' as u64))
}

/// Byte buffer with helpers for the JSON pieces the renderers emit.
pub struct Json {
    pub buf: Vec<u8>,
}

impl Json {
    /// A writer with room for `cap` bytes.
    pub fn with_capacity(cap: usize) -> Self {
        Json {
            buf: Vec::with_capacity(cap),
        }
    }

    /// Append trusted literal JSON (structure only, never content).
    #[inline]
    pub fn raw(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// Append a JSON string literal with `s` escaped.
    #[inline]
    pub fn str(&mut self, s: &str) {
        self.buf.reserve(s.len() + 2);
        self.buf.push(b'"');
        self.escaped(s);
        self.buf.push(b'"');
    }

    /// Append one JSON string literal of `parts` joined by `sep` (no joined copy made).
    pub fn str_joined(&mut self, parts: &[&str], sep: &str) {
        self.buf.push(b'"');
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                self.escaped(sep);
            }
            self.escaped(p);
        }
        self.buf.push(b'"');
    }

    /// Append `s` escaped, without quotes.
    #[inline]
    fn escaped(&mut self, s: &str) {
        let bytes = s.as_bytes();
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            // 8 bytes at a time: the lowest flagged byte of a word is exactly the first
            // one needing an escape (the SWAR borrow only ever flags bytes above it).
            if i + 8 <= bytes.len() {
                let word = u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
                let mask = escape_mask(word);
                if mask == 0 {
                    i += 8;
                    continue;
                }
                i += (mask.trailing_zeros() / 8) as usize;
            }
            let b = bytes[i];
            let e = ESCAPE[b as usize];
            if e != 0 {
                self.buf.extend_from_slice(&bytes[start..i]);
                if e == b'u' {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    self.buf.extend_from_slice(b"\\u00");
                    self.buf.push(HEX[(b >> 4) as usize]);
                    self.buf.push(HEX[(b & 0xf) as usize]);
                } else {
                    self.buf.push(b'\\');
                    self.buf.push(e);
                }
                start = i + 1;
            }
            i += 1;
        }
        self.buf.extend_from_slice(&bytes[start..]);
    }

    /// Append `"key":` (keys are literals chosen by the renderer).
    #[inline]
    pub fn key(&mut self, k: &str) {
        self.buf.push(b'"');
        self.buf.extend_from_slice(k.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    /// Append `,"key":"value"`.
    #[inline]
    pub fn field_str(&mut self, k: &str, v: &str) {
        self.buf.push(b',');
        self.key(k);
        self.str(v);
    }

    /// Append an unsigned integer.
    #[inline]
    pub fn uint(&mut self, n: u64) {
        self.buf.extend_from_slice(n.to_string().as_bytes());
    }

    /// Append a comma unless this is the first element (`first` is then cleared).
    #[inline]
    pub fn sep(&mut self, first: &mut bool) {
        if *first {
            *first = false;
        } else {
            self.buf.push(b',');
        }
    }

    /// Append the members of a raw JSON object (without braces), preceded by a comma.
    /// Used for the caller's extra body fields; an empty object appends nothing.
    pub fn splice_object(&mut self, obj: &RawValue) {
        let s = obj.get().trim();
        let inner = s
            .strip_prefix('{')
            .and_then(|r| r.strip_suffix('}'))
            .unwrap_or("")
            .trim();
        if !inner.is_empty() {
            self.buf.push(b',');
            self.buf.extend_from_slice(inner.as_bytes());
        }
    }

    /// Take the bytes.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::Json;

    #[test]
    fn escapes_like_serde_json() {
        let mut all: String = (0u8..0x80).map(char::from).collect();
        all.push_str("é✓你好\u{2028}\u{1F600}\"\\\n");
        for s in [
            all.as_str(),
            "",
            "plain",
            "\"",
            "\\",
            "a\u{0}b\u{1f}c\u{7f}",
        ] {
            let mut w = Json::with_capacity(8);
            w.str(s);
            assert_eq!(
                String::from_utf8(w.finish()).unwrap(),
                serde_json::to_string(s).unwrap()
            );
        }
    }

    #[test]
    fn escapes_every_position() {
        // Quotes, backslashes and control bytes at every offset of strings of many lengths.
        let alphabet = ['a', '"', '\\', '\n', '\u{1}', 'é', '✓', ' ', '\u{7f}'];
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for len in 0..80 {
            for _ in 0..20 {
                let s: String = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        alphabet[(seed % alphabet.len() as u64) as usize]
                    })
                    .collect();
                let mut w = Json::with_capacity(8);
                w.str(&s);
                let got = String::from_utf8(w.finish()).unwrap();
                assert_eq!(got, serde_json::to_string(&s).unwrap());
            }
        }
    }
}
