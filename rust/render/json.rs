//! A small append-only JSON writer: the request bodies are written straight into one
//! byte buffer, keys in a fixed order, so equal input gives equal bytes.
//!
//! Every string that may come from content goes through `str`, which escapes it with
//! serde_json; content can never close a string or inject a key.

use serde_json::value::RawValue;

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
        // Writing into a Vec cannot fail.
        serde_json::to_writer(&mut self.buf, s).expect("write to Vec");
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
