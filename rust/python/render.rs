//! Bindings of the renderer: one crossing per commit (or per batch), bodies back as bytes.
//!
//! Python hands over the commit (see `commit.rs`) and the options as JSON; the GIL is
//! released for the whole render.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyBytes, PyDict};
use rayon::prelude::*;

use super::commit::{gather, items_of, table_clear, table_stats, Pending};
use crate::commit::{cache, Items, MAX_DEPTH};
use crate::render::{self, Wire};

fn wire(provider: &str) -> Result<Wire, String> {
    Wire::from_name(provider).ok_or_else(|| {
        format!(
            "no built-in wire format {provider:?}; known: anthropic, openai-chat, openai-responses, gemini"
        )
    })
}

/// The neutral context of a commit (bytes or item tuple) as JSON.
#[pyfunction]
fn render_context<'py>(
    py: Python<'py>,
    commit: &Bound<'py, PyAny>,
    options: PyBackedBytes,
) -> PyResult<Bound<'py, PyBytes>> {
    let items = items_of(py, commit)?;
    let out = py
        .detach(|| render::write_context(&items, &options))
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

/// The request body of one built-in wire format for a commit, and its breakdown.
#[pyfunction]
fn render_request<'py>(
    py: Python<'py>,
    provider: &str,
    commit: &Bound<'py, PyAny>,
    options: PyBackedBytes,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let wire = wire(provider).map_err(PyValueError::new_err)?;
    let items = items_of(py, commit)?;
    let buf = BODY.with(|b| b.take());
    let out = py
        .detach(|| render::write_request(wire, &items, &options, buf))
        .map_err(PyValueError::new_err)?;
    let result = (PyBytes::new(py, &out.body), PyBytes::new(py, &out.meta));
    keep_body(out.body);
    Ok(result)
}

/// Largest body buffer kept for the next render on the same thread (see `BODY`).
const KEEP_BODY_BUFFER: usize = 64 << 20;

