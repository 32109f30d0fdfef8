//! The incremental renderer of one session as a Python object: each request rendered
//! from the previous one's body, kept between calls (`render::session`).
//!
//! The engine prepares a session's requests one call at a time, so nothing borrowed can
//! live from one call to the next: the object keeps owned data only — the previous
//! request's items (shared handles of the prepared items), its options' JSON, its
//! estimate frame, where its body stood after each part and block and its estimate's
//! segment of each block (`Trace`) and the body itself (the `bytes` handed to Python,
//! immutable) — and each call lays the previous plan out again from them (a few words
//! per block) before `Session::next` writes what is new.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyTuple};

use super::commit::items_of_after;
use super::estimate::{PyEstimate, PyFrame};
use super::render::{unfilled, wire};
use crate::commit::Items;
use crate::estimate::Frame;
use crate::render::session::{Reuse, Session, Trace};
use crate::render::{input, Wire};

/// One render's body, breakdown, estimate (None unless a frame was given) and the
/// bytes it copied from the previous body.
type Next<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Option<Py<PyEstimate>>,
    usize,
);

/// What is kept of the previous request.
struct Kept {
    items: Items,
    /// The item tuple `items` were read from (kept alive, so that an object at the same
    /// position of the next tuple is provably the same; None when it was not a tuple).
    tuple: Option<Py<PyTuple>>,
    options: PyBackedBytes,
    /// Held so that the next request's frame is compared by identity with a live one.
    frame: Option<Arc<Frame>>,
    trace: Trace,
    body: Py<PyBytes>,
}

/// The renderer of one session's successive requests for one built-in wire format.
///
/// Each `render` returns exactly the bytes `render_request` returns for the same commit
/// and options; what it provably shares with the previous request's body (the same head,
/// then message by message the same blocks) is copied from that body, and only the rest
/// is written.  Any commit may follow any other: when the beginning changed (a rule
/// rewrote an early item, another model, a fork) less or nothing is reused.
#[pyclass(module = "ctxrules._core", name = "SessionRenderer")]
pub struct PySessionRenderer {
    wire: Wire,
    provider: String,
    prev: Option<Kept>,
    renders: u64,
    reused: u64,
    written: u64,
    items_kept: u64,
}

#[pymethods]
impl PySessionRenderer {
    #[new]
    fn new(provider: &str) -> PyResult<Self> {
        Ok(PySessionRenderer {
            wire: wire(provider).map_err(PyValueError::new_err)?,
            provider: provider.to_owned(),
            prev: None,
            renders: 0,
            reused: 0,
            written: 0,
            items_kept: 0,
        })
    }

    /// The wire format's name.
    #[getter]
    fn provider(&self) -> &str {
        &self.provider
    }

    /// `(requests rendered, body bytes copied from a previous body, body bytes written)`.
    #[getter]
    fn stats(&self) -> (u64, u64, u64) {
        (self.renders, self.reused, self.written)
    }

    /// Items taken from the previous request by position (the same object at the same
    /// place of the item tuple) instead of being looked up, over every render.
    #[getter]
    fn items_kept(&self) -> u64 {
        self.items_kept
    }

    /// Forget the previous request: the next one is written in full.
    fn reset(&mut self) {
        self.prev = None;
    }

