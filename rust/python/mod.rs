//! PyO3 bindings: a thin layer over the plain crate, one file per area.  Python
//! validates and cleans input (e.g. lone surrogates) before calling; every function
//! releases the GIL around real work and crosses the boundary once per call.

use pyo3::prelude::*;

mod commit;
mod diff;
mod estimate;
mod identifiers;
mod incremental;
mod render;
mod tokens;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    tokens::register(m)?;
    render::register(m)?;
    estimate::register(m)?;
    diff::register(m)?;
    incremental::register(m)?;
    identifiers::register(m)?;
    Ok(())
}
