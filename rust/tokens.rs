//! Exact BPE token counts for OpenAI's `o200k_base` and `cl100k_base`.
//!
//! The rank data is bpe-openai's, bundled at build time (no download, ever; `build.rs`
//! writes it in the flat form of `flat.rs`, read at first use in a fraction of the time
//! bpe-openai's own form takes).  A text is split into pieces by the encoding's
//! pre-tokenisation pattern (`split`, a hand-written equivalent of bpe-openai's regex
//! split, about twice as fast; the regex is never built) and each piece is counted by
//! the `bpe` crate's byte-pair encoder, exactly like tiktoken's `encode_ordinary`.
//!
//! Two caches make this fast without changing a single count:
//! - a per-thread *piece* cache: pieces (words, punctuation runs, whitespace runs)
//!   repeat a lot, so the BPE count of a short piece is remembered by its exact bytes;
//! - a process-wide *content* cache keyed by the xxh3-128 hash of a whole text, so a
//!   text counted before is never counted again (what makes re-rendering cheap).  Two
//!   different texts would have to collide in 128 bits to share an entry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{LazyLock, RwLock};

use bpe::byte_pair_encoding::BytePairEncoding;
use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_128;

mod flat;
mod pieces;
mod split;

use pieces::PieceCache;
pub use split::Pattern;

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

    /// The encoding's place in `ALL`.
    pub fn index(self) -> usize {
        match self {
            Encoding::O200kBase => 0,
            Encoding::Cl100kBase => 1,
        }
    }

    /// The pre-tokenisation pattern of this encoding.
    pub fn pattern(self) -> Pattern {
        match self {
            Encoding::O200kBase => Pattern::O200k,
            Encoding::Cl100kBase => Pattern::Cl100k,
        }
    }

    /// The byte-pair encoder of this encoding, read on first use.
    fn bpe(self) -> &'static BytePairEncoding {
        match self {
            Encoding::O200kBase => &O200K_BASE,
            Encoding::Cl100kBase => &CL100K_BASE,
        }
    }
}

fn read_dictionary(name: &str, bytes: &[u8]) -> BytePairEncoding {
    flat::from_bytes(bytes).unwrap_or_else(|e| panic!("{name}: the bundled dictionary: {e}"))
}

static O200K_BASE: LazyLock<BytePairEncoding> = LazyLock::new(|| {
    read_dictionary(
        "o200k_base",
        include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.flat")),
    )
});

static CL100K_BASE: LazyLock<BytePairEncoding> = LazyLock::new(|| {
    read_dictionary(
        "cl100k_base",
        include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.flat")),
    )
});

/// Count the tokens of `text` (no special tokens, like tiktoken's `encode_ordinary`).
///
/// Runs on the calling thread; linear in the length of `text`, including adversarial
/// input such as a megabyte of one repeated character.
pub fn count(enc: Encoding, text: &str) -> usize {
    let bpe = enc.bpe();
    pieces::with_cache(enc.index(), |cache: &mut PieceCache| {
        split::split(text, enc.pattern())
            .map(|piece| cache.count(bpe, piece.as_bytes()))
            .sum()
    })
}

/// The pre-tokenisation pieces of `text` (they concatenate to `text`).
pub fn pieces(enc: Encoding, text: &str) -> impl Iterator<Item = &str> {
    split::split(text, enc.pattern())
}

/// Below this many bytes a batch is counted on the calling thread: waking the pool's
/// threads costs more than counting (tens of microseconds on a quiet machine,
/// milliseconds when other processes hold the cores), and most batches are a commit's
/// few new items.
const PARALLEL_BYTES: usize = 64 << 10;

/// Below this many bytes the texts of a batch are hashed on the calling thread.
const PARALLEL_HASH_BYTES: usize = 4 << 20;

fn bytes_of<'t>(texts: impl IntoIterator<Item = &'t &'t str>) -> usize {
    texts.into_iter().map(|t| t.len()).sum()
}

/// Count many texts on all cores (rayon's global pool) when they are many bytes, else
/// on this thread; the result is in input order.
pub fn count_batch(enc: Encoding, texts: &[&str]) -> Vec<usize> {
    if bytes_of(texts) < PARALLEL_BYTES {
        return texts.iter().map(|t| count(enc, t)).collect();
    }
    texts.par_iter().map(|t| count(enc, t)).collect()
}

/// The token byte strings of an encoding in rank order, so Python's tiktoken can be
/// built from exactly the data we count with.
pub fn ranks(enc: Encoding) -> Vec<Vec<u8>> {
    let bpe = enc.bpe();
    (0..bpe.num_tokens() as u32)
        .map(|id| bpe.token_bytes(id).to_vec())
        .collect()
}