thread_local! {
    /// The last render's body buffer, reused by the next one on this thread: its pages
    /// are already mapped, so the next body is written without page faults (which cost
    /// about a tenth of rendering a 10k-item commit).  At most KEEP_BODY_BUFFER is kept.
    static BODY: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Keep `body`'s buffer for the next render on this thread (see `BODY`).
fn keep_body(body: Vec<u8>) {
    if body.capacity() <= KEEP_BODY_BUFFER {
        BODY.with(|b| b.set(body));
    }
}

/// Most threads a batch may ask for.
const MAX_THREADS: usize = 1024;

/// Thread pools of the sizes batches asked for, made once each: starting threads for
/// every batch would cost more than a small batch's work.
static POOLS: LazyLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn pool(threads: usize) -> Result<Arc<rayon::ThreadPool>, String> {
    let mut pools = POOLS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = pools.get(&threads) {
        return Ok(p.clone());
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("ctxrules-render-{i}"))
        .build()
        .map_err(|e| format!("could not start {threads} render threads: {e}"))?;
    let p = Arc::new(p);
    pools.insert(threads, p.clone());
    Ok(p)
}

/// A job's body and breakdown, as Python objects.
type Bodies = (Py<PyBytes>, Py<PyBytes>);

/// Render many (provider, commit, options) jobs in one crossing.
///
/// `commits` are bytes or item tuples, each decoded once however many jobs use it;
/// `jobs` are `(provider, index into commits, options JSON)`.  With the GIL released,
/// the commits are decoded and the jobs rendered in parallel: on rayon's global pool
/// (all cores, or `RAYON_NUM_THREADS`) when `threads` is None, else on a pool of that
/// many threads.  Returns, per job in order, `(body, meta)` or the error message.
/// Every body is held until the call returns: batch by what fits in memory.
#[pyfunction]
#[pyo3(signature = (commits, jobs, threads = None))]
fn render_batch<'py>(
    py: Python<'py>,
    commits: Vec<Bound<'py, PyAny>>,
    jobs: Vec<(PyBackedStr, usize, PyBackedBytes)>,
    threads: Option<usize>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let pool = match threads {
        None => None,
        Some(n) if (1..=MAX_THREADS).contains(&n) => Some(pool(n).map_err(PyValueError::new_err)?),
        Some(n) => {
            return Err(PyValueError::new_err(format!(
                "threads must be between 1 and {MAX_THREADS}, not {n}"
            )))
        }
    };
    for (k, (provider, c, _)) in jobs.iter().enumerate() {
        wire(provider).map_err(|e| PyValueError::new_err(format!("jobs[{k}]: {e}")))?;
        if *c >= commits.len() {
            return Err(PyValueError::new_err(format!(
                "jobs[{k}]: commit index {c} out of range ({} commits)",
                commits.len()
            )));
        }
    }
    let mut pending: Vec<Pending> = commits
        .iter()
        .map(|c| gather(py, c))
        .collect::<PyResult<_>>()?;
    let pending_ref = &mut pending;
    let jobs_ref = &jobs;
    let (decoded, rendered) = py.detach(move || {
        let mut work = move || {
            let decoded: Vec<Result<Items, String>> =
                pending_ref.par_iter_mut().map(|p| p.resolve()).collect();
            let rendered: Vec<Result<Bodies, String>> = jobs_ref
                .par_iter()
                .map(|(provider, c, options)| {
                    let items = decoded[*c].as_ref().map_err(|e| e.clone())?;
                    // Each worker writes into its own kept buffer (a fresh one per body
                    // cost more in page faults than the render) and copies the body into
                    // its `bytes` object itself, taking the GIL just for that copy.
                    let buf = BODY.with(|b| b.take());
                    let out = render::write_request(wire(provider)?, items, options, buf)?;
                    let bodies = Python::attach(|py| {
                        (
                            PyBytes::new(py, &out.body).unbind(),
                            PyBytes::new(py, &out.meta).unbind(),
                        )
                    });
                    keep_body(out.body);
                    Ok(bodies)
                })
                .collect();
            (decoded, rendered)
        };
        match &pool {
            Some(p) => p.install(work),
            None => work(),
        }
    });
    for (p, items) in pending.into_iter().zip(&decoded) {
        if let Ok(items) = items {
            p.remember(py, items);
        }
    }
    rendered
        .into_iter()
        .map(|r| {
            Ok(match r {
                Ok((body, meta)) => (body, meta).into_pyobject(py)?.into_any(),
                Err(e) => e.into_pyobject(py)?.into_any(),
            })
        })
        .collect()
}

/// The item caches: `items` / `bytes` / `hits` / `misses` of the content-keyed cache of
/// prepared items, `objects` / `object_bytes` / `object_hits` of the identity table in
/// front of it, and `capacity` (the bound of each, in bytes).
#[pyfunction]
fn item_cache_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let s = cache::stats();
    let (objects, object_bytes, object_hits) = table_stats();
    let d = PyDict::new(py);
    d.set_item("items", s.items)?;
    d.set_item("bytes", s.bytes)?;
    d.set_item("hits", s.hits)?;
    d.set_item("misses", s.misses)?;
    d.set_item("objects", objects)?;
    d.set_item("object_bytes", object_bytes)?;
    d.set_item("object_hits", object_hits)?;
    d.set_item("capacity", s.capacity)?;
    Ok(d)
}

/// Empty both item caches and reset their counters.
#[pyfunction]
fn item_cache_clear(py: Python<'_>) {
    table_clear(py);
    cache::clear();
}

/// Bound each item cache to `capacity` bytes (0: cache nothing); applies from the next
/// insert.
#[pyfunction]
fn set_item_cache_capacity(capacity: usize) {
    cache::set_capacity(capacity);
}

/// Add the rendering functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MAX_DEPTH", MAX_DEPTH)?;
    m.add_function(wrap_pyfunction!(render_context, m)?)?;
    m.add_function(wrap_pyfunction!(render_request, m)?)?;
    m.add_function(wrap_pyfunction!(render_batch, m)?)?;
    m.add_function(wrap_pyfunction!(item_cache_stats, m)?)?;
    m.add_function(wrap_pyfunction!(item_cache_clear, m)?)?;
    m.add_function(wrap_pyfunction!(set_item_cache_capacity, m)?)?;
    Ok(())
}
