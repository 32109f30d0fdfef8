//! ctxrules core: the hot paths of ctxrules as a plain Rust library.
//!
//! Token counting lives here; commit diffing and rendering join it.  The PyO3 layer in
//! `python.rs` is thin and only compiled with the `python` feature, so the crate is
//! built and tested with `cargo test` without a Python interpreter.

pub mod diff;
pub mod render;
pub mod tokens;

#[cfg(feature = "python")]
mod python;
