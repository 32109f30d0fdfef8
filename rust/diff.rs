//! Commit diff (hot path 2 of 3): what changed between two commits' item lists.
//!
//! Items are matched by key — `source_node_id`, plus `attached_from` for items an attach
//! expanded (the same node may appear natively and inside an attach block).  The diff
//! reports items added and removed, items whose state changed, items whose rendering
//! changed in the same state, and the unchanged prefix of *rendered* items (summarized
//! ones are not sent), which is what a provider's prompt cache can reuse.
//!
//! Python hands both lists over as msgpack (msgspec encodes the whole tuple in C), so a
//! diff is one boundary crossing with no per-item Python work; fields not needed here
//! (blocks, flags) are skipped by serde without being built.

use std::collections::HashMap;

use serde::Deserialize;
use xxhash_rust::xxh3::Xxh3;

/// The fields of a `ContextItem` the diff reads; msgspec omits defaults, so all default.
#[derive(Debug, Deserialize)]
pub struct Item<'a> {
    #[serde(borrow)]
    pub source_node_id: &'a str,
    #[serde(default = "full", borrow)]
    pub state: &'a str,
    #[serde(default, borrow)]
    pub rendered: &'a str,
    #[serde(default, borrow)]
    pub tool_input: &'a str,
    #[serde(default)]
    pub tokens: u64,
    #[serde(default, borrow)]
    pub attached_from: Option<&'a str>,
}

fn full() -> &'static str {
    "full"
}

impl Item<'_> {
    fn key(&self) -> String {
        match self.attached_from {
            Some(src) => format!("{}@{}", self.source_node_id, src),
            None => self.source_node_id.to_string(),
        }
    }

    fn content_hash(&self) -> u64 {
        let mut h = Xxh3::new();
        h.update(self.rendered.as_bytes());
        h.update(&[0]);
        h.update(self.tool_input.as_bytes());
        h.digest()
    }

    fn rendered(&self) -> bool {
        self.state != "summarized"
    }
}

/// The result of [`diff`]; ids are item keys (see the module docs).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// `(key, state in a, state in b)`.
    pub changed: Vec<(String, String, String)>,
    pub rewritten: Vec<String>,
    pub prefix_items: usize,
    pub prefix_tokens: u64,
}

/// Each key's first position in `keys`.
fn first_positions(keys: &[String]) -> HashMap<&str, usize> {
    let mut index = HashMap::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        index.entry(k.as_str()).or_insert(i);
    }
    index
}

/// Diff two item lists (`a` → `b`).
pub fn diff(a: &[Item<'_>], b: &[Item<'_>]) -> Diff {
    let a_keys: Vec<String> = a.iter().map(Item::key).collect();
    let b_keys: Vec<String> = b.iter().map(Item::key).collect();
    let a_index = first_positions(&a_keys);
    let b_index = first_positions(&b_keys);
    let mut out = Diff::default();
    for (j, item) in b.iter().enumerate() {
        match a_index.get(b_keys[j].as_str()) {
            None => out.added.push(b_keys[j].clone()),
            Some(&i) => {
                let old = &a[i];
                if old.state != item.state {
                    out.changed.push((
                        b_keys[j].clone(),
                        old.state.to_string(),
                        item.state.to_string(),
                    ));
                } else if old.content_hash() != item.content_hash() {
                    out.rewritten.push(b_keys[j].clone());
                }
            }
        }
    }
    for k in &a_keys {
        if !b_index.contains_key(k.as_str()) {
            out.removed.push(k.clone());
        }
    }
    let mut ra = a.iter().zip(a_keys.iter()).filter(|(it, _)| it.rendered());
    let mut rb = b.iter().zip(b_keys.iter()).filter(|(it, _)| it.rendered());
    while let (Some((x, xk)), Some((y, yk))) = (ra.next(), rb.next()) {
        if xk != yk || x.state != y.state || x.content_hash() != y.content_hash() {
            break;
        }
        out.prefix_items += 1;
        out.prefix_tokens += y.tokens;
    }
    out
}

