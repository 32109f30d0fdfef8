//! The exact identifiers of a text: where they are, by kind.
//!
//! This is the scanner behind `ctxrules.summarizers.facts.exact_identifiers` (its module
//! docstring defines what counts); Python keeps the policy (which tokens, each once, the
//! error lines) and this finds the spans, one crossing per batch of texts.  It was a
//! Python regular expression of twelve alternatives with look-arounds, which cost
//! milliseconds per kilobyte — the aged-tool-result stubs made it the engine's hot path.
//! The scan does what that expression did, alternative by alternative: at each position,
//! in order, the first alternative that matches, with the match that expression's
//! backtracking would have found (each function below says how); the search goes on
//! after the match.  The test suite compares it with the expression on the corpus and on
//! generated text (tests/summarizers/test_identifier_scan.py).
//!
//! Input is a *class string*, one byte per character of the Python text: ASCII as it is,
//! and every other character as its class under Python's `re` (see [`WORD`] …), which
//! Python computes with its own Unicode tables — so `\w`, `\d`, `\s` and `\b` mean here
//! exactly what they meant there, and a span's byte offsets are the text's character
//! offsets.

/// A non-ASCII character that is `\w` but not `\d` in Python (`str.isalnum()`).
pub const WORD: u8 = 0x80;
/// A non-ASCII character that is `\d` in Python (`str.isdecimal()`).
pub const DIGIT: u8 = 0x81;
/// A non-ASCII character that is `\s` in Python (`str.isspace()`).
pub const SPACE: u8 = 0x82;
/// Any other non-ASCII character.
pub const OTHER: u8 = 0x83;

/// What a span is; the numbers cross to Python (`facts._KINDS` lists the names in this
/// order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Url = 0,
    Uuid = 1,
    Path = 2,
    File = 3,
    Date = 4,
    Hash = 5,
    Flag = 6,
    /// A dotted name, or one of its parts that is a symbol in its own right.
    Symbol = 7,
    Call = 8,
    Id = 9,
    Number = 10,
}

/// One identifier: its kind and its character range in the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

#[inline]
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == WORD || b == DIGIT
}

#[inline]
fn is_digit(b: u8) -> bool {
    b.is_ascii_digit() || b == DIGIT
}

#[inline]
fn is_space(b: u8) -> bool {
    // Python's str.isspace() on ASCII includes the four separators 0x1c–0x1f.
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f | b' ') || b == SPACE
}

/// `[\w.@+-]`: a path character.
#[inline]
fn is_path(b: u8) -> bool {
    is_word(b) || matches!(b, b'.' | b'@' | b'+' | b'-')
}

/// `[\w@+-]`: a path character that may end a path.
#[inline]
fn is_path_end(b: u8) -> bool {
    is_word(b) || matches!(b, b'@' | b'+' | b'-')
}

/// `[\w-]`.
#[inline]
fn is_word_dash(b: u8) -> bool {
    is_word(b) || b == b'-'
}

#[inline]
fn is_hex_lower(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// The extensions a file name may end in (the expression's alternation; a match must
/// end at the end of the word, so only membership counts).
const EXTENSIONS: &[&[u8]] = &[
    b"py", b"pyi", b"rs", b"ts", b"tsx", b"js", b"jsx", b"mjs", b"json", b"jsonl", b"toml",
    b"yaml", b"yml", b"md", b"rst", b"txt", b"go", b"java", b"kt", b"c", b"h", b"cc", b"cpp",
    b"hpp", b"cs", b"rb", b"php", b"sh", b"bash", b"cfg", b"ini", b"lock", b"html", b"css",
    b"scss", b"vue", b"sql", b"csv", b"xml", b"ipynb", b"traj", b"log", b"env",
];

/// `_TRAILING` in facts.py: stripped from the end of a URL or path.
const TRAILING: &[u8] = b".,;:!?)]}'\"";

struct Text<'a> {
    s: &'a [u8],
}

/// One alternative of the expression: where its match at a position ends, if it matches.
type Alternative<'a> = fn(&Text<'a>, usize) -> Option<usize>;

