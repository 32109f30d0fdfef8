//! How a commit crosses the boundary: as MessagePack bytes, or as the commit's item
//! tuple, whose items are looked up by identity first.
//!
//! Encoding a commit with msgspec on every render cost as much as rendering it, and a
//! session's consecutive commits share almost all their items (the same Python
//! objects).  So for an item tuple, each `ContextItem` is first looked up by identity
//! in a table that holds a reference to it; only the items not found there are encoded
//! (one msgspec call for all of them) and prepared through the content-keyed cache
//! (`crate::commit::cache`).  The table is correct by construction:
//! - it holds a strong reference to every object it lists, so an address in it cannot
//!   be reused by another object while the entry exists;
//! - it lists only objects of exactly `ctxrules.model.ContextItem`, a frozen msgspec
//!   Struct: none of its fields can be reassigned, and every value the core reads from
//!   an item (strings, numbers, tuples of frozen blocks and image sources) is
//!   immutable.  The only mutable containers an item can hold — a tool_use block's
//!   `input` dict, a tool_result block's content list — are never read (`crate::commit`
//!   drops those blocks).
//!
//! So the prepared item an entry points to is always the one that object's bytes give.
//! Other objects (subclasses, dicts) are encoded on every call.  The table is bounded
//! like the content cache and starts over when full; it only changes with the GIL held.

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{LazyLock, Mutex, MutexGuard};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PyTuple, PyType};

use crate::commit::cache::{self, Bounded, Weighed};
use crate::commit::{self, Items, Shared};

/// Hash of an object address (aligned, so the low bits carry nothing).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_usize(&mut self, a: usize) {
        self.0 = (a as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

struct Tracked {
    /// Keeps the object (and so its address) alive while it is listed.
    obj: Py<PyAny>,
    item: Shared,
}

impl Weighed for Tracked {
    fn weight(&self) -> usize {
        self.item.size()
    }
}

#[derive(Default)]
struct Table {
    map: Bounded<usize, Tracked, BuildHasherDefault<AddrHasher>>,
    hits: u64,
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(|| Mutex::new(Table::default()));

fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

static ITEM_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static ENCODE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A commit argument between reading it (with the GIL) and decoding it (without).
pub enum Pending {
    /// A whole commit's MessagePack.
    Bytes(PyBackedBytes),
    /// An item sequence: items found by identity, and the MessagePack of the others.
    Items {
        found: Vec<Option<Shared>>,
        missing: Vec<(usize, Option<Py<PyAny>>)>,
        encoded: Option<PyBackedBytes>,
    },
}

/// A commit argument as its bytes (`Ok`) or its item tuple (`Err`); a `TypeError`
/// (naming the session's commit `index` if given) for anything else.
fn commit_arg<'py>(
    commit: &Bound<'py, PyAny>,
    index: Option<usize>,
) -> PyResult<Result<PyBackedBytes, Bound<'py, PyTuple>>> {
    if let Ok(b) = commit.cast::<PyBytes>() {
        Ok(Ok(b.clone().into()))
    } else if let Ok(t) = commit.cast::<PyTuple>() {
        Ok(Err(t.clone()))
    } else if let Ok(l) = commit.cast::<PyList>() {
        Ok(Err(l.to_tuple()))
    } else {
        let prefix = index.map(|c| format!("commit {c}: ")).unwrap_or_default();
        Err(PyTypeError::new_err(format!(
            "{prefix}a commit is bytes (its MessagePack) or a tuple of ContextItem, not {}",
            commit.get_type().name()?
        )))
    }
}

/// Read a commit argument: `bytes` (a whole commit, as `msgspec.msgpack.encode(commit)`
/// writes it) or a tuple or list of items (a commit's `items`).
pub fn gather(py: Python<'_>, commit: &Bound<'_, PyAny>) -> PyResult<Pending> {
    Ok(gather_after(py, commit, None)?.0)
}

