//! What the fuzzers run on one input: every entry point that reads untrusted bytes.
//!
//! Shared by the libFuzzer targets (`fuzz/`, `make fuzz`) and the mutation test
//! (`rust/tests/fuzz_commits.rs`, part of `cargo test`), so both check the same thing:
//! whatever the bytes, each call returns (an error or a body), never panics, aborts or
//! overflows the stack, and every body it returns is valid JSON (and, rendered as part
//! of a session, the same as rendered alone).

use crate::commit;
use crate::diff;
use crate::render::{self, Wire};

/// A small deterministic generator (xorshift64*), for tests and fuzzers that need
/// repeatable random choices without a crate.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.bits() % n as u64) as usize
        }
    }
}

/// Render options the fuzzed commits are rendered with (the first input byte picks one).
pub const OPTIONS: [&[u8]; 3] = [
    b"",
    br#"{"model":"m","max_tokens":9,"system":[{"text":"s","layer":0},{"text":"f","layer":1}],"tools":[{"name":"ls","input_schema":{"type":"object"}},{"name":"x"}],"cache_ttl":"1h"}"#,
    br#"{"model":"m","cache":false,"extra":{"temperature":0}}"#,
];

/// A small valid commit the fuzzed options are rendered with.
pub const COMMIT: &[u8] = b"\x81\xa5items\x92\x83\xaesource_node_id\xa1u\xa4role\xa4user\xa8rendered\xa2hi\x83\xaesource_node_id\xa1a\xa4role\xa9assistant\xa8rendered\xa2yo";

/// How the calls of one input ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub ok: usize,
    pub err: usize,
}

impl Outcome {
    fn count<T>(&mut self, r: &Result<T, String>) {
        if r.is_ok() {
            self.ok += 1;
        } else {
            self.err += 1;
        }
    }
}

fn assert_json(what: &str, bytes: &[u8]) {
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        panic!(
            "{what} is not valid JSON ({e}): {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(400)])
        );
    }
}

/// Read `data` as a commit: decode it, render it for every wire (options picked by its
/// first byte) and as the neutral context, and diff it with itself.
pub fn commit(data: &[u8]) -> Outcome {
    let mut out = Outcome::default();
    let opts = OPTIONS[usize::from(data.first().copied().unwrap_or(0)) % OPTIONS.len()];
    let commit_bytes = data.get(1..).unwrap_or_default();
    let ctx = render::render_context(commit_bytes, opts);
    if let Ok(body) = &ctx {
        assert_json("render_context", body);
    }
    out.count(&ctx);
    for wire in Wire::ALL {
        let r = render::render_request(wire, commit_bytes, opts);
        if let Ok(r) = &r {
            assert_json("a body", &r.body);
            assert_json("a breakdown", &r.meta);
        }
        out.count(&r);
    }
    let items = commit::decode_commit(commit_bytes);
    if let Ok(items) = &items {
        // A commit shares everything with itself (repeated keys may still pair up
        // differently, so only what holds for any list is checked).
        let d = diff::diff(items, items);
        let rendered = items
            .iter()
            .filter(|i| i.get().state() != commit::State::Summarized)
            .count();
        assert!(d.added.is_empty() && d.removed.is_empty());
        assert_eq!(d.prefix_items, rendered);
        session(items, opts);
    }
    out.count(&items);
    out
}

/// Render requests made from `items` as one session — growing prefixes, the list with
/// an item in the middle dropped, the whole list twice — and check every body and
/// breakdown against its full render, on every wire.
pub fn session(items: &[commit::Shared], opts: &[u8]) {
    let Ok(options) = render::input::parse_options(opts) else {
        return;
    };
    let n = items.len();
    let mut dropped = items.to_vec();
    if n > 2 {
        dropped.remove(n / 2);
    }
    let lists: [&[commit::Shared]; 6] = [
        &items[..n / 4],
        &items[..n / 2],
        &items[..(n / 2 + 1).min(n)],
        &dropped,
        items,
        items,
    ];
    let requests: Vec<_> = lists.iter().map(|l| (*l, &options)).collect();
    for wire in Wire::ALL {
        for ((r, _), list) in render::session::render_session(wire, &requests, None)
            .into_iter()
            .zip(lists)
        {
            let full = render::write_request(wire, list, opts, Vec::new())
                .unwrap_or_else(|e| panic!("{wire:?}: {e}"));
            assert!(
                r.body == full.body && r.meta == full.meta,
                "{wire:?}: an incremental render differs from the full one:\n{}\n{}",
                String::from_utf8_lossy(&r.body),
                String::from_utf8_lossy(&full.body)
            );
        }
    }
}

/// Read `data` as render options for a small valid commit, on every wire.
pub fn options(data: &[u8]) -> Outcome {
    let mut out = Outcome::default();
    let ctx = render::render_context(COMMIT, data);
    if let Ok(body) = &ctx {
        assert_json("render_context", body);
    }
    out.count(&ctx);
    for wire in Wire::ALL {
        let r = render::render_request(wire, COMMIT, data);
        if let Ok(r) = &r {
            assert_json("a body", &r.body);
        }
        out.count(&r);
    }
    out
}
