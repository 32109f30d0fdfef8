//! ctxrules core: the hot paths of ctxrules as a plain Rust library.
//!
//! Token counting, commit diffing, rendering and finding identifiers.  `commit` reads the commit Python
//! hands over (one reader for the diff and the renderer); `json` writes JSON.  The PyO3
//! layer in `python/` is thin and only compiled with the `python` feature, so the crate
//! is built and tested with `cargo test` without a Python interpreter.

pub mod commit;
pub mod diff;
pub mod estimate;
#[doc(hidden)]
pub mod fuzzing;
pub mod identifiers;
pub mod json;
pub mod render;
pub mod tokens;

#[cfg(feature = "python")]
mod python;
