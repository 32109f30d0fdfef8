//! Bindings of the renderer: bytes in, bytes out, one crossing per commit.
//!
//! Python hands over the commit as msgspec MessagePack and the options as JSON; the
//! GIL is released for the whole render.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

use crate::render::{self, Wire};

#[pyfunction]
fn render_context<'py>(
    py: Python<'py>,
    commit: PyBackedBytes,
    options: PyBackedBytes,
) -> PyResult<Bound<'py, PyBytes>> {
    let out = py
        .detach(|| render::render_context(&commit, &options))
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

#[pyfunction]
fn render_request<'py>(
    py: Python<'py>,
    provider: &str,
    commit: PyBackedBytes,
    options: PyBackedBytes,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let wire = Wire::from_name(provider).ok_or_else(|| {
        PyValueError::new_err(format!(
            "no built-in wire format {provider:?}; known: anthropic, openai-chat, openai-responses, gemini"
        ))
    })?;
    let buf = BODY.with(|b| b.take());
    let out = py
        .detach(|| render::render_request_in(wire, &commit, &options, buf))
        .map_err(PyValueError::new_err)?;
    let result = (PyBytes::new(py, &out.body), PyBytes::new(py, &out.meta));
    if out.body.capacity() <= KEEP_BODY_BUFFER {
        BODY.with(|b| b.set(out.body));
    }
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

/// Add the rendering functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(render_context, m)?)?;
    m.add_function(wrap_pyfunction!(render_request, m)?)?;
    Ok(())
}