/// Decode two msgpack-encoded item lists and diff them.
pub fn diff_msgpack(a: &[u8], b: &[u8]) -> Result<Diff, String> {
    let a: Vec<Item<'_>> = rmp_serde::from_slice(a).map_err(|e| format!("commit a: {e}"))?;
    let b: Vec<Item<'_>> = rmp_serde::from_slice(b).map_err(|e| format!("commit b: {e}"))?;
    Ok(diff(&a, &b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn it<'a>(id: &'a str, state: &'a str, text: &'a str, tokens: u64) -> Item<'a> {
        Item {
            source_node_id: id,
            state,
            rendered: text,
            tool_input: "",
            tokens,
            attached_from: None,
        }
    }

    /// A list of items, each `(id, state, rendered, tokens)`.
    fn list<'a>(spec: &[(&'a str, &'a str, &'a str, u64)]) -> Vec<Item<'a>> {
        spec.iter().map(|&(i, s, t, n)| it(i, s, t, n)).collect()
    }

    #[test]
    fn identical_lists_share_everything() {
        let a = list(&[("u", "full", "hi", 1), ("a", "full", "yo", 2)]);
        let d = diff(&a, &a);
        assert!(d.added.is_empty() && d.removed.is_empty() && d.changed.is_empty());
        assert_eq!((d.prefix_items, d.prefix_tokens), (2, 3));
    }

    #[test]
    fn state_change_ends_the_prefix_and_is_reported() {
        let a = list(&[
            ("u", "full", "hi", 1),
            ("t", "full", "long", 9),
            ("x", "full", "z", 1),
        ]);
        let b = list(&[
            ("u", "full", "hi", 1),
            ("t", "aged", "stub", 2),
            ("x", "full", "z", 1),
        ]);
        let d = diff(&a, &b);
        assert_eq!(d.changed, vec![("t".into(), "full".into(), "aged".into())]);
        assert_eq!((d.prefix_items, d.prefix_tokens), (1, 1));
    }

    #[test]
    fn added_removed_rewritten() {
        let a = list(&[
            ("u", "full", "hi", 1),
            ("gone", "full", "g", 1),
            ("r", "full", "x", 1),
        ]);
        let b = list(&[
            ("u", "full", "hi", 1),
            ("r", "full", "y", 1),
            ("new", "full", "n", 1),
        ]);
        let d = diff(&a, &b);
        assert_eq!(d.added, vec!["new".to_string()]);
        assert_eq!(d.removed, vec!["gone".to_string()]);
        assert_eq!(d.rewritten, vec!["r".to_string()]);
    }

    #[test]
    fn summarized_items_are_not_part_of_the_prefix() {
        let a = list(&[
            ("u", "full", "hi", 1),
            ("t", "full", "x", 5),
            ("v", "full", "y", 1),
        ]);
        let b = list(&[
            ("u", "full", "hi", 1),
            ("t", "summarized", "x", 5),
            ("sm_1", "summary", "s", 1),
        ]);
        let d = diff(&a, &b);
        assert_eq!(d.prefix_items, 1);
        assert_eq!(d.added, vec!["sm_1".to_string()]);
        assert_eq!(d.removed, vec!["v".to_string()]);
    }

    #[test]
    fn attached_items_are_keyed_apart_from_native_ones() {
        let mut x = it("u", "full", "hi", 1);
        x.attached_from = Some("cc_1");
        let a = list(&[("u", "full", "hi", 1)]);
        let b = vec![it("u", "full", "hi", 1), x];
        let d = diff(&a, &b);
        assert_eq!(d.added, vec!["u@cc_1".to_string()]);
    }

    #[test]
    fn bad_msgpack_is_an_error_not_a_panic() {
        assert!(diff_msgpack(b"\xc1", b"\x90").is_err());
        assert!(diff_msgpack(b"\x90", b"\x90").unwrap().added.is_empty());
    }
}
