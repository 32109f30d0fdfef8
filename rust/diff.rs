//! Commit diff (hot path 2 of 3): what changed between two commits' item lists.
//!
//! Items are matched by key — `source_node_id`, plus `attached_from` for items an attach
//! expanded (the same node may appear natively and inside an attach block).  The diff
//! reports items added and removed, items whose state changed, items whose rendering
//! changed in the same state, and the unchanged prefix of *rendered* items (summarized
//! ones are not sent), which is what a provider's prompt cache can reuse.
//!
//! Both item lists are read by the commit reader (`crate::commit`), the same one
//! rendering uses: an item is decoded once, whichever of the two reads it first, and
//! later diffs and renders of commits that share it find it in the item cache.

use crate::commit::{Item, Shared, State};
use std::collections::HashMap;

/// An item's key: its node id, with the attach source for expanded items.
fn key(item: Item<'_>) -> String {
    match item.attached_from() {
        Some(src) => format!("{}@{}", item.source_node_id().raw(), src.raw()),
        None => item.source_node_id().raw().into_owned(),
    }
}

fn rendered(item: Item<'_>) -> bool {
    item.state() != State::Summarized
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
pub fn diff(a: &[Shared], b: &[Shared]) -> Diff {
    let a: Vec<Item<'_>> = a.iter().map(Shared::get).collect();
    let b: Vec<Item<'_>> = b.iter().map(Shared::get).collect();
    let a_keys: Vec<String> = a.iter().map(|&i| key(i)).collect();
    let b_keys: Vec<String> = b.iter().map(|&i| key(i)).collect();
    let a_index = first_positions(&a_keys);
    let b_index = first_positions(&b_keys);
    let mut out = Diff::default();
    for (j, item) in b.iter().enumerate() {
        match a_index.get(b_keys[j].as_str()) {
            None => out.added.push(b_keys[j].clone()),
            Some(&i) => {
                let old = a[i];
                if old.state() != item.state() {
                    out.changed.push((
                        b_keys[j].clone(),
                        old.state().name().to_string(),
                        item.state().name().to_string(),
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
    let mut ra = a.iter().zip(a_keys.iter()).filter(|(it, _)| rendered(**it));
    let mut rb = b.iter().zip(b_keys.iter()).filter(|(it, _)| rendered(**it));
    while let (Some((x, xk)), Some((y, yk))) = (ra.next(), rb.next()) {
        if xk != yk || x.state() != y.state() || x.content_hash() != y.content_hash() {
            break;
        }
        out.prefix_items += 1;
        out.prefix_tokens = out.prefix_tokens.saturating_add(y.tokens());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit;

    /// A list of items, each `(id, state, rendered, tokens)` plus optional attach source,
    /// decoded from MessagePack like a real one.
    fn list_attached(spec: &[(&str, &str, &str, u64, Option<&str>)]) -> Vec<Shared> {
        let items: Vec<serde_json::Value> = spec
            .iter()
            .map(|&(i, s, t, n, src)| {
                let mut v = serde_json::json!({
                    "source_node_id": i, "role": "user", "state": s, "rendered": t, "tokens": n,
                });
                if let Some(src) = src {
                    v["attached_from"] = src.into();
                }
                v
            })
            .collect();
        commit::decode_items(&rmp_serde::to_vec_named(&items).unwrap(), |k| {
            format!("items[{k}]")
        })
        .unwrap()
    }

    fn list(spec: &[(&str, &str, &str, u64)]) -> Vec<Shared> {
        let spec: Vec<_> = spec
            .iter()
            .map(|&(i, s, t, n)| (i, s, t, n, None))
            .collect();
        list_attached(&spec)
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
        let a = list(&[("u", "full", "hi", 1)]);
        let b = list_attached(&[
            ("u", "full", "hi", 1, None),
            ("u", "full", "hi", 1, Some("cc_1")),
        ]);
        let d = diff(&a, &b);
        assert_eq!(d.added, vec!["u@cc_1".to_string()]);
    }

    #[test]
    fn empty_lists_have_nothing_in_common() {
        let d = diff(&[], &[]);
        assert_eq!(d, Diff::default());
    }
}
