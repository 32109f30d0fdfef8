//! The prepared items of recent commits, keyed by their exact MessagePack bytes.
//!
//! Consecutive commits of a session share almost all their items, and an item's bytes
//! determine everything the core reads from it, so a prepared item (decoded, strings
//! escaped, tool arguments classified) is looked up by those bytes and reused.  The key
//! is the bytes themselves (an entry is found through a 64-bit hash, then the bytes are
//! compared: its batch keeps them), so a hit is never a different item, whatever the
//! hash does.  The cache
//! holds at most `capacity` bytes (keys and prepared items); when an insert would pass
//! that it starts over, like the token cache: preparing an item again is cheap, and
//! the working set of a session is one commit.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

use xxhash_rust::xxh3::xxh3_64;

use super::Shared;

/// Default bound of the cache (and of the identity table of the Python bindings), in
/// bytes: the 10k-item commit of the render benchmark takes about 12 MB here, so a
/// session of ~100k items fits.
pub const CAPACITY: usize = 128 << 20;

/// A hasher that passes a precomputed 64-bit hash through.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn write(&mut self, bytes: &[u8]) {
        // Not used (keys are u64 hashes); hashing anything else still works.
        self.0 = xxh3_64(bytes) ^ self.0.rotate_left(5);
    }

    fn write_u64(&mut self, h: u64) {
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[derive(Default)]
struct Cache {
    map: HashMap<u64, Shared, BuildHasherDefault<Prehashed>>,
    bytes: usize,
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(Cache::default()));
static LIMIT: AtomicUsize = AtomicUsize::new(CAPACITY);
static HITS: AtomicU64 = AtomicU64::new(0);
static MISSES: AtomicU64 = AtomicU64::new(0);

fn cache() -> MutexGuard<'static, Cache> {
    // A panic while holding the lock leaves the map consistent (entries are inserted
    // whole), so a poisoned lock is still usable.
    CACHE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The hash an item's bytes are found by.
pub fn hash(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

/// The prepared item of exactly these bytes (one item's MessagePack map), if cached.
pub fn lookup(hash: u64, bytes: &[u8]) -> Option<Shared> {
    let hit = match cache().map.get(&hash) {
        Some(s) if s.key() == bytes => Some(s.clone()),
        _ => None,
    };
    let counter = if hit.is_some() { &HITS } else { &MISSES };
    counter.fetch_add(1, Ordering::Relaxed);
    hit
}

/// Remember freshly prepared items, each under the hash of its bytes.
pub fn insert(fresh: Vec<(u64, Shared)>) {
    if fresh.is_empty() {
        return;
    }
    let limit = LIMIT.load(Ordering::Relaxed);
    // Entries dropped here are released after the lock (freeing a batch takes a while).
    let mut dropped: Vec<Shared> = Vec::new();
    let mut c = cache();
    for (h, item) in fresh {
        let cost = item.size();
        if cost > limit {
            continue;
        }
        if c.bytes + cost > limit {
            dropped.extend(c.map.drain().map(|(_, s)| s));
            c.bytes = 0;
        }
        c.bytes += cost;
        if let Some(old) = c.map.insert(h, item) {
            c.bytes -= old.size();
            dropped.push(old);
        }
    }
    drop(c);
    drop(dropped);
}

/// What the cache holds and how it was used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub items: usize,
    pub bytes: usize,
    pub hits: u64,
    pub misses: u64,
    pub capacity: usize,
}

/// The cache's current size, hit and miss counts, and bound.
pub fn stats() -> Stats {
    let c = cache();
    Stats {
        items: c.map.len(),
        bytes: c.bytes,
        hits: HITS.load(Ordering::Relaxed),
        misses: MISSES.load(Ordering::Relaxed),
        capacity: LIMIT.load(Ordering::Relaxed),
    }
}

/// Drop every entry and reset the counters.
pub fn clear() {
    let mut c = cache();
    let dropped = std::mem::take(&mut c.map);
    c.bytes = 0;
    drop(c);
    drop(dropped);
    HITS.store(0, Ordering::Relaxed);
    MISSES.store(0, Ordering::Relaxed);
}

/// Bound the cache to `bytes` (0 turns caching off); applies from the next insert.
pub fn set_capacity(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
}
