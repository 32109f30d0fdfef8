//! JSON text written again as Python writes the value decoded from it.
//!
//! The estimate counts a tool call's arguments the way the specification
//! (`ctxrules.providers`) reads them from a body: decoded by msgspec, then written
//! again — by `json.dumps(…, ensure_ascii=False)` for Anthropic (`", "` and `": "`,
//! floats as Python's `repr`) or by `msgspec.json.encode` for Gemini (no spaces, floats
//! msgspec's way).  Decoding normalises what the text may spell differently: spaces,
//! escapes (`\u00e9`, `\/`), number forms (`1E2` is the float `100.0`, `-0` the int
//! `0`), and a repeated key, which keeps its first place and its last value (a dict).
//! Strings are escaped as both writers (and the core's own escaper) escape them.

use crate::json::escape_into;

/// How a decoded value is written again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `json.dumps(value, ensure_ascii=False)`.
    Spaced,
    /// `msgspec.json.encode(value)`.
    Compact,
}

/// Deepest nesting accepted (the depth the core accepts anywhere, `commit::MAX_DEPTH`).
const MAX_DEPTH: usize = crate::commit::MAX_DEPTH;

/// `text` (one JSON value) decoded and written again in `style`; `None` when msgspec
/// would refuse it (not JSON, a lone surrogate escape, a float out of range, too deep).
pub fn rewrite(text: &str, style: Style) -> Option<String> {
    let mut p = Parser {
        b: text.as_bytes(),
        i: 0,
        style,
    };
    let mut out = Vec::with_capacity(text.len() + text.len() / 8 + 8);
    p.value(&mut out, 0)?;
    p.ws();
    if p.i != p.b.len() {
        return None;
    }
    String::from_utf8(out).ok()
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    style: Style,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn value(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'{' => self.object(out, depth),
            b'[' => self.array(out, depth),
            b'"' => {
                let s = self.string()?;
                quote(out, &s);
                Some(())
            }
            b't' => self.literal(out, "true"),
            b'f' => self.literal(out, "false"),
            b'n' => self.literal(out, "null"),
            _ => self.number(out),
        }
    }

    fn literal(&mut self, out: &mut Vec<u8>, word: &str) -> Option<()> {
        if !self.b[self.i..].starts_with(word.as_bytes()) {
            return None;
        }
        self.i += word.len();
        out.extend_from_slice(word.as_bytes());
        Some(())
    }

    fn separator(&self) -> &'static [u8] {
        match self.style {
            Style::Spaced => b", ",
            Style::Compact => b",",
        }
    }

    fn object(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        self.i += 1;
        // (key, its written value), in the order keys first appear.
        let mut members: Vec<(String, Vec<u8>)> = Vec::new();
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
        } else {
            loop {
                self.ws();
                if self.peek()? != b'"' {
                    return None;
                }
                let key = self.string()?;
                self.ws();
                if self.peek()? != b':' {
                    return None;
                }
                self.i += 1;
                let mut v = Vec::new();
                self.value(&mut v, depth + 1)?;
                match members.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => slot.1 = v,
                    None => members.push((key, v)),
                }
                self.ws();
                match self.peek()? {
                    b',' => self.i += 1,
                    b'}' => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        out.push(b'{');
        for (k, (key, v)) in members.iter().enumerate() {
            if k > 0 {
                out.extend_from_slice(self.separator());
            }
            quote(out, key);
            out.extend_from_slice(match self.style {
                Style::Spaced => b": ",
                Style::Compact => b":",
            });
            out.extend_from_slice(v);
        }
        out.push(b'}');
        Some(())
    }

    fn array(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        self.i += 1;
        out.push(b'[');
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            out.push(b']');
            return Some(());
        }
        let mut first = true;
        loop {
            if !first {
                out.extend_from_slice(self.separator());
            }
            first = false;
            self.value(out, depth + 1)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    out.push(b']');
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string literal at `i`, decoded.
    fn string(&mut self) -> Option<String> {
        self.i += 1;
        let mut s = String::new();
        loop {
            let start = self.i;
            while let Some(&c) = self.b.get(self.i) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            s.push_str(std::str::from_utf8(&self.b[start..self.i]).ok()?);
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(s);
                }
                b'\\' => {
                    let e = *self.b.get(self.i + 1)?;
                    self.i += 2;
                    match e {
                        b'"' => s.push('"'),
                        b'\\' => s.push('\\'),
                        b'/' => s.push('/'),
                        b'b' => s.push('\u{8}'),
                        b'f' => s.push('\u{c}'),
                        b'n' => s.push('\n'),
                        b'r' => s.push('\r'),
                        b't' => s.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                // A pair; a lone half is refused, as msgspec refuses it.
                                if self.b.get(self.i..self.i + 2)? != b"\\u" {
                                    return None;
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return None;
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return None;
                            } else {
                                hi
                            };
                            s.push(char::from_u32(c)?);
                        }
                        _ => return None,
                    }
                }
                _ => return None, // a raw control character
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = std::str::from_utf8(self.b.get(self.i..self.i + 4)?).ok()?;
        self.i += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    fn number(&mut self, out: &mut Vec<u8>) -> Option<()> {
        let start = self.i;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.peek() {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).ok()?;
        if text.is_empty() {
            return None;
        }
        if text.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')) {
            let x: f64 = text.parse().ok()?;
            if !x.is_finite() {
                return None; // msgspec: "Number out of range"
            }
            out.extend_from_slice(float(x, self.style).as_bytes());
        } else {
            let digits = text.strip_prefix('-').unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            // An int: Python writes its digits; `-0` is the int 0.
            if digits.bytes().all(|c| c == b'0') {
                out.push(b'0');
            } else {
                out.extend_from_slice(text.as_bytes());
            }
        }
        Some(())
    }
}