    /// Render the next request of the session: `(body, meta, estimate or None, bytes
    /// reused)`, as `render_request` (the estimate made from the same plan when a
    /// `frame` is given).
    #[pyo3(signature = (commit, options, frame = None))]
    fn render<'py>(
        &mut self,
        py: Python<'py>,
        commit: &Bound<'py, PyAny>,
        options: PyBackedBytes,
        frame: Option<PyRef<'py, PyFrame>>,
    ) -> PyResult<Next<'py>> {
        let prev_tuple = self
            .prev
            .as_ref()
            .and_then(|k| Some((k.tuple.as_ref()?.bind(py).clone(), &k.items[..])));
        let (items, kept) = items_of_after(py, commit, prev_tuple.as_ref().map(|(t, i)| (t, *i)))?;
        drop(prev_tuple);
        let tuple = commit.cast::<PyTuple>().ok().map(|t| t.clone().unbind());
        let frame = frame.map(|f| f.frame.clone());
        let wire = self.wire;
        let mut prev = self.prev.take();
        // The trace moves into the session and back out (no copy of its vectors); a
        // failure before the session is made hands it back untouched.
        let trace = prev.as_mut().map(|k| std::mem::take(&mut k.trace));
        let prev_ref = prev.as_ref();
        let (frame_ref, options_ref, items_ref) = (frame.as_deref(), &options, &items);
        let step = py.detach(move || -> Result<_, (String, Option<Trace>)> {
            let opts = match input::parse_options(options_ref) {
                Ok(o) => o,
                Err(e) => return Err((e, trace)),
            };
            // The previous options, parsed apart only when they differ: `same_tail`
            // reuses the tail of a request with the very same parsed options.
            let prev_opts = match prev_ref {
                Some(k) if k.options[..] != options_ref[..] => {
                    match input::parse_options(&k.options) {
                        Ok(o) => Some(o),
                        Err(e) => return Err((e, trace)),
                    }
                }
                _ => None,
            };
            let mut session = match (prev_ref, trace) {
                (Some(k), Some(trace)) => Session::resume(
                    wire,
                    &k.items,
                    prev_opts.as_ref().unwrap_or(&opts),
                    k.frame.as_deref(),
                    trace,
                ),
                _ => Session::new(wire),
            };
            let (mut new, mut meta) = (Vec::new(), Vec::new());
            let (reuse, estimate) =
                session.next(items_ref, &opts, &mut new, Some(&mut meta), frame_ref);
            let trace = session.into_trace().unwrap_or_default();
            Ok((new, meta, reuse, estimate, trace))
        });
        let (new, meta, reuse, estimate, trace) = match step {
            Ok(s) => s,
            Err((e, trace)) => {
                if let (Some(k), Some(t)) = (prev.as_mut(), trace) {
                    k.trace = t;
                }
                self.prev = prev;
                return Err(PyValueError::new_err(e));
            }
        };
        let body = assemble(py, prev.as_ref().map(|k| k.body.bind(py)), reuse, &new)?;
        debug_assert_eq!(body.as_bytes().len(), trace.len);
        self.renders += 1;
        self.reused += reuse.bytes() as u64;
        self.written += new.len() as u64;
        self.items_kept += kept as u64;
        let estimate = match (estimate, &frame) {
            (Some(e), Some(f)) => Some(Py::new(py, PyEstimate::new(e, Arc::clone(f)))?),
            _ => None,
        };
        self.prev = Some(Kept {
            items,
            tuple,
            options,
            frame,
            trace,
            body: body.clone().unbind(),
        });
        Ok((body, PyBytes::new(py, &meta), estimate, reuse.bytes()))
    }
}

/// The body `reuse` describes, as one new `bytes`: `prev`'s reused bytes around `new`.
fn assemble<'py>(
    py: Python<'py>,
    prev: Option<&Bound<'py, PyBytes>>,
    reuse: Reuse,
    new: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let prev: &[u8] = prev.map_or(&[], |p| p.as_bytes());
    // Sliced (bounds-checked) before anything is copied.
    let head = &prev[..reuse.head];
    let tail = reuse.tail.map_or(&[][..], |(a, b)| &prev[a..b]);
    let body = unfilled(py, head.len() + new.len() + tail.len())?;
    // SAFETY: `body.ptr` has room for exactly these three slices' bytes, all written
    // here before the object is handed out; the previous body is a distinct object.
    unsafe {
        let mut at = body.ptr;
        for part in [head, new, tail] {
            std::ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
            at = at.add(part.len());
        }
    }
    Ok(body.obj.into_bound(py))
}

/// Add the class to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySessionRenderer>()
}
