//! A hand-written pre-tokeniser with exactly the pieces of `bpe-openai`'s regex split.
//!
//! The regex (a meta-regex of three patterns, the second emulating tiktoken's
//! `\s+(?!\S)` look-ahead) spends more time than the BPE counting on real text.  This
//! module implements the same leftmost-first semantics by hand, one alternative after
//! another in pattern order, so every piece is byte-identical (the tests compare the two
//! on every code point in several contexts and on random text).  The character classes
//! (`\p{L}`, `\p{N}`, `\s`, the case classes of o200k, case-insensitive contraction
//! letters) come from `regex-syntax`, the very tables the regex uses.
//!
//! Patterns mirrored (bpe-openai 0.3.2), alternatives tried in this order:
//! - cl100k: `(?i:'s|'t|'re|'ve|'m|'ll|'d)`, `[^\r\n\p{L}\p{N}]?\p{L}+`, `\p{N}{1,3}`,
//!   ` ?[^\s\p{L}\p{N}]+[\r\n]*`, `\s*[\r\n]+`, `\s+$`, then `\s+\s` minus its last
//!   character, then `\s+`.
//! - o200k: `[^\r\n\p{L}\p{N}]?U*L+C?`, `[^\r\n\p{L}\p{N}]?U+L*C?` (U = Lu Lt Lm Lo M,
//!   L = Ll Lm Lo M, C = the contractions), `\p{N}{1,3}`, ` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
//!   then the same whitespace alternatives.

use std::sync::LazyLock;

use regex_syntax::hir::{Class, HirKind};

const LETTER: u8 = 1;
const NUMBER: u8 = 2;
const SPACE: u8 = 4;
/// o200k's "upper" class: Lu Lt Lm Lo M.
const UPPER: u8 = 8;
/// o200k's "lower" class: Ll Lm Lo M.
const LOWER: u8 = 16;

/// Which pattern to split by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Cl100k,
    O200k,
}

struct Tables {
    /// Class bits of every code point.
    flags: Box<[u8]>,
    /// Case-insensitive variants of the contraction letters s t r e v m l d.
    folds: [Vec<u32>; 8],
}

fn class_ranges(pattern: &str) -> Vec<(u32, u32)> {
    let hir = regex_syntax::Parser::new()
        .parse(pattern)
        .expect("valid class pattern");
    match hir.kind() {
        HirKind::Class(Class::Unicode(cls)) => cls
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        HirKind::Literal(lit) => {
            let c = std::str::from_utf8(&lit.0)
                .expect("utf-8")
                .chars()
                .next()
                .expect("one char");
            vec![(c as u32, c as u32)]
        }
        other => panic!("{pattern} is not a class: {other:?}"),
    }
}

