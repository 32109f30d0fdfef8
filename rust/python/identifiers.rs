//! Bindings of the identifier scanner.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;

use crate::identifiers;

/// The exact identifiers of many class strings (see `crate::identifiers`), one flat list
/// per text of `kind, start, end` triples, in order; the GIL is released.
#[pyfunction]
fn identifier_spans(py: Python<'_>, texts: Vec<PyBackedBytes>) -> Vec<Vec<u32>> {
    py.detach(|| {
        texts
            .iter()
            .map(|t| {
                identifiers::spans(t)
                    .into_iter()
                    .flat_map(|s| [s.kind as u32, s.start as u32, s.end as u32])
                    .collect()
            })
            .collect()
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(identifier_spans, m)?)
}
