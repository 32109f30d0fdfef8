//! Tests of the plain crate (no Python).  Expected counts are derived by hand: the text
//! is split into pre-tokenisation pieces written out below, every piece is checked to be
//! a single token of the vocabulary (a token's bytes encode to that one token), so the
//! count is the number of pieces.

use std::collections::HashSet;
use std::sync::Mutex;

use super::*;
use crate::fuzzing::Rng;

/// Tests that read the global content-cache counters must not interleave.
static CACHE_LOCK: Mutex<()> = Mutex::new(());

fn vocab(enc: Encoding) -> HashSet<Vec<u8>> {
    ranks(enc).into_iter().collect()
}

/// (text, its pieces by the pre-tokenisation pattern of both encodings).
const SPLIT_BY_HAND: &[(&str, &[&str])] = &[
    ("hello world", &["hello", " world"]),
    ("Hello, world!", &["Hello", ",", " world", "!"]),
    ("a\n\nb", &["a", "\n\n", "b"]),
    ("x = 1", &["x", " =", " ", "1"]),
    ("    return", &["   ", " return"]),
    ("  \n", &["  \n"]),
    ("(); ", &["();", " "]),
];

#[test]
fn counts_equal_pieces_that_are_tokens() {
    for enc in Encoding::ALL {
        let vocab = vocab(enc);
        for (text, pieces) in SPLIT_BY_HAND {
            assert_eq!(pieces.concat(), *text);
            for p in *pieces {
                assert!(vocab.contains(p.as_bytes()), "{p:?} is not one token");
            }
            assert_eq!(count(enc, text), pieces.len(), "{enc:?} {text:?}");
        }
    }
}

#[test]
fn digits_go_in_threes() {
    // `\p{N}{1,3}` cuts a digit run into groups of three, each a token.
    for enc in Encoding::ALL {
        let vocab = vocab(enc);
        for n in 0..1000 {
            let s = format!("{n:03}");
            assert!(vocab.contains(s.as_bytes()), "{s} is not one token");
        }
        let digits: String = (0..3001)
            .map(|i| char::from(b'0' + (i % 10) as u8))
            .collect();
        assert_eq!(count(enc, &digits), 1001);
    }
}

#[test]
fn empty_and_whitespace() {
    for enc in Encoding::ALL {
        assert_eq!(count(enc, ""), 0);
        assert_eq!(count(enc, "\n"), 1);
        assert_eq!(count(enc, " "), 1);
        assert_eq!(count_batch(enc, &[]), Vec::<usize>::new());
        assert_eq!(count_batch(enc, &["", ""]), vec![0, 0]);
    }
}

#[test]
fn unknown_bytes_fall_back_to_byte_tokens() {
    // Every single byte is a token, so a piece never counts more than its length.
    for enc in Encoding::ALL {
        let vocab = vocab(enc);
        for b in 0..=255u8 {
            assert!(vocab.contains(&vec![b]), "byte {b} is not a token");
        }
        for text in ["\u{10FFFF}", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "e\u{301}\u{308}\u{20dd}"] {
            let n = count(enc, text);
            assert!(n >= 1 && n <= text.len(), "{text:?} counted {n}");
        }
    }
}

#[test]
fn piece_cache_is_exact_under_eviction() {
    // Far more distinct pieces than slots: every count must still be the BPE count.
    let mut cache = PieceCache::default();
    for enc in Encoding::ALL {
        let bpe = enc.bpe();
        for round in 0..2 {
            for i in 0..40_000u32 {
                let piece = format!(" w{}x{}", i.wrapping_mul(2_654_435_761), round);
                let bytes = piece.as_bytes();
                assert_eq!(cache.count(bpe, bytes), bpe.count(bytes), "{piece:?}");
            }
        }
        let long = "abcdefghij".repeat(5);
        assert_eq!(
            cache.count(bpe, long.as_bytes()),
            bpe.count(long.as_bytes())
        );
    }
}

#[test]
fn repeated_character_megabyte() {
    for enc in Encoding::ALL {
        let text = "a".repeat(1 << 20);
        let n = count(enc, &text);
        // One piece of a's: more than one token, far fewer than bytes.
        assert!(n > 1 && n < text.len() / 2, "{n}");
        assert_eq!(count_batch(enc, &[&text, "a"]), vec![n, 1]);
    }
}

#[test]
fn batch_equals_single() {
    let texts = [
        "a b c",
        "",
        "fn main() { println!(\"hi\"); }",
        "日本語のテキスト",
        "{\"role\": \"user\", \"content\": [1, 2, 3]}\n",
        "  \t\n\n  x  ",
    ];
    let _guard = CACHE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    for enc in Encoding::ALL {
        let single: Vec<usize> = texts.iter().map(|t| count(enc, t)).collect();
        assert_eq!(count_batch(enc, &texts), single);
        assert_eq!(count_batch_cached(enc, &texts), single);
        assert_eq!(count_batch_cached(enc, &texts), single);
        let one_by_one: Vec<usize> = texts.iter().map(|t| count_cached(enc, t)).collect();
        assert_eq!(one_by_one, single);
    }
}

