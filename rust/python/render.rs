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

use super::commit::{gather, gather_session, items_of, table_clear, table_stats, Pending};
use super::estimate::{PyEstimate, PyFrame};
use crate::commit::{cache, Items, MAX_DEPTH};
use crate::estimate::{Estimate, Frame};
use crate::render::session::{Reuse, Session};
use crate::render::{self, input, Wire};

pub(super) fn wire(provider: &str) -> Result<Wire, String> {
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

/// The estimate of a render as a Python object, if one was made.
fn estimate_object(
    py: Python<'_>,
    e: Option<Estimate>,
    frame: Option<&Arc<Frame>>,
) -> PyResult<Option<Py<PyEstimate>>> {
    match (e, frame) {
        (Some(e), Some(f)) => Ok(Some(Py::new(py, PyEstimate::new(e, f.clone()))?)),
        _ => Ok(None),
    }
}

/// The frames of a call, each one's `Arc` (`None` where none was given).
fn frames_of(frames: Option<Vec<Option<PyRef<'_, PyFrame>>>>) -> Vec<Option<Arc<Frame>>> {
    frames
        .unwrap_or_default()
        .iter()
        .map(|f| f.as_ref().map(|f| f.frame.clone()))
        .collect()
}

/// One render's body, breakdown and estimate (None unless a frame was given).
type Single<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Option<Py<PyEstimate>>,
);

/// The request body of one built-in wire format for a commit, its breakdown, and —
/// given a `frame` — its billed-prompt estimate, made from the same plan.
#[pyfunction]
#[pyo3(signature = (provider, commit, options, frame = None))]
fn render_request<'py>(
    py: Python<'py>,
    provider: &str,
    commit: &Bound<'py, PyAny>,
    options: PyBackedBytes,
    frame: Option<PyRef<'py, PyFrame>>,
) -> PyResult<Single<'py>> {
    let wire = wire(provider).map_err(PyValueError::new_err)?;
    let items = items_of(py, commit)?;
    let buf = BODY.with(|b| b.take());
    let frame = frame.map(|f| f.frame.clone());
    let out = py
        .detach(|| render::write_request_estimated(wire, &items, &options, buf, frame.as_deref()))
        .map_err(PyValueError::new_err)?;
    let result = (
        PyBytes::new(py, &out.body),
        PyBytes::new(py, &out.meta),
        estimate_object(py, out.estimate, frame.as_ref())?,
    );
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

/// A job's body and breakdown, as Python objects, and its estimate.
type Bodies = (Py<PyBytes>, Py<PyBytes>, Option<Estimate>);

