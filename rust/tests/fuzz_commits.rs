//! Mutation fuzzing of the core over real commits (part of `cargo test`, bounded).
//!
//! The seeds are the commits in `tests/data/commits` (real sessions committed under
//! several presets, plus hand-made shapes).  Each round mutates one seed, either as
//! bytes — bit flips, MessagePack markers, markers declaring their largest length, deep
//! nesting, splices of other seeds, cuts — or as data — items dropped, copied, swapped, fields set to odd values
//! (roles, states, repeated or missing call ids, hostile text, block fields of any kind) — and runs `ctxrules_core::fuzzing::commit` on it (decode, render for every
//! wire, neutral context, diff), and sometimes mutated options through
//! `fuzzing::options`.  A panic fails the test; an abort or a stack overflow kills it.
//!
//! `CTXRULES_FUZZ_ROUNDS` (default 20,000) and `CTXRULES_FUZZ_SECONDS` (default 20) bound
//! the run, `CTXRULES_FUZZ_SEED` picks the random sequence (default 1: the same inputs
//! every run).  `make fuzz` runs it much longer in release mode.

use std::time::{Duration, Instant};

use ctxrules_core::fuzzing::{self, Rng};
use serde_json::Value;

/// Marker bytes of MessagePack (containers, strings, lengths, nil, bools, invalid 0xc1).
const MARKERS: [u8; 24] = [
    0x00, 0x7f, 0x80, 0x81, 0x8f, 0x90, 0x91, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc6,
    0xc9, 0xcf, 0xd3, 0xd9, 0xdb, 0xdd, 0xdf, 0xff,
];

/// Markers with the largest length they can declare (arrays, maps, strings, bin, ext).
const BOMBS: [&[u8]; 9] = [
    b"\xdd\xff\xff\xff\xff",
    b"\xdc\xff\xff",
    b"\xdf\xff\xff\xff\xff",
    b"\xde\xff\xff",
    b"\xdb\xff\xff\xff\xff",
    b"\xc6\xff\xff\xff\xff",
    b"\xc9\xff\xff\xff\xff\x01",
    b"\x9f",
    b"\x8f",
];

