//! Bindings of the estimator: the frame Python hands over once per model profile and
//! render options (`EstimateFrame`), and a request's estimate (`Estimate`), which the
//! render functions return with the body when given a frame.  An estimate stays in
//! the core: Python reads its total, its breakpoints and what it shares with another
//! estimate (what the cache rules need) without its segments crossing, and asks for
//! the segments only to show them.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyDict;

use crate::estimate::{self, Estimate, Frame};

/// The rules an estimate is made under: a model profile's tokenizer and calibrations,
/// the vendor's tool prompt, framing and image rule, the tool declarations as the model
/// reads them (see `ctxrules.providers.estimate.estimate_frame`).  Made once per
/// profile and render options; the tool texts are counted when it is made.
#[pyclass(frozen, module = "ctxrules._core", name = "EstimateFrame")]
pub struct PyFrame {
    pub frame: Arc<Frame>,
}

#[pymethods]
impl PyFrame {
    #[new]
    fn new(py: Python<'_>, data: PyBackedBytes) -> PyResult<Self> {
        let frame = py
            .detach(|| Frame::parse(&data))
            .map_err(PyValueError::new_err)?;
        Ok(PyFrame {
            frame: Arc::new(frame),
        })
    }

    /// The specification's name of the rules (``anthropic-messages``, …).
    #[getter]
    fn wire(&self) -> &str {
        &self.frame.wire
    }

    /// The token encoding the estimate counts with.
    #[getter]
    fn encoding(&self) -> &'static str {
        self.frame.encoding.name()
    }
}

/// The billed-prompt estimate of one request (``input_tokens``), made with its body.
#[pyclass(frozen, module = "ctxrules._core", name = "Estimate")]
pub struct PyEstimate {
    e: Estimate,
    frame: Arc<Frame>,
    /// Running sum of the segments' tokens (`cumulative`).
    cum: Vec<u64>,
}

impl PyEstimate {
    pub fn new(e: Estimate, frame: Arc<Frame>) -> Self {
        let cum = e
            .tokens
            .iter()
            .scan(0u64, |t, n| {
                *t += n;
                Some(*t)
            })
            .collect();
        PyEstimate { e, frame, cum }
    }

    /// Segments before the first of the rules (the prefix segment, if any).
    fn lead(&self) -> usize {
        usize::from(self.e.prefix > 0)
    }
}

#[pymethods]
impl PyEstimate {
    /// Input + cache writes + cache reads, as the vendor's usage would report them.
    #[getter]
    fn input_tokens(&self) -> u64 {
        self.e.input_tokens
    }

    /// Tokens of the unrecorded harness prefix that lead the segments (0: none).
    #[getter]
    fn prefix_tokens(&self) -> u64 {
        self.e.prefix
    }

    fn __len__(&self) -> usize {
        self.e.len()
    }

    /// The same estimate led by ``prefix`` tokens the body does not hold.
    fn with_prefix(&self, prefix: u64) -> PyEstimate {
        PyEstimate::new(self.e.with_prefix(prefix), self.frame.clone())
    }

    /// ``(key, tokens, breakpoint TTL or None)`` of every segment in prefix order; the
    /// prefix segment's key is ``"unrecorded-prefix"``, the others' a hex digest of
    /// their bytes.
    fn segments(&self) -> Vec<(String, u64, Option<String>)> {
        let lead = self.lead();
        let mut bps = self.e.breakpoints.iter().peekable();
        let mut out = Vec::with_capacity(self.e.len());
        if lead > 0 {
            out.push(("unrecorded-prefix".to_string(), self.e.tokens[0], None));
        }
        for (i, key) in self.e.keys.iter().enumerate() {
            let ttl = bps.next_if(|(j, _)| *j == i).map(|(_, t)| t.clone());
            out.push((format!("{key:032x}"), self.e.tokens[lead + i], ttl));
        }
        out
    }

    /// What the estimate applied, as ``PromptEstimate.rules`` states it.
    fn rules<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let f = &self.frame;
        d.set_item("tokenizer", f.encoding.name())?;
        d.set_item("calibration", f.calibration)?;
        d.set_item("structured_calibration", f.structured_calibration)?;
        d.set_item("tool_prompt_tokens", self.e.tool_prompt)?;
        d.set_item("framing_tokens", self.e.framing_tokens())?;
        d.set_item("image_tokens", self.e.images)?;
        d.set_item("content_tokens", self.e.content_tokens())?;
        d.set_item("unrecorded_prefix_tokens", self.e.prefix)?;
        d.set_item("wire", &f.wire)?;
        let stored = f.framing.stored_conversation as u64;
        if self.e.unknown_images > 0 || stored > 0 || self.e.unknown_documents > 0 {
            // Content of unknown size: flagged, with the range it implies.
            d.set_item("unknown_image_sizes", self.e.unknown_images)?;
            let unknown = PyDict::new(py);
            if self.e.unknown_documents > 0 {
                unknown.set_item("document_text", self.e.unknown_documents)?;
            }
            if stored > 0 {
                unknown.set_item("stored_conversation", 1)?;
            }
            d.set_item("unknown_content", unknown)?;
            let total = self.e.input_tokens;
            d.set_item(
                "input_tokens_range",
                vec![total, total + self.e.unknown_extra + stored],
            )?;
        }
        Ok(d)
    }

    /// ``(segment, tokens up to and with it, TTL)`` of each cache breakpoint, in order.
    fn breakpoints(&self) -> Vec<(usize, u64, String)> {
        let lead = self.lead();
        self.e
            .breakpoints
            .iter()
            .map(|(i, ttl)| (lead + i, self.cum[lead + i], ttl.clone()))
            .collect()
    }

    /// Tokens of the segments up to and with segment ``i``.
    fn cumulative(&self, i: usize) -> PyResult<u64> {
        self.cum
            .get(i)
            .copied()
            .ok_or_else(|| PyValueError::new_err(format!("no segment {i} of {}", self.cum.len())))
    }

    /// ``(segments, tokens)`` at the start of this estimate identical to ``previous``'s
    /// (the tokens are this estimate's).  Only core estimates compare: their segments'
    /// identities are the core's own, so another estimate shares nothing with this one.
    fn shared_prefix(&self, previous: &Bound<'_, PyAny>) -> (usize, u64) {
        match previous.cast::<PyEstimate>() {
            Ok(p) => self.e.shared_prefix(&p.get().e),
            Err(_) => (0, 0),
        }
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyEstimate>().is_ok_and(|o| {
            let o = o.get();
            o.e == self.e
                && o.frame.wire == self.frame.wire
                && o.frame.encoding == self.frame.encoding
                && o.frame.calibration == self.frame.calibration
                && o.frame.structured_calibration == self.frame.structured_calibration
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "Estimate(input_tokens={}, segments={}, wire={:?})",
            self.e.input_tokens,
            self.e.len(),
            self.frame.wire
        )
    }
}

/// ``(requests estimated, item values worked out, segment identities worked out)``
/// since the process started: each item's counts are worked out once, however many
/// requests hold it; a block a session's request shares with the one before keeps its
/// segment (written and hashed once).
#[pyfunction]
fn estimate_stats() -> (u64, u64, u64) {
    estimate::stats()
}

/// Add the estimator's classes and functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFrame>()?;
    m.add_class::<PyEstimate>()?;
    m.add_function(wrap_pyfunction!(estimate_stats, m)?)?;
    Ok(())
}