#[test]
fn cache_serves_recounts() {
    let _guard = CACHE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    cache_clear();
    assert_eq!(cache_stats().entries, 0);
    let text = "a text counted twice, the second time from the cache";
    let n = count_cached(Encoding::O200kBase, text);
    let after_first = cache_stats();
    assert_eq!((after_first.hits, after_first.misses), (0, 1));
    assert_eq!(after_first.entries, 1);
    assert_eq!(count_cached(Encoding::O200kBase, text), n);
    assert_eq!(cache_stats().hits, 1);
    // The same text under the other encoding is a different entry.
    count_cached(Encoding::Cl100kBase, text);
    assert_eq!(cache_stats().entries, 2);
    // A batch: one seen text, one new (twice); only the unseen one is counted.
    let other = "another text";
    let counts = count_batch_cached(Encoding::O200kBase, &[text, other, other]);
    assert_eq!(
        counts,
        vec![n, count(Encoding::O200kBase, other), counts[1]]
    );
    let stats = cache_stats();
    assert_eq!((stats.hits, stats.misses), (2, 4));
    assert_eq!(stats.entries, 3);
    cache_clear();
    let cleared = cache_stats();
    assert_eq!((cleared.entries, cleared.hits, cleared.misses), (0, 0, 0));
    assert_eq!(cleared.capacity, CACHE_CAPACITY);
}

#[test]
fn cache_is_bounded() {
    let _guard = CACHE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    cache_clear();
    set_cache_capacity(100);
    let texts: Vec<String> = (0..250).map(|i| format!("text number {i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for chunk in refs.chunks(30) {
        let counts = count_batch_cached(Encoding::O200kBase, chunk);
        assert_eq!(counts, count_batch(Encoding::O200kBase, chunk));
        assert!(cache_stats().entries <= 100);
    }
    // One batch larger than the whole cache.
    count_batch_cached(Encoding::Cl100kBase, &refs);
    assert_eq!(cache_stats().entries, 100);
    for t in &refs[..10] {
        count_cached(Encoding::Cl100kBase, t);
        assert!(cache_stats().entries <= 100);
    }
    set_cache_capacity(CACHE_CAPACITY);
    cache_clear();
}

#[test]
fn cache_is_thread_safe() {
    let _guard = CACHE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    cache_clear();
    let texts: Vec<String> = (0..400)
        .map(|i| format!("shared text {}", i % 150))
        .collect();
    let expected: Vec<usize> = texts
        .iter()
        .map(|t| count(Encoding::O200kBase, t))
        .collect();
    std::thread::scope(|s| {
        for worker in 0..4 {
            let (texts, expected) = (&texts, &expected);
            s.spawn(move || {
                for round in 0..3 {
                    for (i, t) in texts.iter().enumerate().skip(worker + round) {
                        assert_eq!(count_cached(Encoding::O200kBase, t), expected[i]);
                    }
                    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                    assert_eq!(&count_batch_cached(Encoding::O200kBase, &refs), expected);
                }
            });
        }
    });
    let stats = cache_stats();
    assert_eq!(stats.entries, 150);
    assert!(stats.hits > stats.misses);
    cache_clear();
}

#[test]
fn ranks_are_complete() {
    let r = ranks(Encoding::Cl100kBase);
    assert_eq!(r.len(), 100256);
    assert_eq!(r[0], b"!");
    assert_eq!(ranks(Encoding::O200kBase).len(), 199998);
}

#[test]
fn names_round_trip() {
    for enc in Encoding::ALL {
        assert_eq!(Encoding::from_name(enc.name()), Some(enc));
    }
    assert_eq!(Encoding::from_name("gpt2"), None);
}

/// bpe-openai's tokenizer of an encoding: its regex split and its dictionary.
fn bpe_openai(enc: Encoding) -> &'static bpe_openai::Tokenizer {
    match enc {
        Encoding::O200kBase => bpe_openai::o200k_base(),
        Encoding::Cl100kBase => bpe_openai::cl100k_base(),
    }
}

/// The regex split of bpe-openai, which the hand-written pre-tokeniser must equal.
fn regex_pieces(enc: Encoding, text: &str) -> Vec<&str> {
    bpe_openai(enc).split(text).collect()
}

#[test]
fn the_flat_dictionaries_are_bpe_openais() {
    // Every token's bytes, and the counts of texts that take every code path of the
    // encoder (merges, long pieces, bytes outside UTF-8 words), equal bpe-openai's.
    let (a, ab) = ("a".repeat(5000), "ab".repeat(3000));
    let texts: [&str; 6] = [
        "Hello, world! 日本語のテキスト 🙂🙂",
        "def f(x):\n    return x * 2\n",
        &a,
        &ab,
        "   \n\n\t\t  x  ",
        "ünïcödé ЖЖЖ ٣٣٣ 12345678901234567890",
    ];
    for enc in Encoding::ALL {
        let (ours, theirs) = (enc.bpe(), &bpe_openai(enc).bpe);
        assert_eq!(ours.num_tokens(), theirs.num_tokens());
        for id in 0..ours.num_tokens() as u32 {
            assert_eq!(
                ours.token_bytes(id),
                theirs.token_bytes(id),
                "{enc:?} token {id}"
            );
        }
        for text in texts {
            for piece in pieces(enc, text) {
                let b = piece.as_bytes();
                assert_eq!(ours.count(b), theirs.count(b), "{enc:?} {piece:?}");
            }
            assert_eq!(
                count(enc, text),
                bpe_openai(enc).count(text),
                "{enc:?} {text:?}"
            );
        }
    }
}