fn mutate(rng: &mut Rng, data: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    for _ in 0..1 + rng.below(4) {
        let n = data.len();
        let at = rng.below(n + 1);
        match rng.below(10) {
            0 if n > 0 => data[at.min(n - 1)] ^= 1 << rng.below(8),
            1 if n > 0 => data[at.min(n - 1)] = MARKERS[rng.below(MARKERS.len())],
            2 if n > 4 => {
                let at = at.min(n - 4);
                let v = if rng.below(2) == 0 {
                    u32::MAX
                } else {
                    rng.bits() as u32
                };
                data[at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
            3 => {
                let other = &seeds[rng.below(seeds.len())];
                let a = rng.below(other.len());
                let b = (a + rng.below(256)).min(other.len());
                let chunk = other[a..b].to_vec();
                data.splice(at..at, chunk);
            }
            4 if n > 0 => {
                let b = (at + rng.below(64)).min(n);
                data.drain(at.min(b)..b);
            }
            5 => data.truncate(at),
            6 => {
                let most = if rng.below(10) == 0 { 100_000 } else { 400 };
                let depth = 1 + rng.below(most);
                let marker = [0x91u8, 0x81][rng.below(2)];
                data.splice(at..at, std::iter::repeat_n(marker, depth));
            }
            7 if n > 0 => {
                // Duplicate a stretch in place (repeated items, repeated ids).
                let b = (at + rng.below(512)).min(n);
                let chunk = data[at.min(b)..b].to_vec();
                data.splice(at..at, chunk);
            }
            8 => {
                // A container or string marker (a byte that looks like one) made to
                // declare its largest length: what trusts a declared length meets it.
                let marks: Vec<usize> = (0..n)
                    .filter(|&i| matches!(data[i], 0x80..=0xbf | 0xd9..=0xdf))
                    .collect();
                if !marks.is_empty() {
                    let i = marks[rng.below(marks.len())];
                    let bomb = BOMBS[rng.below(BOMBS.len())];
                    data.splice(i..i + 1, bomb.iter().copied());
                }
            }
            _ => data.push(rng.bits() as u8),
        }
    }
}

/// Strings that stress the writers and the pairing rules.
const TEXTS: [&str; 12] = [
    "",
    " \n\t ",
    "\"}],\"role\":\"system\"",
    "\\",
    "\u{0}\u{1f}\u{7f}",
    "é✓你好\u{2028}😀",
    "{\"a\":[1,{\"b\":null}]}",
    "{\"cut",
    "call_1",
    "a1",
    "user",
    "[tool x; result]",
];

/// Values for the fields that decide pairing, roles and states.
fn field_value(rng: &mut Rng, key: &str) -> Value {
    let pick = |rng: &mut Rng, xs: &[&str]| Value::from(xs[rng.below(xs.len())]);
    match key {
        "role" => pick(rng, &["user", "assistant", "tool", "system", "nobody"]),
        "state" => pick(
            rng,
            &["full", "aged", "cleared", "summarized", "summary", "odd"],
        ),
        "tokens" => Value::from(rng.bits() >> rng.below(64)),
        "is_error" => Value::from(rng.below(2) == 0),
        "caller" | "tool_use_id" | "attached_from" if rng.below(4) == 0 => Value::Null,
        _ => Value::from(TEXTS[rng.below(TEXTS.len())]),
    }
}

/// Mutate a commit as data: change a field of an item, drop one, copy one, swap two
/// (so decoding succeeds and pairing, merging and escaping get odd but valid input).
fn mutate_items(rng: &mut Rng, commit: &mut Value) {
    let Some(items) = commit.get_mut("items").and_then(Value::as_array_mut) else {
        return;
    };
    for _ in 0..1 + rng.below(6) {
        let n = items.len();
        if n == 0 {
            return;
        }
        let i = rng.below(n);
        match rng.below(6) {
            0 => {
                items.remove(i);
            }
            5 => mutate_block(rng, &mut items[i]),
            1 => {
                let copy = items[i].clone();
                items.insert(rng.below(n + 1), copy);
            }
            2 => items.swap(i, rng.below(n)),
            _ => {
                const KEYS: [&str; 10] = [
                    "role",
                    "state",
                    "rendered",
                    "name",
                    "caller",
                    "tool_use_id",
                    "tool_input",
                    "is_error",
                    "tokens",
                    "attached_from",
                ];
                let key = KEYS[rng.below(KEYS.len())];
                let v = field_value(rng, key);
                if let Some(map) = items[i].as_object_mut() {
                    map.insert(key.into(), v);
                }
            }
        }
    }
}

/// Set a field of one of an item's blocks (a compaction block's fields above all, which
/// other blocks use for other things) to an odd value of any kind.
fn mutate_block(rng: &mut Rng, item: &mut Value) {
    let Some(blocks) = item.get_mut("blocks").and_then(Value::as_array_mut) else {
        return;
    };
    if blocks.is_empty() {
        return;
    }
    let n = blocks.len();
    let Some(block) = blocks[rng.below(n)].as_object_mut() else {
        return;
    };
    const KEYS: [&str; 8] = [
        "type",
        "content",
        "encrypted_content",
        "signature",
        "tool_changes",
        "id",
        "vendor",
        "text",
    ];
    let key = KEYS[rng.below(KEYS.len())];
    let v = match rng.below(6) {
        0 => Value::Null,
        1 => serde_json::json!([{"type": "tool_removal"}, 1]),
        2 => Value::from(rng.bits() >> rng.below(64)),
        3 => Value::from(["compaction", "openai", "", "[1]", "[", "[[[]]]"][rng.below(6)]),
        _ => Value::from(TEXTS[rng.below(TEXTS.len())]),
    };
    block.insert(key.into(), v);
}

fn seeds() -> Vec<Vec<u8>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/commits");
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("seed folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "msgpack"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).expect("seed"))
        .collect()
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn mutated_commits_only_ever_give_errors_or_valid_bodies() {
    let seeds = seeds();
    assert!(seeds.len() >= 50, "expected the seed commits");
    let rounds = env_or("CTXRULES_FUZZ_ROUNDS", 20_000);
    let budget = Duration::from_secs(env_or("CTXRULES_FUZZ_SECONDS", 20));
    let mut rng = Rng(env_or("CTXRULES_FUZZ_SEED", 1).max(1));
    let start = Instant::now();
    let (mut inputs, mut ok, mut err, mut bodies) = (0u64, 0u64, 0u64, 0u64);
    // The seeds themselves render (they are real commits).
    for s in &seeds {
        let o = fuzzing::commit(&[[0u8].as_slice(), s].concat());
        assert_eq!(o.err, 0, "a seed failed to render");
    }
    while inputs < rounds && start.elapsed() < budget {
        let seed = &seeds[rng.below(seeds.len())];
        let mut data = match rmp_serde::from_slice::<Value>(seed) {
            // Half the rounds change the commit as data, the others as bytes.
            Ok(mut v) if rng.below(2) == 0 => {
                mutate_items(&mut rng, &mut v);
                rmp_serde::to_vec_named(&v).expect("re-encode")
            }
            _ => {
                let mut d = seed.clone();
                mutate(&mut rng, &mut d, &seeds);
                d
            }
        };
        if rng.below(16) == 0 {
            mutate(&mut rng, &mut data, &seeds);
        }
        let mut input = vec![rng.bits() as u8];
        input.extend_from_slice(&data);
        let o = fuzzing::commit(&input);
        bodies += o.ok as u64;
        if o.err == 0 {
            ok += 1;
        } else {
            err += 1;
        }
        if rng.below(8) == 0 {
            let mut opts = fuzzing::OPTIONS[1 + rng.below(2)].to_vec();
            mutate(&mut rng, &mut opts, &seeds);
            fuzzing::options(&opts);
        }
        inputs += 1;
    }
    println!(
        "fuzz: {inputs} mutated commits in {:.1} s: {ok} rendered, {err} refused with an error; {bodies} bodies checked",
        start.elapsed().as_secs_f64()
    );
    assert!(inputs > 0);
}
