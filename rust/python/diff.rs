//! Bindings of the commit diff: both item lists cross once (see `commit.rs`).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use super::commit::items_of;
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
/// items: each a tuple of ContextItem, or bytes of a whole commit's MessagePack.
#[pyfunction]
fn diff_items(py: Python<'_>, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<DiffTuple> {
    let named = |which: &str, e: PyErr| {
        let msg = format!("commit {which}: {}", e.value(py));
        if e.is_instance_of::<PyTypeError>(py) {
            PyTypeError::new_err(msg)
        } else {
            PyValueError::new_err(msg)
        }
    };
    let a = items_of(py, a).map_err(|e| named("a", e))?;
    let b = items_of(py, b).map_err(|e| named("b", e))?;
    let d = py.detach(|| diff::diff(&a, &b));
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