impl<'a> Text<'a> {
    /// The expression's alternatives, in its order.
    const ALTERNATIVES: [(Kind, Alternative<'a>); 12] = [
        (Kind::Url, Self::url),
        (Kind::Uuid, Self::uuid),
        (Kind::Path, Self::path),
        (Kind::File, Self::file),
        (Kind::Date, Self::date),
        (Kind::Hash, Self::hash),
        (Kind::Flag, Self::flag),
        (Kind::Symbol, Self::dotted),
        (Kind::Symbol, Self::symbol),
        (Kind::Call, Self::call),
        (Kind::Id, Self::id),
        (Kind::Number, Self::number),
    ];

    #[inline]
    fn at(&self, i: usize) -> Option<u8> {
        self.s.get(i).copied()
    }

    /// The byte before `p` (none at the start).
    #[inline]
    fn before(&self, p: usize) -> Option<u8> {
        if p == 0 {
            None
        } else {
            Some(self.s[p - 1])
        }
    }

    /// `\b` at `p`.
    #[inline]
    fn boundary(&self, p: usize) -> bool {
        self.before(p).is_some_and(is_word) != self.at(p).is_some_and(is_word)
    }

    /// The end of the run of bytes from `p` that satisfy `f`.
    #[inline]
    fn run(&self, p: usize, f: impl Fn(u8) -> bool) -> usize {
        let mut e = p;
        while e < self.s.len() && f(self.s[e]) {
            e += 1;
        }
        e
    }

    fn starts(&self, p: usize, lit: &[u8]) -> bool {
        self.s.get(p..p + lit.len()) == Some(lit)
    }

    /// `https?://[^\s<>"'`)\]]+`.
    fn url(&self, p: usize) -> Option<usize> {
        let mut q = p;
        if !self.starts(q, b"http") {
            return None;
        }
        q += 4;
        if self.at(q) == Some(b's') {
            q += 1;
        }
        if !self.starts(q, b"://") {
            return None;
        }
        q += 3;
        let e = self.run(q, |b| !is_space(b) && !b"<>\"'`)]".contains(&b));
        (e > q).then_some(e)
    }

    /// `\b` 8-4-4-4-12 hex digits `\b`.
    fn uuid(&self, p: usize) -> Option<usize> {
        if !self.boundary(p) {
            return None;
        }
        let mut q = p;
        for (i, n) in [8, 4, 4, 4, 12].into_iter().enumerate() {
            if i > 0 {
                if self.at(q) != Some(b'-') {
                    return None;
                }
                q += 1;
            }
            for _ in 0..n {
                if !self.at(q).is_some_and(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                q += 1;
            }
        }
        self.boundary(q).then_some(q)
    }

    /// `(?<![\w.:/~-])(?:(?:~|\.{1,2})(?:/[\w.@+-]+)+|/?(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-])`.
    fn path(&self, p: usize) -> Option<usize> {
        if self
            .before(p)
            .is_some_and(|b| is_word(b) || b":/~.-".contains(&b))
        {
            return None;
        }
        // First branch: `~`, `..` or `.`, then `/` + path characters, as often as they
        // come (nothing follows, so the greedy match stands).  `\.{1,2}` gives back its
        // second dot only to find a `/` where a dot is: never.
        let lead = match (self.at(p), self.at(p + 1)) {
            (Some(b'~'), _) => Some(p + 1),
            (Some(b'.'), Some(b'.')) => Some(p + 2),
            (Some(b'.'), _) => Some(p + 1),
            _ => None,
        };
        if let Some(mut q) = lead {
            let mut end = None;
            while self.at(q) == Some(b'/') {
                let e = self.run(q + 1, is_path);
                if e == q + 1 {
                    break;
                }
                end = Some(e);
                q = e;
            }
            if end.is_some() {
                return end;
            }
        }
        // Second branch: an optional `/`, then directories (each a maximal run of path
        // characters and its `/`), then a last part that ends in `[\w@+-]`; when the
        // run after the last `/` has no such character, the expression gives back
        // directories one by one and looks again in the one it gave back.
        let mut q = p;
        if self.at(q) == Some(b'/') {
            q += 1;
        }
        let mut dirs = Vec::new();
        loop {
            let e = self.run(q, is_path);
            if e > q && self.at(e) == Some(b'/') {
                q = e + 1;
                dirs.push(q);
            } else {
                break;
            }
        }
        for &start in dirs.iter().rev() {
            let e = self.run(start, is_path);
            if let Some(last) = (start..e).rev().find(|&i| is_path_end(self.s[i])) {
                return Some(last + 1);
            }
        }
        None
    }

    /// `(?<![\w.-])[\w-]+(?:\.[\w-]+)*\.(?:py|…)\b`: the last `.`-part whose word (up to
    /// a `-` or the end) is an extension ends the match there.
    fn file(&self, p: usize) -> Option<usize> {
        if self
            .before(p)
            .is_some_and(|b| is_word(b) || b == b'.' || b == b'-')
        {
            return None;
        }
        let mut q = self.run(p, is_word_dash);
        if q == p {
            return None;
        }
        let mut dots = Vec::new();
        while self.at(q) == Some(b'.') {
            let e = self.run(q + 1, is_word_dash);
            if e == q + 1 {
                break;
            }
            dots.push(q);
            q = e;
        }
        for &dot in dots.iter().rev() {
            let e = self.run(dot + 1, is_word);
            if EXTENSIONS.contains(&&self.s[dot + 1..e]) {
                return Some(e);
            }
        }
        None
    }

    /// `n` decimal digits (`\d`) from `q`.
    fn digits(&self, q: usize, n: usize) -> bool {
        (q..q + n).all(|i| self.at(i).is_some_and(is_digit))
    }

    /// `\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b`, longest alternative first.
    fn date(&self, p: usize) -> Option<usize> {
        if !self.boundary(p)
            || !self.digits(p, 4)
            || self.at(p + 4) != Some(b'-')
            || !self.digits(p + 5, 2)
            || self.at(p + 7) != Some(b'-')
            || !self.digits(p + 8, 2)
        {
            return None;
        }
        let day = p + 10;
        let mut ends = Vec::with_capacity(3);
        if matches!(self.at(day), Some(b'T' | b' '))
            && self.digits(day + 1, 2)
            && self.at(day + 3) == Some(b':')
            && self.digits(day + 4, 2)
        {
            let minutes = day + 6;
            if self.at(minutes) == Some(b':') && self.digits(minutes + 1, 2) {
                ends.push(minutes + 3);
            }
            ends.push(minutes);
        }
        ends.push(day);
        ends.into_iter().find(|&e| self.boundary(e))
    }

    /// `\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b`: a whole word of 7 to 64
    /// lower-case hex digits with a letter and a digit.
    fn hash(&self, p: usize) -> Option<usize> {
        if !self.boundary(p) {
            return None;
        }
        let e = self.run(p, is_hex_lower);
        let run = &self.s[p..e];
        let ok = (7..=64).contains(&run.len())
            && run.iter().any(|b| b.is_ascii_lowercase())
            && run.iter().any(|b| b.is_ascii_digit())
            && !self.at(e).is_some_and(is_word);
        ok.then_some(e)
    }

    /// `(?<![\w-])--[A-Za-z][\w-]*[A-Za-z0-9]`: up to the last ASCII letter or digit of
    /// the `[\w-]` run.
    fn flag(&self, p: usize) -> Option<usize> {
        if self.before(p).is_some_and(is_word_dash)
            || !self.starts(p, b"--")
            || !self.at(p + 2).is_some_and(|b| b.is_ascii_alphabetic())
        {
            return None;
        }
        let e = self.run(p + 3, is_word_dash);
        (p + 3..e)
            .rev()
            .find(|&i| self.s[i].is_ascii_alphanumeric())
            .map(|i| i + 1)
    }

    /// `(?<![\w.$@/-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+`.
    fn dotted(&self, p: usize) -> Option<usize> {
        if self
            .before(p)
            .is_some_and(|b| is_word(b) || b".$@/-".contains(&b))
        {
            return None;
        }
        let name_start = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
        if !name_start(self.at(p)) {
            return None;
        }
        let mut q = self.run(p + 1, is_word);
        let mut parts = 0;
        while self.at(q) == Some(b'.') && name_start(self.at(q + 1)) {
            q = self.run(q + 2, is_word);
            parts += 1;
        }
        (parts > 0).then_some(q)
    }

    /// `(?<![\w$@-])(?=\w*[A-Za-z])(?=\w*(?:_|[a-z][A-Z]|[A-Z]{2}[a-z]))\w{3,}(?![\w-])`:
    /// a whole word of three or more with an ASCII letter and an underscore or an inner
    /// capital, not followed by `-`.
    fn symbol(&self, p: usize) -> Option<usize> {
        if self
            .before(p)
            .is_some_and(|b| is_word(b) || b == b'$' || b == b'@' || b == b'-')
        {
            return None;
        }
        let e = self.run(p, is_word);
        let w = &self.s[p..e];
        if w.len() < 3 || self.at(e) == Some(b'-') || !w.iter().any(|b| b.is_ascii_alphabetic()) {
            return None;
        }
        let (lo, up) = (
            |b: &u8| b.is_ascii_lowercase(),
            |b: &u8| b.is_ascii_uppercase(),
        );
        let cased = w.contains(&b'_')
            || w.windows(2).any(|x| lo(&x[0]) && up(&x[1]))
            || w.windows(3).any(|x| up(&x[0]) && up(&x[1]) && lo(&x[2]));
        cased.then_some(e)
    }

    /// `(?<![\w.$@-])[A-Za-z]\w{2,}\(`.
    fn call(&self, p: usize) -> Option<usize> {
        if self
            .before(p)
            .is_some_and(|b| is_word(b) || b".$@-".contains(&b))
            || !self.at(p).is_some_and(|b| b.is_ascii_alphabetic())
        {
            return None;
        }
        let e = self.run(p + 1, is_word);
        (e - (p + 1) >= 2 && self.at(e) == Some(b'(')).then_some(e + 1)
    }

    /// `\b(?=[\w-]*[A-Za-z])(?=[\w-]*\d)[A-Za-z]\w*(?:-\w+)*\b`: the look-aheads read the
    /// whole `[\w-]` run, the match stops before a `-` that no word character follows.
    fn id(&self, p: usize) -> Option<usize> {
        if !self.boundary(p) || !self.at(p).is_some_and(|b| b.is_ascii_alphabetic()) {
            return None;
        }
        let run = &self.s[p..self.run(p, is_word_dash)];
        if !run.iter().copied().any(is_digit) {
            return None;
        }
        let mut q = self.run(p + 1, is_word);
        while self.at(q) == Some(b'-') && self.at(q + 1).is_some_and(is_word) {
            q = self.run(q + 1, is_word);
        }
        Some(q)
    }

    /// `(?<![\w.,-])\d+(?:[.,]\d+)*(?![\w])`: the whole chain of digit groups, or without
    /// its last `.`/`,` group when a word character follows the chain.
    fn number(&self, p: usize) -> Option<usize> {
        if self
            .before(p)
            .is_some_and(|b| is_word(b) || b == b'.' || b == b',' || b == b'-')
            || !self.at(p).is_some_and(is_digit)
        {
            return None;
        }
        let mut prev = None;
        let mut q = self.run(p, is_digit);
        while matches!(self.at(q), Some(b'.' | b',')) && self.at(q + 1).is_some_and(is_digit) {
            prev = Some(q);
            q = self.run(q + 1, is_digit);
        }
        if !self.at(q).is_some_and(is_word) {
            Some(q)
        } else {
            prev
        }
    }

    /// The first alternative that matches at `p`, in the expression's order.
    fn match_at(&self, p: usize) -> Option<(Kind, usize)> {
        let b = self.s[p];
        // Every alternative starts with a word character or one of these.
        if !(is_word(b) || matches!(b, b'~' | b'.' | b'/' | b'@' | b'+' | b'-')) {
            return None;
        }
        Self::ALTERNATIVES
            .iter()
            .find_map(|&(kind, f)| f(self, p).map(|e| (kind, e)))
    }
}

/// Whether a part of a dotted name is a symbol in its own right: three characters or
/// more with an inner underscore or an inner capital (`_symbol_part` in facts.py).
fn symbol_part(part: &[u8]) -> bool {
    if part.len() < 3 {
        return false;
    }
    let inner = {
        let a = part.iter().position(|&b| b != b'_');
        let z = part.iter().rposition(|&b| b != b'_');
        match (a, z) {
            (Some(a), Some(z)) => &part[a..=z],
            _ => &part[0..0],
        }
    };
    let (lo, up) = (
        |b: u8| b.is_ascii_lowercase(),
        |b: u8| b.is_ascii_uppercase(),
    );
    inner.contains(&b'_')
        || part.windows(2).any(|x| lo(x[0]) && up(x[1]))
        || part.windows(3).any(|x| up(x[0]) && up(x[1]) && lo(x[2]))
}

/// The exact identifiers of a class string, in order, with the filters of
/// `exact_identifiers` applied (a URL or path without its trailing punctuation, no
/// "and/or", no dotted name of one-letter parts, no plural acronym, no id under four
/// characters, no number under three digits); a dotted name is followed by its parts
/// that are symbols.  Repeated tokens are repeated here: Python keeps each once.
pub fn spans(s: &[u8]) -> Vec<Span> {
    let text = Text { s };
    let mut out = Vec::new();
    let mut p = 0;
    while p < s.len() {
        let Some((kind, e)) = text.match_at(p) else {
            p += 1;
            continue;
        };
        let start = p;
        p = e;
        let mut end = e;
        match kind {
            Kind::Url | Kind::Path => {
                while end > start && TRAILING.contains(&s[end - 1]) {
                    end -= 1;
                }
                let tok = &s[start..end];
                if kind == Kind::Path
                    && tok.iter().filter(|&&b| b == b'/').count() == 1
                    && !matches!(tok.first(), Some(b'/' | b'~' | b'.'))
                {
                    let slash = tok.iter().position(|&b| b == b'/').expect("one slash");
                    if !tok[slash + 1..].contains(&b'.') {
                        continue; // "and/or", "I/O"
                    }
                }
            }
            Kind::Symbol if s[start..end].contains(&b'.') => {
                let tok = &s[start..end];
                if tok.split(|&b| b == b'.').all(|part| part.len() < 2) {
                    continue; // e.g, i.e
                }
                out.push(Span { kind, start, end });
                let mut at = start;
                for part in tok.split(|&b| b == b'.') {
                    if symbol_part(part) {
                        out.push(Span {
                            kind,
                            start: at,
                            end: at + part.len(),
                        });
                    }
                    at += part.len() + 1;
                }
                continue;
            }
            Kind::Symbol => {
                let tok = &s[start..end];
                let plural_acronym = tok.len() >= 2
                    && tok[tok.len() - 1] == b's'
                    && tok[..tok.len() - 1].iter().all(|b| b.is_ascii_uppercase());
                if plural_acronym || tok.iter().all(|&b| b == b'_') {
                    continue;
                }
            }
            Kind::Id if end - start < 4 => continue,
            Kind::Number if s[start..end].iter().filter(|&&b| is_digit(b)).count() < 3 => continue,
            _ => {}
        }
        out.push(Span { kind, start, end });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(Kind, &str)> {
        spans(text.as_bytes())
            .into_iter()
            .map(|s| (s.kind, &text[s.start..s.end]))
            .collect()
    }

    #[test]
    fn kinds() {
        assert_eq!(
            found("see https://x.io/a). in src/app.py: os.path.join(a) --dry-run 1234.5x"),
            vec![
                (Kind::Url, "https://x.io/a"),
                (Kind::Path, "src/app.py"),
                (Kind::Symbol, "os.path.join"),
                (Kind::Flag, "--dry-run"),
                (Kind::Number, "1234"),
            ]
        );
        assert_eq!(found("and/or I/O a/b.c"), vec![(Kind::Path, "a/b.c")]);
        assert_eq!(found("URLs HTTPError mia_li_3668"), {
            vec![(Kind::Symbol, "HTTPError"), (Kind::Symbol, "mia_li_3668")]
        });
        assert_eq!(found("ab1234567 HAT038"), {
            vec![(Kind::Hash, "ab1234567"), (Kind::Id, "HAT038")]
        });
    }
}