/// `gather`, taking the items at the positions where the tuple holds the very objects
/// `prev` (an earlier tuple, kept alive by the caller, and its items in order) held
/// there from `prev`, without looking them up: successive commits of a session hold
/// mostly the same objects at the same positions, and the lookups in the table (a
/// cache miss each, for thousands of items) were most of a render's cost.  Also says
/// how many were taken so.  A live object has one address, so the same address at the
/// same position is the same object, hence the same prepared item.
pub fn gather_after<'py>(
    py: Python<'py>,
    commit: &Bound<'py, PyAny>,
    prev: Option<(&Bound<'py, PyTuple>, &[Shared])>,
) -> PyResult<(Pending, usize)> {
    let tuple = match commit_arg(commit, None)? {
        Ok(bytes) => return Ok((Pending::Bytes(bytes), 0)),
        Err(tuple) => tuple,
    };
    let mut kept = 0;
    let item_type = ITEM_TYPE
        .import(py, "ctxrules.model", "ContextItem")?
        .as_ptr();
    let mut found = Vec::with_capacity(tuple.len());
    let mut missing = Vec::new();
    {
        // Only addresses are read here, not the objects: an address in the table is an
        // object the table keeps alive, so it is the very item listed.  Objects are
        // touched (type checked, encoded) only when they are not found.
        let mut t = table();
        let mut before = prev.map(|(pt, items)| pt.iter_borrowed().zip(items.iter()));
        for (i, obj) in tuple.iter_borrowed().enumerate() {
            if let Some((was, item)) = before.as_mut().and_then(Iterator::next) {
                if was.as_ptr() == obj.as_ptr() {
                    found.push(Some(item.clone()));
                    kept += 1;
                    continue;
                }
            }
            match t.map.get(&(obj.as_ptr() as usize)) {
                Some(e) => found.push(Some(e.item.clone())),
                None => {
                    found.push(None);
                    missing.push(i);
                }
            }
        }
        t.hits += (found.len() - missing.len()) as u64;
    }
    let missing: Vec<(usize, Option<Py<PyAny>>)> = missing
        .into_iter()
        .map(|i| {
            let obj = tuple.get_borrowed_item(i)?;
            let exact = obj.get_type().as_ptr() == item_type;
            Ok((i, exact.then(|| obj.to_owned().unbind())))
        })
        .collect::<PyResult<_>>()?;
    let encoded = if missing.is_empty() {
        None
    } else {
        let encode = ENCODE.import(py, "msgspec.msgpack", "encode")?;
        let objs = if missing.len() == tuple.len() {
            // Nothing known (a commit seen for the first time): encode it as it is.
            tuple.clone().into_any()
        } else {
            let objs: Vec<_> = missing
                .iter()
                .map(|&(i, _)| tuple.get_borrowed_item(i))
                .collect::<PyResult<_>>()?;
            PyList::new(py, objs)?.into_any()
        };
        let out = encode.call1((objs,)).map_err(|e| {
            PyValueError::new_err(format!("commit items could not be encoded: {e}"))
        })?;
        Some(out.extract::<PyBackedBytes>()?)
    };
    Ok((
        Pending::Items {
            found,
            missing,
            encoded,
        },
        kept,
    ))
}

impl Pending {
    /// Decode what `gather` left (no GIL needed): the commit's prepared items.
    pub fn resolve(&mut self) -> Result<Items, String> {
        self.resolve_named(&|i| format!("items[{i}]"))
    }

    /// `resolve`, an error naming the `i`-th item of the gathered sequence `name_of(i)`.
    pub fn resolve_named(&mut self, name_of: &dyn Fn(usize) -> String) -> Result<Items, String> {
        match self {
            Pending::Bytes(b) => commit::decode_commit(b),
            Pending::Items {
                found,
                missing,
                encoded,
            } => {
                let mut items = std::mem::take(found);
                if let Some(bytes) = encoded {
                    // Positions in the encoding of the missing items mean nothing to
                    // the caller: errors name the item by its index in the commit.
                    let index_of = |k: usize| name_of(missing.get(k).map_or(k, |m| m.0));
                    let decoded = commit::decode_items(bytes, index_of)?;
                    if decoded.len() != missing.len() {
                        return Err("commit items: the encoding does not list every item".into());
                    }
                    for (&(i, _), item) in missing.iter().zip(decoded) {
                        items[i] = Some(item);
                    }
                }
                items
                    .into_iter()
                    .map(|i| i.ok_or_else(|| "commit items: an item was not decoded".to_string()))
                    .collect()
            }
        }
    }

    /// List the `ContextItem`s that were not yet listed, with their prepared `items`
    /// (call with the GIL held, after a successful `resolve`).
    pub fn remember(self, _py: Python<'_>, items: &Items) {
        let Pending::Items { missing, .. } = self else {
            return;
        };
        let limit = cache::capacity();
        // Entries dropped here are released after the lock: releasing a reference may
        // free an object, which must not happen while the table is locked.
        let mut dropped: Vec<Tracked> = Vec::new();
        let mut t = table();
        for (i, obj) in missing {
            let (Some(obj), Some(item)) = (obj, items.get(i)) else {
                continue;
            };
            let entry = Tracked {
                obj,
                item: item.clone(),
            };
            t.map
                .insert(entry.obj.as_ptr() as usize, entry, limit, &mut dropped);
        }
        drop(t);
        drop(dropped);
    }
}