fn quote(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    escape_into(out, s);
    out.push(b'"');
}

/// A float as Python's `repr` (`Style::Spaced`) or msgspec (`Style::Compact`) writes
/// it: the shortest digits that read back as `x`, positional between the two writers'
/// limits, else with an exponent (`1e+16` / `1e16`, `1e-05` / `1e-5`).
pub fn float(x: f64, style: Style) -> String {
    // Rust's `{:e}` gives the same shortest round-trip digits as both writers.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let decpt = exp + 1; // digits before the decimal point
    let low = match style {
        Style::Spaced => -4,
        Style::Compact => -5,
    };
    let mut out = String::with_capacity(digits.len() + 8);
    if x.is_sign_negative() {
        out.push('-');
    }
    if decpt <= low || decpt > 16 {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        match style {
            Style::Spaced => out.push_str(&format!("e{exp:+03}")),
            Style::Compact => out.push_str(&format!("e{exp}")),
        }
    } else if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        out.push_str(&digits);
    } else if (decpt as usize) < digits.len() {
        out.push_str(&digits[..decpt as usize]);
        out.push('.');
        out.push_str(&digits[decpt as usize..]);
    } else {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', decpt as usize - digits.len()));
        out.push_str(".0");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_python_and_msgspec_write_them() {
        // (value, repr, msgspec), from CPython 3.11 and msgspec 0.23.
        let cases = [
            (1e16, "1e+16", "1e16"),
            (1e15, "1000000000000000.0", "1000000000000000.0"),
            (0.0001, "0.0001", "0.0001"),
            (0.00001, "1e-05", "0.00001"),
            (2.5e-5, "2.5e-05", "0.000025"),
            (1e-7, "1e-07", "1e-7"),
            (1.5e300, "1.5e+300", "1.5e300"),
            (5e-324, "5e-324", "5e-324"),
            (
                123456789012345678.0,
                "1.2345678901234568e+17",
                "1.2345678901234568e17",
            ),
            (0.1, "0.1", "0.1"),
            (100.0, "100.0", "100.0"),
            (0.0, "0.0", "0.0"),
            (-0.0, "-0.0", "-0.0"),
            (-1.5, "-1.5", "-1.5"),
            (
                1.2345678901234567,
                "1.2345678901234567",
                "1.2345678901234567",
            ),
        ];
        for (x, spaced, compact) in cases {
            assert_eq!(float(x, Style::Spaced), spaced, "{x}");
            assert_eq!(float(x, Style::Compact), compact, "{x}");
        }
    }

    #[test]
    fn values_as_python_writes_them() {
        let text = r#" {"b": [1, 2.0, -0, 1E2, "\u00e9\/\n"], "a": {}, "b": null, "c":[] } "#;
        assert_eq!(
            rewrite(text, Style::Spaced).unwrap(),
            r#"{"b": null, "a": {}, "c": []}"#
        );
        let text = r#"{"x":[1,2.0,-0,1E2,"\u00e9\/\n\u0001",true,{"y":"\ud83d\ude00"}]}"#;
        assert_eq!(
            rewrite(text, Style::Spaced).unwrap(),
            "{\"x\": [1, 2.0, 0, 100.0, \"é/\\n\\u0001\", true, {\"y\": \"😀\"}]}"
        );
        assert_eq!(
            rewrite(text, Style::Compact).unwrap(),
            "{\"x\":[1,2.0,0,100.0,\"é/\\n\\u0001\",true,{\"y\":\"😀\"}]}"
        );
        assert_eq!(
            rewrite("{\"n\": 18446744073709551616}", Style::Compact).unwrap(),
            "{\"n\":18446744073709551616}"
        );
    }

    #[test]
    fn what_msgspec_refuses_is_refused() {
        for bad in [
            r#"{"a":"\ud800"}"#,
            r#"{"a":1e400}"#,
            r#"{"a":}"#,
            "{} x",
            r#"{"a":"\udc00\ud800"}"#,
        ] {
            assert_eq!(rewrite(bad, Style::Compact), None, "{bad}");
        }
    }
}