type Key = (Encoding, u128);

static CACHE: LazyLock<RwLock<HashMap<Key, u32>>> = LazyLock::new(|| RwLock::new(HashMap::new()));
static HITS: AtomicU64 = AtomicU64::new(0);
static MISSES: AtomicU64 = AtomicU64::new(0);

/// Default for the most texts the content cache remembers (~40 MB at most).  When an
/// insert would exceed the capacity the cache starts over: a count is cheap to redo, an
/// unbounded map is not.
pub const CACHE_CAPACITY: usize = 1 << 20;

static CAPACITY: AtomicUsize = AtomicUsize::new(CACHE_CAPACITY);

/// Set the content cache's capacity (at least 1); a smaller one takes effect at the
/// next insert.
pub fn set_cache_capacity(texts: usize) {
    CAPACITY.store(texts.max(1), Ordering::Relaxed);
}

/// A snapshot of the content cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheStats {
    /// Texts currently remembered.
    pub entries: usize,
    /// Lookups answered from the cache since start (or the last [`cache_clear`]).
    pub hits: u64,
    /// Lookups that had to count the text.
    pub misses: u64,
    /// The capacity in texts ([`CACHE_CAPACITY`] unless [`set_cache_capacity`] changed it).
    pub capacity: usize,
}

fn key(enc: Encoding, text: &str) -> Key {
    (enc, xxh3_128(text.as_bytes()))
}

fn read_cache() -> std::sync::RwLockReadGuard<'static, HashMap<Key, u32>> {
    // A panic while holding the lock cannot leave the map inconsistent (inserts are
    // single calls), so a poisoned lock is still usable.
    CACHE.read().unwrap_or_else(|e| e.into_inner())
}

fn write_cache() -> std::sync::RwLockWriteGuard<'static, HashMap<Key, u32>> {
    CACHE.write().unwrap_or_else(|e| e.into_inner())
}

fn remember(new: impl ExactSizeIterator<Item = (Key, usize)>) {
    let mut cache = write_cache();
    let capacity = CAPACITY.load(Ordering::Relaxed);
    if cache.len() + new.len() > capacity {
        cache.clear();
    }
    // A batch larger than the whole cache keeps only its first `capacity` texts.
    for (k, n) in new.take(capacity) {
        cache.insert(k, n as u32);
    }
}

/// Count with the content cache: a text counted before is a hash lookup.
pub fn count_cached(enc: Encoding, text: &str) -> usize {
    let k = key(enc, text);
    if let Some(&n) = read_cache().get(&k) {
        HITS.fetch_add(1, Ordering::Relaxed);
        return n as usize;
    }
    MISSES.fetch_add(1, Ordering::Relaxed);
    let n = count(enc, text);
    remember(std::iter::once((k, n)));
    n
}

/// Batch count with the content cache; only unseen texts are tokenised, in parallel when
/// they are many bytes (see `count_batch`).
pub fn count_batch_cached(enc: Encoding, texts: &[&str]) -> Vec<usize> {
    let keys: Vec<Key> = if bytes_of(texts) < PARALLEL_HASH_BYTES {
        texts.iter().map(|t| key(enc, t)).collect()
    } else {
        texts.par_iter().map(|t| key(enc, t)).collect()
    };
    let mut out: Vec<Option<usize>> = {
        let cache = read_cache();
        keys.iter()
            .map(|k| cache.get(k).map(|&n| n as usize))
            .collect()
    };
    let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
    HITS.fetch_add((texts.len() - missing.len()) as u64, Ordering::Relaxed);
    MISSES.fetch_add(missing.len() as u64, Ordering::Relaxed);
    if !missing.is_empty() {
        let missing_texts: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
        let counted = count_batch(enc, &missing_texts);
        remember(missing.iter().zip(&counted).map(|(&i, &n)| (keys[i], n)));
        for (&i, &n) in missing.iter().zip(&counted) {
            out[i] = Some(n);
        }
    }
    out.into_iter()
        .map(|n| n.expect("every text counted"))
        .collect()
}

/// Texts currently held by the content cache.
pub fn cache_len() -> usize {
    read_cache().len()
}

/// The content cache's size and hit/miss counters.
pub fn cache_stats() -> CacheStats {
    CacheStats {
        entries: cache_len(),
        hits: HITS.load(Ordering::Relaxed),
        misses: MISSES.load(Ordering::Relaxed),
        capacity: CAPACITY.load(Ordering::Relaxed),
    }
}

/// Drop every cached count and reset the hit/miss counters.
pub fn cache_clear() {
    let mut cache = write_cache();
    cache.clear();
    HITS.store(0, Ordering::Relaxed);
    MISSES.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests;