#[test]
fn the_flat_form_refuses_what_it_cannot_read() {
    let bytes = flat::to_bytes(&(7u32, vec![1u8, 2, 3])).expect("writable");
    let back: (u32, Vec<u8>) = flat::from_bytes(&bytes).expect("readable");
    assert_eq!(back, (7, vec![1, 2, 3]));
    assert!(flat::from_bytes::<(u32, Vec<u8>)>(&bytes[..bytes.len() - 1]).is_err());
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(flat::from_bytes::<(u32, Vec<u8>)>(&longer).is_err());
    assert!(flat::to_bytes(&Some(1u8)).is_err());
}

fn assert_same_pieces(enc: Encoding, text: &str) {
    let ours: Vec<&str> = pieces(enc, text).collect();
    assert_eq!(ours, regex_pieces(enc, text), "{enc:?} {text:?}");
}

#[test]
fn pieces_equal_the_regex_for_every_code_point() {
    // Each code point next to letters of each case, digits, spaces, newlines,
    // apostrophes, marks and itself, and at the start and end of the text.  Planes 4-13
    // are unassigned and 15-16 private use (one class each): every 61st there.
    let sampled = |c: &u32| !(0x4_0000..0xE_0000).contains(c) && *c < 0xF_0000 || c % 61 == 0;
    for enc in Encoding::ALL {
        for c in (0..=0x10FFFFu32).filter(sampled).filter_map(char::from_u32) {
            let text =
                format!("{c}a{c} {c}A{c}b'{c}{c}{c}1{c}\n{c}\u{301} {c}'s{c}\r\n{c}  {c}ǅ{c}/{c}");
            assert_same_pieces(enc, &text);
        }
    }
}

const ALPHABET: &[&str] = &[
    " ",
    " ",
    "  ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\u{b}",
    "\u{c}",
    "\u{85}",
    "\u{a0}",
    "\u{3000}",
    "\u{2028}",
    "\u{200b}",
    "a",
    "b",
    "z",
    "A",
    "Z",
    "s",
    "S",
    "t",
    "re",
    "RE",
    "ve",
    "m",
    "ll",
    "LL",
    "d",
    "D",
    "ſ",
    "'",
    "'",
    "\"",
    "0",
    "7",
    "42",
    "١",
    "½",
    "Ⅻ",
    ".",
    ",",
    "!",
    "?",
    "/",
    "//",
    "\\",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "<",
    ">",
    "=",
    "-",
    "_",
    "#",
    "@",
    "*",
    "&",
    "%",
    "`",
    "~",
    "|",
    "日",
    "本",
    "語",
    "한",
    "ア",
    "ｱ",
    "中文",
    "é",
    "e\u{301}",
    "\u{301}",
    "\u{308}",
    "\u{20dd}",
    "न",
    "ि",
    "ǅ",
    "ǈ",
    "ᾈ",
    "Σ",
    "ς",
    "Ж",
    "ж",
    "ʰ",
    "ㅤ",
    "😀",
    "👍🏽",
    "👨\u{200d}👩",
    "🇯🇵",
    "\u{10FFFF}",
    "\u{e000}",
];

#[test]
fn pieces_equal_the_regex_on_random_text() {
    // CTXRULES_FUZZ_ROUNDS=5000000 for a deeper run by hand (in --release).
    let rounds = std::env::var("CTXRULES_FUZZ_ROUNDS").map_or(60_000, |v| v.parse().expect("int"));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..rounds {
        let len = rng.below(32);
        let mut text = String::new();
        for _ in 0..len {
            if rng.below(8) == 0 {
                // Any code point at all.
                if let Some(c) = char::from_u32(rng.below(0x11_0000) as u32) {
                    text.push(c);
                }
            } else {
                text.push_str(ALPHABET[rng.below(ALPHABET.len())]);
            }
        }
        for enc in Encoding::ALL {
            assert_same_pieces(enc, &text);
        }
    }
}

#[test]
fn pieces_equal_the_regex_on_the_corpus() {
    // The recorded sessions the Python tests read too (a copy kept in the repository).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let mut stack = vec![root];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                for enc in Encoding::ALL {
                    assert_same_pieces(enc, &text);
                }
                seen += 1;
            }
        }
    }
    assert!(
        seen >= 10,
        "expected the corpus under tests/data/corpus, read {seen} files"
    );
}