/// Render many (provider, commit, options) jobs in one crossing.
///
/// `commits` are bytes or item tuples, each decoded once however many jobs use it;
/// `jobs` are `(provider, index into commits, options JSON)`; `frames`, when given,
/// one estimate frame (or None) per job.  With the GIL released,
/// the commits are decoded and the jobs rendered in parallel: on rayon's global pool
/// (all cores, or `RAYON_NUM_THREADS`) when `threads` is None, else on a pool of that
/// many threads.  Returns, per job in order, `(body, meta, estimate or None)` or the
/// error message.  Every body is held until the call returns: batch by what fits in
/// memory.
#[pyfunction]
#[pyo3(signature = (commits, jobs, threads = None, frames = None))]
fn render_batch<'py>(
    py: Python<'py>,
    commits: Vec<Bound<'py, PyAny>>,
    jobs: Vec<(PyBackedStr, usize, PyBackedBytes)>,
    threads: Option<usize>,
    frames: Option<Vec<Option<PyRef<'py, PyFrame>>>>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let pool = pool_of(threads)?;
    let frames = frames_of(frames);
    if !frames.is_empty() && frames.len() != jobs.len() {
        return Err(PyValueError::new_err(format!(
            "{} frames for {} jobs",
            frames.len(),
            jobs.len()
        )));
    }
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
    let frames_ref = &frames;
    let (decoded, rendered) = py.detach(move || {
        let mut work = move || {
            let decoded: Vec<Result<Items, String>> =
                pending_ref.par_iter_mut().map(|p| p.resolve()).collect();
            let rendered: Vec<Result<Bodies, String>> = jobs_ref
                .par_iter()
                .enumerate()
                .map(|(k, (provider, c, options))| {
                    let items = decoded[*c].as_ref().map_err(|e| e.clone())?;
                    let frame = frames_ref.get(k).and_then(|f| f.as_deref());
                    // Each worker writes into its own kept buffer (a fresh one per body
                    // cost more in page faults than the render) and copies the body into
                    // its `bytes` object itself, taking the GIL just for that copy.
                    let buf = BODY.with(|b| b.take());
                    let out = render::write_request_estimated(
                        wire(provider)?,
                        items,
                        options,
                        buf,
                        frame,
                    )?;
                    let bodies = Python::attach(|py| {
                        (
                            PyBytes::new(py, &out.body).unbind(),
                            PyBytes::new(py, &out.meta).unbind(),
                        )
                    });
                    keep_body(out.body);
                    Ok((bodies.0, bodies.1, out.estimate))
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
        .enumerate()
        .map(|(k, r)| {
            Ok(match r {
                Ok((body, meta, e)) => {
                    let e = estimate_object(py, e, frames.get(k).and_then(Option::as_ref))?;
                    (body, meta, e).into_pyobject(py)?.into_any()
                }
                Err(e) => e.into_pyobject(py)?.into_any(),
            })
        })
        .collect()
}

/// A chain after the first pass of `render_sessions`: request `k`'s body is made from
/// the previous body as `reuse[k]` says, around `suffixes[ends[k - 1]..ends[k]]`; its
/// breakdown is `metas[meta_ends[k - 1]..meta_ends[k]]` (when asked for).  One buffer
/// each for the whole chain: a buffer per request cost more in allocations and
/// regrowth than the small new parts of a growing session took to write.
#[derive(Default)]
struct Written {
    reuse: Vec<Reuse>,
    estimates: Vec<Option<Estimate>>,
    suffixes: Vec<u8>,
    ends: Vec<usize>,
    metas: Vec<u8>,
    meta_ends: Vec<usize>,
}

impl Written {
    /// The `k`-th piece of `buf` cut at `ends`.
    fn piece<'b>(buf: &'b [u8], ends: &[usize], k: usize) -> &'b [u8] {
        let start = if k == 0 { 0 } else { ends[k - 1] };
        &buf[start..ends[k]]
    }
}

/// A `bytes` object made with the GIL and filled without it: `ptr` is its buffer.  Only
/// this call holds a reference to it until it is returned, so nothing else reads or
/// writes the buffer meanwhile.
pub(super) struct Unfilled {
    pub(super) obj: Py<PyBytes>,
    pub(super) ptr: *mut u8,
}

// SAFETY: a chain's bodies are handed to one worker (by `&mut`), which fills them in
// order and reads each back only for the next body of the same chain.
unsafe impl Send for Unfilled {}

/// A new `bytes` of `len` bytes whose contents are to be written through `ptr`.
pub(super) fn unfilled(py: Python<'_>, len: usize) -> PyResult<Unfilled> {
    let len = pyo3::ffi::Py_ssize_t::try_from(len)
        .map_err(|_| PyValueError::new_err("a request body too large for bytes"))?;
    // SAFETY: a NULL source asks CPython for an uninitialised buffer of `len` bytes,
    // which the caller fills completely before the object reaches Python.
    unsafe {
        let raw = pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len);
        let obj = Bound::from_owned_ptr_or_err(py, raw)?;
        let ptr = pyo3::ffi::PyBytes_AsString(obj.as_ptr()).cast::<u8>();
        Ok(Unfilled {
            obj: obj.cast_into_unchecked::<PyBytes>().unbind(),
            ptr,
        })
    }
}

/// One chain's result: its bodies, breakdowns (empty unless asked for), the bytes each
/// body reused and each request's estimate (None where its options had no frame); or
/// the error that stopped it.
type ChainResult<'py> = (
    Bound<'py, PyAny>,
    Vec<Py<PyBytes>>,
    Vec<usize>,
    Vec<Option<Py<PyEstimate>>>,
);

