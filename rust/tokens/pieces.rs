//! A per-thread cache from a pre-tokenised piece's exact bytes to its BPE token count.
//!
//! On real text ~97 % of pieces were seen shortly before (words, indentation, JSON
//! punctuation), and counting a short piece from scratch costs more than the lookup
//! (the BPE encoder allocates per call).  The cache is direct-mapped: a fixed array of
//! slots, each holding one piece of at most [`MAX_PIECE`] bytes, its length and its
//! count; a new piece overwrites whatever shared its slot.  It is bounded by
//! construction, needs no lock (one per thread and encoding), and is exact: a hit
//! requires the whole piece to be byte-equal, and the stored count is the BPE count.

use std::cell::RefCell;

use bpe::byte_pair_encoding::BytePairEncoding;

/// Longest piece the cache holds; longer pieces (rare outside adversarial text) are
/// counted directly.
pub const MAX_PIECE: usize = 24;
const SLOT_BITS: u32 = 13;
const SLOTS: usize = 1 << SLOT_BITS;

/// One slot: the piece zero-padded to 24 bytes, its length (`u32::MAX` = empty) and
/// count.  32 bytes, so a cache is 256 KiB.
#[derive(Clone, Copy)]
struct Slot {
    key: [u64; 3],
    len: u32,
    count: u32,
}

const EMPTY: Slot = Slot {
    key: [0; 3],
    len: u32::MAX,
    count: 0,
};

/// The piece cache of one thread for one encoding.
pub struct PieceCache {
    slots: Box<[Slot]>,
}

impl Default for PieceCache {
    fn default() -> Self {
        PieceCache {
            slots: vec![EMPTY; SLOTS].into_boxed_slice(),
        }
    }
}

impl PieceCache {
    /// The BPE count of `piece`, from the cache when this exact piece is in it.
    #[inline]
    pub fn count(&mut self, bpe: &BytePairEncoding, piece: &[u8]) -> usize {
        if piece.len() > MAX_PIECE {
            return bpe.count(piece);
        }
        let mut buf = [0u8; MAX_PIECE];
        buf[..piece.len()].copy_from_slice(piece);
        let word = |i: usize| u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().expect("8"));
        let key = [word(0), word(1), word(2)];
        let len = piece.len() as u32;
        let slot = &mut self.slots[slot_of(&key, len)];
        if slot.len == len && slot.key == key {
            return slot.count as usize;
        }
        let n = bpe.count(piece);
        *slot = Slot {
            key,
            len,
            count: n as u32,
        };
        n
    }
}

/// Multiply-rotate mixing of the three words and the length; the top bits index.
#[inline]
fn slot_of(key: &[u64; 3], len: u32) -> usize {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (key[0] ^ u64::from(len)).wrapping_mul(K);
    h = (h.rotate_left(23) ^ key[1]).wrapping_mul(K);
    h = (h.rotate_left(23) ^ key[2]).wrapping_mul(K);
    (h >> (64 - SLOT_BITS)) as usize
}

thread_local! {
    static CACHES: RefCell<[PieceCache; 2]> = RefCell::new(Default::default());
}

/// Run `f` with this thread's piece cache for encoding number `enc`.
pub fn with_cache<R>(enc: usize, f: impl FnOnce(&mut PieceCache) -> R) -> R {
    CACHES.with(|caches| f(&mut caches.borrow_mut()[enc]))
}
