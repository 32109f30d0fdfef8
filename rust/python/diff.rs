//! Bindings of the commit diff: both item lists cross once, as msgpack bytes.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::diff;

type DiffTuple = (
    Vec<String>,
    Vec<String>,
    Vec<(String, String, String)>,
    Vec<String>,
    usize,
    u64,
);

/// `(added, removed, changed, rewritten, prefix_items, prefix_tokens)` of two commits'
/// msgpack-encoded item lists.
#[pyfunction]
fn diff_items(py: Python<'_>, a: &[u8], b: &[u8]) -> PyResult<DiffTuple> {
    let d = py
        .detach(|| diff::diff_msgpack(a, b))
        .map_err(PyValueError::new_err)?;
    Ok((
        d.added,
        d.removed,
        d.changed,
        d.rewritten,
        d.prefix_items,
        d.prefix_tokens,
    ))
}

/// Add the diff function to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(diff_items, m)?)?;
    Ok(())
}
