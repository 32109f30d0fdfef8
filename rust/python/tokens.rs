//! Bindings of the token counter.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyBytes;

use crate::tokens::{self, Encoding};

fn encoding(name: &str) -> PyResult<Encoding> {
    Encoding::from_name(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown encoding {name:?}; known: o200k_base, cl100k_base"
        ))
    })
}

/// Count the tokens of one text (no special tokens); `cached` uses the content cache.
/// Raises UnicodeEncodeError for lone surrogates (ctxrules.tokenizers cleans them).
#[pyfunction]
#[pyo3(signature = (encoding_name, text, cached = true))]
fn count_tokens(
    py: Python<'_>,
    encoding_name: &str,
    text: PyBackedStr,
    cached: bool,
) -> PyResult<usize> {
    let enc = encoding(encoding_name)?;
    Ok(py.detach(|| {
        if cached {
            tokens::count_cached(enc, &text)
        } else {
            tokens::count(enc, &text)
        }
    }))
}

/// Count many texts in one call, on all cores with the GIL released; in input order.
#[pyfunction]
#[pyo3(signature = (encoding_name, texts, cached = true))]
fn count_tokens_batch(
    py: Python<'_>,
    encoding_name: &str,
    texts: Vec<PyBackedStr>,
    cached: bool,
) -> PyResult<Vec<usize>> {
    let enc = encoding(encoding_name)?;
    Ok(py.detach(|| {
        let refs: Vec<&str> = texts.iter().map(|t| &**t).collect();
        if cached {
            tokens::count_batch_cached(enc, &refs)
        } else {
            tokens::count_batch(enc, &refs)
        }
    }))
}

/// The token byte strings of an encoding in rank order (to build tiktoken offline).
#[pyfunction]
fn encoding_ranks<'py>(py: Python<'py>, encoding_name: &str) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let enc = encoding(encoding_name)?;
    let ranks = py.detach(|| tokens::ranks(enc));
    Ok(ranks.iter().map(|b| PyBytes::new(py, b)).collect())
}

/// Texts held by the content cache.
#[pyfunction]
fn token_cache_len() -> usize {
    tokens::cache_len()
}

/// (entries, hits, misses, capacity) of the content cache.
#[pyfunction]
fn token_cache_stats() -> (usize, u64, u64, usize) {
    let s = tokens::cache_stats();
    (s.entries, s.hits, s.misses, s.capacity)
}

/// Drop every cached count and reset the hit/miss counters.
#[pyfunction]
fn token_cache_clear() {
    tokens::cache_clear()
}

/// Add the token-counting functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "ENCODINGS",
        Encoding::ALL.iter().map(|e| e.name()).collect::<Vec<_>>(),
    )?;
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens_batch, m)?)?;
    m.add_function(wrap_pyfunction!(encoding_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(token_cache_len, m)?)?;
    m.add_function(wrap_pyfunction!(token_cache_stats, m)?)?;
    m.add_function(wrap_pyfunction!(token_cache_clear, m)?)?;
    Ok(())
}