static TABLES: LazyLock<Tables> = LazyLock::new(|| {
    let mut flags = vec![0u8; 0x11_0000].into_boxed_slice();
    for (pattern, bit) in [
        (r"\p{L}", LETTER),
        (r"\p{N}", NUMBER),
        (r"\s", SPACE),
        (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", UPPER),
        (r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", LOWER),
    ] {
        for (lo, hi) in class_ranges(pattern) {
            for f in &mut flags[lo as usize..=hi as usize] {
                *f |= bit;
            }
        }
    }
    let folds = ['s', 't', 'r', 'e', 'v', 'm', 'l', 'd'].map(|c| {
        class_ranges(&format!("(?i:{c})"))
            .into_iter()
            .flat_map(|(lo, hi)| lo..=hi)
            .collect()
    });
    Tables { flags, folds }
});

const S: usize = 0;
const T: usize = 1;
const R: usize = 2;
const E: usize = 3;
const V: usize = 4;
const M: usize = 5;
const L: usize = 6;
const D: usize = 7;

/// Decode the character starting at byte `i` of valid UTF-8: (code point, byte length).
#[inline(always)]
fn decode(b: &[u8], i: usize) -> (u32, usize) {
    let b0 = b[i] as u32;
    if b0 < 0x80 {
        (b0, 1)
    } else if b0 < 0xE0 {
        (((b0 & 0x1F) << 6) | (b[i + 1] as u32 & 0x3F), 2)
    } else if b0 < 0xF0 {
        let c = ((b0 & 0x0F) << 12) | ((b[i + 1] as u32 & 0x3F) << 6) | (b[i + 2] as u32 & 0x3F);
        (c, 3)
    } else {
        let c = ((b0 & 0x07) << 18)
            | ((b[i + 1] as u32 & 0x3F) << 12)
            | ((b[i + 2] as u32 & 0x3F) << 6)
            | (b[i + 3] as u32 & 0x3F);
        (c, 4)
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    t: &'a Tables,
}

impl Scanner<'_> {
    /// (class bits, code point, byte length) of the character at `i`; `None` at the end.
    #[inline(always)]
    fn at(&self, i: usize) -> Option<(u8, u32, usize)> {
        if i >= self.b.len() {
            return None;
        }
        let (c, n) = decode(self.b, i);
        Some((self.t.flags[c as usize], c, n))
    }

    /// End of the maximal run from `i` of characters whose bits intersect `bits`.
    #[inline(always)]
    fn run(&self, mut i: usize, bits: u8) -> usize {
        while let Some((f, _, n)) = self.at(i) {
            if f & bits == 0 {
                break;
            }
            i += n;
        }
        i
    }

    /// End of the maximal run from `i` of characters with none of `bits` (`[^...]`).
    #[inline(always)]
    fn run_not(&self, mut i: usize, bits: u8) -> usize {
        while let Some((f, _, n)) = self.at(i) {
            if f & bits != 0 {
                break;
            }
            i += n;
        }
        i
    }

    fn is(&self, i: usize, letter: usize) -> Option<usize> {
        let (_, c, n) = self.at(i)?;
        self.t.folds[letter].contains(&c).then_some(i + n)
    }

    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `i`: its end.  The alternatives start with
    /// different letters, so at most one can match.
    fn contraction(&self, i: usize) -> Option<usize> {
        if self.b.get(i) != Some(&b'\'') {
            return None;
        }
        let i = i + 1;
        for one in [S, T, M, D] {
            if let Some(end) = self.is(i, one) {
                return Some(end);
            }
        }
        for (first, second) in [(R, E), (V, E), (L, L)] {
            if let Some(mid) = self.is(i, first) {
                return self.is(mid, second);
            }
        }
        None
    }

    /// The optional leading `[^\r\n\p{L}\p{N}]` at `i`: where the rest starts if taken.
    #[inline(always)]
    fn prefix(&self, i: usize) -> Option<usize> {
        let (f, c, n) = self.at(i)?;
        (f & (LETTER | NUMBER) == 0 && c != u32::from(b'\r') && c != u32::from(b'\n'))
            .then_some(i + n)
    }

    /// `U*L+` at `i` (o200k): its end.  Greedy `U*` backs off to the last L character
    /// inside its run when the character after the run is not L.
    fn upper_star_lower_plus(&self, i: usize) -> Option<usize> {
        let mut j = i;
        let mut last_lower_end = None;
        while let Some((f, _, n)) = self.at(j) {
            if f & UPPER == 0 {
                break;
            }
            if f & LOWER != 0 {
                last_lower_end = Some(j + n);
            }
            j += n;
        }
        match self.at(j) {
            Some((f, _, _)) if f & LOWER != 0 => Some(self.run(j, LOWER)),
            _ => last_lower_end,
        }
    }

    /// `U+L*` at `i` (o200k): its end.
    fn upper_plus_lower_star(&self, i: usize) -> Option<usize> {
        let j = self.run(i, UPPER);
        (j > i).then(|| self.run(j, LOWER))
    }

    fn with_contraction(&self, end: usize) -> usize {
        self.contraction(end).unwrap_or(end)
    }

    /// The letter alternatives of o200k, prefix taken first, then without it.
    fn o200k_word(&self, i: usize) -> Option<usize> {
        let pre = self.prefix(i);
        // Both rules need a cased-class character where they start; most punctuation
        // and space pieces leave here without running them.
        let cased = |j: usize| matches!(self.at(j), Some((f, _, _)) if f & (UPPER | LOWER) != 0);
        if !cased(i) && !pre.is_some_and(cased) {
            return None;
        }
        let rules: [fn(&Self, usize) -> Option<usize>; 2] =
            [Self::upper_star_lower_plus, Self::upper_plus_lower_star];
        for rule in rules {
            if let Some(end) = pre.and_then(|p| rule(self, p)).or_else(|| rule(self, i)) {
                return Some(self.with_contraction(end));
            }
        }
        None
    }

    /// `[^\r\n\p{L}\p{N}]?\p{L}+` (cl100k): its end.
    fn cl100k_word(&self, i: usize) -> Option<usize> {
        let from = match self.prefix(i) {
            Some(p) if matches!(self.at(p), Some((f, _, _)) if f & LETTER != 0) => p,
            _ => i,
        };
        let end = self.run(from, LETTER);
        (end > from).then_some(end)
    }

    /// `\p{N}{1,3}`: its end.
    fn digits(&self, mut i: usize) -> Option<usize> {
        let start = i;
        for _ in 0..3 {
            match self.at(i) {
                Some((f, _, n)) if f & NUMBER != 0 => i += n,
                _ => break,
            }
        }
        (i > start).then_some(i)
    }

    /// ` ?[^\s\p{L}\p{N}]+` followed by a run of `tail` bytes: its end.
    fn punctuation(&self, i: usize, tail: &[u8]) -> Option<usize> {
        let other = LETTER | NUMBER | SPACE;
        let starts_other = |j: usize| matches!(self.at(j), Some((f, _, _)) if f & other == 0);
        let from = if self.b.get(i) == Some(&b' ') && starts_other(i + 1) {
            i + 1
        } else if starts_other(i) {
            i
        } else {
            return None;
        };
        let mut end = self.run_not(from, other);
        while end < self.b.len() && tail.contains(&self.b[end]) {
            end += 1;
        }
        Some(end)
    }

    /// The whitespace alternatives at `i`, which holds a `\s` character: `\s*[\r\n]+`,
    /// `\s+$`, `\s+\s` without its last character, `\s+`.
    fn whitespace(&self, i: usize) -> usize {
        let mut j = i;
        let mut last_newline_end = None;
        let mut last_start = i;
        while let Some((f, c, n)) = self.at(j) {
            if f & SPACE == 0 {
                break;
            }
            if c == u32::from(b'\r') || c == u32::from(b'\n') {
                last_newline_end = Some(j + n);
            }
            last_start = j;
            j += n;
        }
        if j == i {
            // Unreachable: every character is a letter, number, space or other, and the
            // alternatives above take the other three.  Still make progress.
            return i + self.at(i).map_or(1, |(_, _, n)| n);
        }
        if let Some(end) = last_newline_end {
            end
        } else if j == self.b.len() || last_start == i {
            j
        } else {
            last_start
        }
    }

    /// End of the piece starting at `i` (< len).
    fn next_end(&self, i: usize, pattern: Pattern) -> usize {
        let word = match pattern {
            Pattern::Cl100k => self.contraction(i).or_else(|| self.cl100k_word(i)),
            Pattern::O200k => self.o200k_word(i),
        };
        if let Some(end) = word {
            return end;
        }
        if let Some(end) = self.digits(i) {
            return end;
        }
        let tail: &[u8] = match pattern {
            Pattern::Cl100k => b"\r\n",
            Pattern::O200k => b"\r\n/",
        };
        if let Some(end) = self.punctuation(i, tail) {
            return end;
        }
        self.whitespace(i)
    }
}

/// The pieces of `text`, in order; they concatenate to `text`.
pub fn split(text: &str, pattern: Pattern) -> impl Iterator<Item = &str> {
    let scanner = Scanner {
        b: text.as_bytes(),
        t: &TABLES,
    };
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= text.len() {
            return None;
        }
        let end = scanner.next_end(pos, pattern);
        let piece = &text[pos..end];
        pos = end;
        Some(piece)
    })
}