/// Render the successive requests of sessions incrementally, in one crossing.
///
/// `sessions` are lists of commits (bytes or item tuples, see `render_batch`); each
/// item object is read once per session however many of its commits hold it.
/// `options` are option JSONs; `chains` are `(provider, session index, options)`: one
/// provider's view of a session's requests in order, request `k` the session's commit
/// `k` rendered with the options at index `options[k]`.  With the GIL released the
/// sessions are decoded, then each chain is rendered in order by
/// `render::session::Session` (every body exactly its full render, starting from the
/// previous body's bytes where that is proven the same), chains in parallel (see
/// `render_batch` for `threads`; with fewer chains than threads a chain is cut into
/// pieces, see `cut`).  Each body is written once into its `bytes`: the new
/// parts are written first, then all the objects are made with the GIL, then each is
/// filled without it.  `frames`, when given, holds an estimate frame (or None) per
/// options: each request rendered with options that have one is estimated from its
/// plan too.  Returns, per chain, `(bodies, metas, reused, estimates)` — the
/// breakdowns only with `meta` — or `(error, [], [], [])` for a chain that could not
/// be rendered.  Every body is held until the call returns: batch by what fits in
/// memory.
#[pyfunction]
#[pyo3(signature = (sessions, options, chains, threads = None, meta = true, frames = None))]
fn render_sessions<'py>(
    py: Python<'py>,
    sessions: Vec<Vec<Bound<'py, PyAny>>>,
    options: Vec<PyBackedBytes>,
    chains: Vec<(PyBackedStr, usize, Vec<usize>)>,
    threads: Option<usize>,
    meta: bool,
    frames: Option<Vec<Option<PyRef<'py, PyFrame>>>>,
) -> PyResult<Vec<ChainResult<'py>>> {
    let pool = pool_of(threads)?;
    let frames = frames_of(frames);
    if !frames.is_empty() && frames.len() != options.len() {
        return Err(PyValueError::new_err(format!(
            "{} frames for {} options",
            frames.len(),
            options.len()
        )));
    }
    for (k, (provider, s, which)) in chains.iter().enumerate() {
        let bad = |e: String| PyValueError::new_err(format!("chains[{k}]: {e}"));
        wire(provider).map_err(bad)?;
        let Some(commits) = sessions.get(*s) else {
            return Err(bad(format!(
                "session index {s} out of range ({} sessions)",
                sessions.len()
            )));
        };
        if which.len() != commits.len() {
            return Err(bad(format!(
                "{} options for the {} commits of session {s}",
                which.len(),
                commits.len()
            )));
        }
        if let Some(o) = which.iter().find(|&&o| o >= options.len()) {
            return Err(bad(format!(
                "options index {o} out of range ({} options)",
                options.len()
            )));
        }
    }
    let mut pending: Vec<_> = sessions
        .iter()
        .map(|s| gather_session(py, s))
        .collect::<PyResult<_>>()?;
    let pending_ref = &mut pending;
    let (options_ref, chains_ref, frames_ref) = (&options, &chains, &frames);
    let run = |work: &mut (dyn FnMut() + Send)| match &pool {
        Some(p) => p.install(work),
        None => work(),
    };
    // 1. Decode the sessions, cut the chains for the workers and write each request's
    // new part.
    let mut decoded: Vec<Result<Vec<Items>, String>> = Vec::new();
    let mut pieces: Vec<Piece> = Vec::new();
    let mut written: Vec<Result<Written, String>> = Vec::new();
    let (decoded_ref, pieces_ref, written_ref) = (&mut decoded, &mut pieces, &mut written);
    py.detach(|| {
        run(&mut || {
            *decoded_ref = pending_ref.par_iter_mut().map(|p| p.resolve()).collect();
            let parsed: Vec<Result<input::Options<'_>, String>> = options_ref
                .iter()
                .map(|o| input::parse_options(o))
                .collect();
            let threads = rayon::current_num_threads();
            *pieces_ref = cut(chains_ref, decoded_ref, threads);
            *written_ref = pieces_ref
                .par_iter()
                .map(|&(c, start, end)| {
                    let (provider, s, which) = &chains_ref[c];
                    let items = decoded_ref[*s].as_ref().map_err(|e| e.clone())?;
                    let mut session = Session::new(wire(provider)?);
                    let mut w = Written::default();
                    for k in start..end {
                        let opts = parsed[which[k]]
                            .as_ref()
                            .map_err(|e| format!("request {k}: {e}"))?;
                        let metas = meta.then_some(&mut w.metas);
                        let frame = frames_ref.get(which[k]).and_then(|f| f.as_deref());
                        let (reuse, e) =
                            session.next(&items[k], opts, &mut w.suffixes, metas, frame);
                        w.reuse.push(reuse);
                        w.estimates.push(e);
                        w.ends.push(w.suffixes.len());
                        w.meta_ends.push(w.metas.len());
                    }
                    Ok(w)
                })
                .collect();
        })
    });
    for (p, items) in pending.into_iter().zip(&decoded) {
        if items.is_ok() {
            p.remember(py);
        }
    }
    // 2. Make every body's object (with the GIL), then 3. fill them (without).
    let mut made: Vec<Vec<Unfilled>> = Vec::with_capacity(written.len());
    for w in &written {
        let Ok(w) = w else {
            made.push(Vec::new());
            continue;
        };
        let mut bodies = Vec::with_capacity(w.reuse.len());
        for (k, reuse) in w.reuse.iter().enumerate() {
            let new = Written::piece(&w.suffixes, &w.ends, k).len();
            bodies.push(unfilled(py, reuse.bytes() + new)?);
        }
        made.push(bodies);
    }
    let made_ref = &mut made;
    py.detach(|| {
        run(&mut || {
            written
                .par_iter()
                .zip(made_ref.par_iter_mut())
                .for_each(|(w, bodies)| {
                    let Ok(w) = w else {
                        return;
                    };
                    // No previous body yet: nothing is copied from it (a copy of zero
                    // bytes still needs a non-null pointer).
                    let mut prev: *const u8 = std::ptr::NonNull::dangling().as_ptr();
                    for (k, body) in bodies.iter_mut().enumerate() {
                        let (reuse, new) = (w.reuse[k], Written::piece(&w.suffixes, &w.ends, k));
                        // SAFETY: `body.ptr` has room for `reuse.bytes() + new.len()`
                        // bytes (its length); `prev` is the previous body of this chain,
                        // fully written, and `reuse` names only bytes of it
                        // (`Session::next`); the buffers are distinct.
                        unsafe {
                            let mut at = body.ptr;
                            std::ptr::copy_nonoverlapping(prev, at, reuse.head);
                            at = at.add(reuse.head);
                            std::ptr::copy_nonoverlapping(new.as_ptr(), at, new.len());
                            at = at.add(new.len());
                            if let Some((a, b)) = reuse.tail {
                                std::ptr::copy_nonoverlapping(prev.add(a), at, b - a);
                            }
                        }
                        prev = body.ptr;
                    }
                });
        })
    });
    // The pieces of a chain are consecutive: put each chain back together.
    let mut out: Vec<ChainResult<'py>> = Vec::with_capacity(chains.len());
    let mut parts = pieces.iter().zip(made.into_iter().zip(written)).peekable();
    for (c, (_, _, which)) in chains.iter().enumerate() {
        let (mut bodies, mut metas, mut reused) = (Vec::new(), Vec::new(), Vec::new());
        let mut estimates: Vec<Option<Py<PyEstimate>>> = Vec::new();
        let mut failed: Option<String> = None;
        while let Some((_, (made, w))) = parts.next_if(|(p, _)| p.0 == c) {
            match w {
                Ok(w) if failed.is_none() => {
                    bodies.extend(made.into_iter().map(|b| b.obj));
                    if meta {
                        metas.extend((0..w.reuse.len()).map(|k| {
                            PyBytes::new(py, Written::piece(&w.metas, &w.meta_ends, k)).unbind()
                        }));
                    }
                    reused.extend(w.reuse.iter().map(Reuse::bytes));
                    for e in w.estimates {
                        let k = estimates.len();
                        let frame = frames.get(which[k]).and_then(Option::as_ref);
                        estimates.push(estimate_object(py, e, frame)?);
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        out.push(match failed {
            None => (
                bodies.into_pyobject(py)?.into_any(),
                metas,
                reused,
                estimates,
            ),
            Some(e) => (
                e.into_pyobject(py)?.into_any(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
            ),
        });
    }
    Ok(out)
}

/// A piece of a chain the workers render on their own: `(chain, first request, end)`.
type Piece = (usize, usize, usize);

/// Cut the chains into pieces for `threads` workers.  With at least as many chains as
/// workers each chain is one piece; with fewer, a chain is cut into up to
/// `threads / chains` pieces of about equal numbers of items (what its bodies grow
/// with), so one long session uses every worker.  A piece's first request is written
/// in full: a cut costs one full render.
fn cut(
    chains: &[(PyBackedStr, usize, Vec<usize>)],
    decoded: &[Result<Vec<Items>, String>],
    threads: usize,
) -> Vec<Piece> {
    let per_chain = if chains.len() < threads {
        threads.div_ceil(chains.len().max(1))
    } else {
        1
    };
    let mut pieces = Vec::with_capacity(chains.len() * per_chain);
    for (c, (_, s, which)) in chains.iter().enumerate() {
        let n = which.len();
        let weight = |k: usize| match &decoded[*s] {
            Ok(items) => items[k].len() + 1,
            Err(_) => 1,
        };
        let total: usize = (0..n).map(weight).sum();
        let parts = per_chain.clamp(1, n.max(1));
        let (mut start, mut done, mut j) = (0, 0, 1);
        for k in 0..n {
            done += weight(k);
            if j < parts && k + 1 < n && done * parts >= total * j {
                pieces.push((c, start, k + 1));
                start = k + 1;
                j += 1;
            }
        }
        pieces.push((c, start, n));
    }
    pieces
}

/// The pool `threads` asks for (None: rayon's global pool).
fn pool_of(threads: Option<usize>) -> PyResult<Option<Arc<rayon::ThreadPool>>> {
    match threads {
        None => Ok(None),
        Some(n) if (1..=MAX_THREADS).contains(&n) => {
            Ok(Some(pool(n).map_err(PyValueError::new_err)?))
        }
        Some(n) => Err(PyValueError::new_err(format!(
            "threads must be between 1 and {MAX_THREADS}, not {n}"
        ))),
    }
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
    m.add_function(wrap_pyfunction!(render_sessions, m)?)?;
    m.add_function(wrap_pyfunction!(item_cache_stats, m)?)?;
    m.add_function(wrap_pyfunction!(item_cache_clear, m)?)?;
    m.add_function(wrap_pyfunction!(set_item_cache_capacity, m)?)?;
    Ok(())
}
