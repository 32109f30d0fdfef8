//! Exact BPE token counts for OpenAI's `o200k_base` and `cl100k_base`.
//!
//! The rank data is bundled by `bpe-openai` at build time (no download, ever); its
//! counts equal tiktoken's `encode_ordinary`.  A content-hash cache makes recounting a
//! text already seen a hash lookup.

use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

use bpe_openai::Tokenizer;
use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_128;

/// The encodings this crate can count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    O200kBase,
    Cl100kBase,
}

impl Encoding {
    /// All encodings, in the order they are listed to users.
    pub const ALL: [Encoding; 2] = [Encoding::O200kBase, Encoding::Cl100kBase];

    /// Parse an encoding name such as `"o200k_base"`.
    pub fn from_name(name: &str) -> Option<Encoding> {
        match name {
            "o200k_base" => Some(Encoding::O200kBase),
            "cl100k_base" => Some(Encoding::Cl100kBase),
            _ => None,
        }
    }

    /// The tiktoken name of this encoding.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    fn tokenizer(self) -> &'static Tokenizer {
        match self {
            Encoding::O200kBase => bpe_openai::o200k_base(),
            Encoding::Cl100kBase => bpe_openai::cl100k_base(),
        }
    }
}

/// Count the tokens of `text` (no special tokens, like tiktoken's `encode_ordinary`).
pub fn count(enc: Encoding, text: &str) -> usize {
    enc.tokenizer().count(text)
}

/// Count many texts on all cores; the result is in input order.
pub fn count_batch(enc: Encoding, texts: &[&str]) -> Vec<usize> {
    texts.par_iter().map(|t| count(enc, t)).collect()
}

/// The token byte strings of an encoding in rank order, so Python's tiktoken can be
/// built from exactly the data we count with.
pub fn ranks(enc: Encoding) -> Vec<Vec<u8>> {
    let bpe = &enc.tokenizer().bpe;
    (0..bpe.num_tokens() as u32)
        .map(|id| bpe.token_bytes(id).to_vec())
        .collect()
}

type CacheMap = HashMap<(Encoding, u128), u32>;

static CACHE: LazyLock<RwLock<CacheMap>> = LazyLock::new(|| RwLock::new(HashMap::new()));

/// Most entries the cache keeps; past that it starts over (a count is cheap to redo).
pub const CACHE_CAPACITY: usize = 1 << 22;

fn key(enc: Encoding, text: &str) -> (Encoding, u128) {
    (enc, xxh3_128(text.as_bytes()))
}

/// Count with the content-hash cache: a text counted before is not counted again.
pub fn count_cached(enc: Encoding, text: &str) -> usize {
    count_batch_cached(enc, &[text])[0]
}

/// Batch count with the content-hash cache; only unseen texts are tokenised, in parallel.
pub fn count_batch_cached(enc: Encoding, texts: &[&str]) -> Vec<usize> {
    let keys: Vec<(Encoding, u128)> = texts.par_iter().map(|t| key(enc, t)).collect();
    let mut out: Vec<Option<usize>> = {
        let cache = CACHE.read().expect("token cache lock");
        keys.iter()
            .map(|k| cache.get(k).map(|&n| n as usize))
            .collect()
    };
    let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
    if !missing.is_empty() {
        let counted: Vec<usize> = missing.par_iter().map(|&i| count(enc, texts[i])).collect();
        let mut cache = CACHE.write().expect("token cache lock");
        if cache.len() + counted.len() > CACHE_CAPACITY {
            cache.clear();
        }
        for (&i, &n) in missing.iter().zip(&counted) {
            cache.insert(keys[i], n as u32);
            out[i] = Some(n);
        }
    }
    out.into_iter()
        .map(|n| n.expect("every text counted"))
        .collect()
}

/// Entries currently held by the cache.
pub fn cache_len() -> usize {
    CACHE.read().expect("token cache lock").len()
}

/// Drop every cached count.
pub fn cache_clear() {
    CACHE.write().expect("token cache lock").clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_known_texts() {
        assert_eq!(count(Encoding::Cl100kBase, ""), 0);
        assert_eq!(count(Encoding::Cl100kBase, "hello world"), 2);
        assert_eq!(count(Encoding::O200kBase, "hello world"), 2);
    }

    #[test]
    fn batch_equals_single() {
        let texts = [
            "a b c",
            "",
            "fn main() { println!(\"hi\"); }",
            "日本語のテキスト",
        ];
        for enc in Encoding::ALL {
            let single: Vec<usize> = texts.iter().map(|t| count(enc, t)).collect();
            assert_eq!(count_batch(enc, &texts), single);
            assert_eq!(count_batch_cached(enc, &texts), single);
            assert_eq!(count_batch_cached(enc, &texts), single);
        }
    }

    #[test]
    fn ranks_are_complete() {
        let r = ranks(Encoding::Cl100kBase);
        assert_eq!(r.len(), 100256);
        assert_eq!(r[0], b"!");
    }

    #[test]
    fn names_round_trip() {
        for enc in Encoding::ALL {
            assert_eq!(Encoding::from_name(enc.name()), Some(enc));
        }
        assert_eq!(Encoding::from_name("gpt2"), None);
    }
}
