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

/// Something a bounded map counts the bytes of.
pub trait Weighed {
    /// Bytes this value holds.
    fn weight(&self) -> usize;
}

impl Weighed for Shared {
    fn weight(&self) -> usize {
        self.size()
    }
}

/// A map bounded by the bytes its values hold: when an insert would pass the bound it
/// starts over (as the token cache does).  Values it lets go are handed back, for the
/// caller to drop after releasing the lock that guards the map (dropping may free a
/// batch, or a Python object).
pub struct Bounded<K, V, S> {
    map: HashMap<K, V, S>,
    bytes: usize,
}

impl<K, V, S: Default> Default for Bounded<K, V, S> {
    fn default() -> Self {
        Bounded {
            map: HashMap::default(),
            bytes: 0,
        }
    }
}

impl<K: std::hash::Hash + Eq, V: Weighed, S: std::hash::BuildHasher> Bounded<K, V, S> {
    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key)
    }

    /// Insert `value` under `key` within `limit` bytes; what leaves goes to `dropped`.
    pub fn insert(&mut self, key: K, value: V, limit: usize, dropped: &mut Vec<V>) {
        let cost = value.weight();
        if cost > limit {
            dropped.push(value);
            return;
        }
        if self.bytes + cost > limit {
            dropped.extend(self.map.drain().map(|(_, v)| v));
            self.bytes = 0;
        }
        self.bytes += cost;
        if let Some(old) = self.map.insert(key, value) {
            self.bytes -= old.weight();
            dropped.push(old);
        }
    }

    /// Take every value out (to drop after the lock), leaving the map empty.
    pub fn take_all(&mut self) -> Vec<V> {
        self.bytes = 0;
        self.map.drain().map(|(_, v)| v).collect()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes the values hold.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

type Cache = Bounded<u64, Shared, BuildHasherDefault<Prehashed>>;

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
    let hit = match cache().get(&hash) {
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
    let limit = capacity();
    let mut dropped: Vec<Shared> = Vec::new();
    let mut c = cache();
    for (h, item) in fresh {
        c.insert(h, item, limit, &mut dropped);
    }
    drop(c);
    drop(dropped);
}

/// The bound of each item cache, in bytes.
pub fn capacity() -> usize {
    LIMIT.load(Ordering::Relaxed)
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
        items: c.len(),
        bytes: c.bytes(),
        hits: HITS.load(Ordering::Relaxed),
        misses: MISSES.load(Ordering::Relaxed),
        capacity: LIMIT.load(Ordering::Relaxed),
    }
}

/// Drop every entry and reset the counters.
pub fn clear() {
    let dropped = cache().take_all();
    drop(dropped);
    HITS.store(0, Ordering::Relaxed);
    MISSES.store(0, Ordering::Relaxed);
}

/// Bound the cache to `bytes` (0 turns caching off); applies from the next insert.
pub fn set_capacity(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
}
