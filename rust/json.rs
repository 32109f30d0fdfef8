//! JSON output: the string escaper, a small append-only writer, and a depth check for
//! JSON text the core is handed.
//!
//! The request bodies are written straight into one byte buffer, keys in a fixed order,
//! so equal input gives equal bytes.  Every string that may come from content is
//! escaped exactly as serde_json escapes it (quote, backslash, control characters):
//! either here by `str`, or once per commit item by `escape_into` (the commit module
//! keeps each item's strings escaped, see `crate::commit`); content can never close a
//! string or inject a key.

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

/// Append `s` JSON-escaped, without quotes, to `buf`.
///
/// Tool results are often JSON themselves, so about one byte in fifteen needs an
/// escape: the cost is per escape, not per byte.  Each 8-byte word is therefore
/// copied to the output before it is looked at, and the write position then only
/// advances past its clean prefix; an escape is written in place (one 2-byte store,
/// or 6 bytes for `\u00XX`), with no call and no capacity check per run.
#[inline]
pub fn escape_into(buf: &mut Vec<u8>, s: &str) {
    let src = s.as_bytes();
    let n = src.len();
    // Invariant of the loop: from `out` on there is room for the rest of the
    // input plus SLACK (an overlong word store, and one escape's growth).
    const SLACK: usize = 16;
    buf.reserve(n + SLACK);
    let mut out = buf.len();
    let mut cap = buf.capacity();
    let mut i = 0;
    while i < n {
        if cap - out < n - i + SLACK {
            // Escapes used up the room: record what is written, grow, go on.
            // SAFETY: bytes up to `out` were written below (initialised).
            unsafe { buf.set_len(out) };
            buf.reserve(n - i + SLACK + (n - i) / 2);
            cap = buf.capacity();
        }
        let base = buf.as_mut_ptr();
        if i + 8 <= n {
            // SAFETY: `i + 8 <= n` bounds the read; the invariant gives at least
            // SLACK >= 8 bytes of capacity at `out` for the write.
            let word = unsafe { std::ptr::read_unaligned(src.as_ptr().add(i).cast::<u64>()) };
            unsafe { std::ptr::write_unaligned(base.add(out).cast::<u64>(), word) };
            let mask = escape_mask(u64::from_le(word));
            if mask == 0 {
                i += 8;
                out += 8;
                continue;
            }
            let k = (mask.trailing_zeros() / 8) as usize;
            i += k;
            out += k;
        }
        let b = src[i];
        let e = ESCAPE[b as usize];
        // SAFETY (all three stores): the invariant leaves n - i + SLACK >= 7 bytes
        // at `out`.
        if e == 0 {
            unsafe { *base.add(out) = b };
            out += 1;
        } else if e == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let esc = [
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
            ];
            unsafe { std::ptr::copy_nonoverlapping(esc.as_ptr(), base.add(out), 6) };
            out += 6;
        } else {
            unsafe { std::ptr::copy_nonoverlapping([b'\\', e].as_ptr(), base.add(out), 2) };
            out += 2;
        }
        i += 1;
    }
    // SAFETY: every byte below `out` was written from `src` or an escape.
    unsafe { buf.set_len(out) };
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

    /// A writer over `buf`, emptied, with room for at least `cap` bytes.
    pub fn reusing(mut buf: Vec<u8>, cap: usize) -> Self {
        buf.clear();
        buf.reserve(cap);
        Json { buf }
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
        self.escaped_inner(s);
        self.buf.push(b'"');
    }

    /// Append one JSON string literal of `parts` joined by `sep` (no joined copy made).
    pub fn str_joined<'s>(&mut self, parts: impl IntoIterator<Item = &'s str>, sep: &str) {
        self.buf.push(b'"');
        for (i, p) in parts.into_iter().enumerate() {
            if i > 0 {
                self.escaped_inner(sep);
            }
            self.escaped_inner(p);
        }
        self.buf.push(b'"');
    }

    /// Append `s` escaped, without quotes.
    #[inline]
    pub fn escaped_inner(&mut self, s: &str) {
        escape_into(&mut self.buf, s);
    }

    /// Append text that is already escaped (a commit item's escaped form), unquoted.
    #[inline]
    pub fn pre(&mut self, escaped: &str) {
        self.buf.reserve(escaped.len());
        // SAFETY: just reserved the room.
        unsafe { self.put(escaped.as_bytes()) };
    }

    /// Append `escaped` (see `pre`) as a JSON string literal.
    #[inline]
    pub fn pre_str(&mut self, escaped: &str) {
        self.buf.reserve(escaped.len() + 2);
        // SAFETY: just reserved room for the text and both quotes.
        unsafe {
            self.put(b"\"");
            self.put(escaped.as_bytes());
            self.put(b"\"");
        }
    }

    /// Copy `s` to the end of the buffer.  Most item strings are short (ids, names,
    /// short texts), and a `memcpy` call per string was a third of writing a body: up to
    /// 64 bytes are copied here with overlapping word moves instead (each read and
    /// write stays within `s` and within `s.len()` bytes of the end).
    ///
    /// # Safety
    /// The buffer must have room for `s.len()` more bytes.
    #[inline(always)]
    unsafe fn put(&mut self, s: &[u8]) {
        use std::ptr::{copy_nonoverlapping, read_unaligned as rd, write_unaligned as wr};
        let n = s.len();
        let len = self.buf.len();
        debug_assert!(self.buf.capacity() - len >= n);
        let (src, dst) = (s.as_ptr(), self.buf.as_mut_ptr().add(len));
        if n > 64 {
            copy_nonoverlapping(src, dst, n);
        } else if n > 32 {
            let (a, b) = (rd(src.cast::<u128>()), rd(src.add(16).cast::<u128>()));
            let (c, d) = (
                rd(src.add(n - 32).cast::<u128>()),
                rd(src.add(n - 16).cast::<u128>()),
            );
            wr(dst.cast::<u128>(), a);
            wr(dst.add(16).cast::<u128>(), b);
            wr(dst.add(n - 32).cast::<u128>(), c);
            wr(dst.add(n - 16).cast::<u128>(), d);
        } else if n > 16 {
            let (a, b) = (rd(src.cast::<u128>()), rd(src.add(n - 16).cast::<u128>()));
            wr(dst.cast::<u128>(), a);
            wr(dst.add(n - 16).cast::<u128>(), b);
        } else if n >= 8 {
            let (a, b) = (rd(src.cast::<u64>()), rd(src.add(n - 8).cast::<u64>()));
            wr(dst.cast::<u64>(), a);
            wr(dst.add(n - 8).cast::<u64>(), b);
        } else if n >= 4 {
            let (a, b) = (rd(src.cast::<u32>()), rd(src.add(n - 4).cast::<u32>()));
            wr(dst.cast::<u32>(), a);
            wr(dst.add(n - 4).cast::<u32>(), b);
        } else {
            for i in 0..n {
                *dst.add(i) = *src.add(i);
            }
        }
        self.buf.set_len(len + n);
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

    /// Append `,"key":"escaped"` for text that is already escaped (see `pre`).
    #[inline]
    pub fn field_pre(&mut self, k: &str, escaped: &str) {
        self.buf.push(b',');
        self.key(k);
        self.pre_str(escaped);
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

/// Whether JSON text nests arrays and objects deeper than `max` (brackets inside strings
/// do not count).  Linear and iterative: it runs before anything parses or splices the
/// text, so hostile nesting is refused instead of reaching a recursive reader (serde_json
/// itself stops at 128 levels, but not inside a `RawValue`, which it skips unchecked).
pub fn nests_deeper(text: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_str = false;
    let mut escaped = false;
    for &b in text {
        if in_str {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{nests_deeper, Json};

    #[test]
    fn pre_escaped_text_is_copied_exactly_at_every_length() {
        for n in 0..140usize {
            let s: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            let mut w = Json::with_capacity(0);
            w.raw("<");
            w.pre(&s);
            w.pre_str(&s);
            assert_eq!(
                String::from_utf8(w.finish()).unwrap(),
                format!("<{s}\"{s}\"")
            );
        }
    }

    #[test]
    fn nesting_is_measured_outside_strings() {
        assert!(!nests_deeper(b"[[1]]", 2));
        assert!(nests_deeper(b"[[[1]]]", 2));
        assert!(!nests_deeper(br#"{"a":"[[[[\"[[["}"#, 1));
        assert!(nests_deeper(br#"{"a":"\\",  "b":[[]]}"#, 2));
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert!(nests_deeper(deep.as_bytes(), 105));
    }

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
    fn escapes_long_runs_of_escapes() {
        // Strings that grow up to 6x, past any reserved slack, and words full of escapes.
        for unit in ["\u{1}", "\"", "\\", "\n", "a\"", "\u{1f}b\\"] {
            for reps in [1, 7, 8, 9, 100, 1000] {
                let s = unit.repeat(reps);
                let mut w = Json::with_capacity(0);
                w.raw("x");
                w.str(&s);
                let got = String::from_utf8(w.finish()).unwrap();
                assert_eq!(got, format!("x{}", serde_json::to_string(&s).unwrap()));
            }
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