/// Read, decode and remember a commit argument in one go (for single calls).
pub fn items_of(py: Python<'_>, commit: &Bound<'_, PyAny>) -> PyResult<Items> {
    Ok(items_of_after(py, commit, None)?.0)
}

/// `items_of` through `gather_after`: also how many items were taken from `prev`.
pub fn items_of_after<'py>(
    py: Python<'py>,
    commit: &Bound<'py, PyAny>,
    prev: Option<(&Bound<'py, PyTuple>, &[Shared])>,
) -> PyResult<(Items, usize)> {
    let (mut pending, kept) = gather_after(py, commit, prev)?;
    let items = py
        .detach(|| pending.resolve())
        .map_err(PyValueError::new_err)?;
    pending.remember(py, &items);
    Ok((items, kept))
}

/// (objects listed, bytes they hold, identity hits).
pub fn table_stats() -> (usize, usize, u64) {
    let t = table();
    (t.map.len(), t.map.bytes(), t.hits)
}

/// Forget every listed object (call with the GIL held: references are dropped).
pub fn table_clear(_py: Python<'_>) {
    let mut t = table();
    let dropped = t.map.take_all();
    t.hits = 0;
    drop(t);
    drop(dropped);
}

/// Where one commit of a session is, between gathering and decoding.
enum Source {
    /// A whole commit's MessagePack.
    Bytes(PyBackedBytes),
    /// Indices into the session's distinct item objects.
    Objects(Vec<u32>),
}

/// The commits of one session between reading them (with the GIL) and decoding them
/// (without).  Successive commits of a session hold mostly the same item objects, so
/// each distinct object is looked up (and, if new, encoded and decoded) once, however
/// many of the commits hold it.
pub struct SessionPending {
    commits: Vec<Source>,
    /// The distinct objects, in the order first seen.
    objects: Option<Pending>,
    /// `(commit, position)` where each distinct object was first seen (errors name it).
    first_seen: Vec<(usize, usize)>,
    /// The distinct objects' items, once resolved.
    distinct: Items,
}

/// Read a session's commits (each as `gather` takes it).
pub fn gather_session(py: Python<'_>, commits: &[Bound<'_, PyAny>]) -> PyResult<SessionPending> {
    let mut seen: std::collections::HashMap<usize, u32, BuildHasherDefault<AddrHasher>> =
        Default::default();
    let mut distinct: Vec<Bound<'_, PyAny>> = Vec::new();
    let mut first_seen = Vec::new();
    let mut sources = Vec::with_capacity(commits.len());
    for (c, commit) in commits.iter().enumerate() {
        let tuple = match commit_arg(commit, Some(c))? {
            Ok(bytes) => {
                sources.push(Source::Bytes(bytes));
                continue;
            }
            Err(tuple) => tuple,
        };
        let mut idx = Vec::with_capacity(tuple.len());
        for (i, obj) in tuple.iter_borrowed().enumerate() {
            // The tuple keeps each object alive for the call, so an address seen here
            // is the same object wherever it is seen again.
            let k = *seen.entry(obj.as_ptr() as usize).or_insert_with(|| {
                distinct.push(obj.to_owned());
                first_seen.push((c, i));
                (distinct.len() - 1) as u32
            });
            idx.push(k);
        }
        sources.push(Source::Objects(idx));
    }
    let objects = if distinct.is_empty() {
        None
    } else {
        Some(gather(py, PyList::new(py, distinct)?.as_any())?)
    };
    Ok(SessionPending {
        commits: sources,
        objects,
        first_seen,
        distinct: Vec::new(),
    })
}

impl SessionPending {
    /// Decode what `gather_session` left (no GIL needed): each commit's prepared items.
    pub fn resolve(&mut self) -> Result<Vec<Items>, String> {
        let first_seen = &self.first_seen;
        if let Some(p) = &mut self.objects {
            self.distinct = p.resolve_named(&|k| {
                let (c, i) = first_seen[k];
                format!("commit {c}: items[{i}]")
            })?;
        }
        let objects = &self.distinct;
        self.commits
            .iter()
            .enumerate()
            .map(|(c, src)| match src {
                Source::Bytes(b) => {
                    commit::decode_commit(b).map_err(|e| format!("commit {c}: {e}"))
                }
                Source::Objects(idx) => {
                    Ok(idx.iter().map(|&k| objects[k as usize].clone()).collect())
                }
            })
            .collect()
    }

    /// List the item objects that were not yet listed (see `Pending::remember`); call
    /// with the GIL held after a successful `resolve`.
    pub fn remember(self, py: Python<'_>) {
        if let Some(objects) = self.objects {
            objects.remember(py, &self.distinct);
        }
    }
}
