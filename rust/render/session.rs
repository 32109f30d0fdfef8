//! Incremental rendering: the successive requests of one session, each body written as
//! the previous body's leading bytes plus only what follows them.
//!
//! Consecutive requests of a session share their beginning: the same head, the same
//! messages up to the first one that changed (a new turn, an item a rule aged, a
//! breakpoint that moved to the new tail, a compaction that moved the start).  Each
//! request is laid out as a `Plan` first (cheap: a few words per block, no text
//! copied); the parts it provably shares with the previous plan (`Plan::shared_parts`:
//! the same wire and head, then unit by unit the same role, marks and blocks — the same
//! prepared item, or equal strings) are taken from the previous body, whose offset and
//! writer state after each part were recorded (`Mark`), and only the rest is written.
//! A unit's bytes depend on nothing but what is compared and the state before it, and
//! writing is append-only, so the result is the full render's bytes exactly; where
//! sameness cannot be shown (another head, a model change, items that are equal but
//! were prepared without their bytes) the parts are written again — never guessed.

use super::input::Options;
use super::{meta, neutral_of, Mark, Plan, Rendered, Wire};
use crate::commit::Shared;
use crate::json::Json;

/// One request of a session rendered by [`Session::next`]: its body is the previous
/// body's first `reuse` bytes followed by the suffix that `next` wrote.
pub struct Step {
    pub reuse: usize,
    /// The breakdown, as `render_request` gives it.
    pub meta: Vec<u8>,
}

/// The renderer of one session's successive requests for one wire format.
///
/// The caller keeps each body (the prefix of the next one is read from it) and the
/// items and options of the previous request alive: the previous plan borrows them.
pub struct Session<'a> {
    wire: Wire,
    prev: Option<(Plan<'a>, Vec<Mark>)>,
}

impl<'a> Session<'a> {
    /// A session with no request rendered yet.
    pub fn new(wire: Wire) -> Self {
        Session { wire, prev: None }
    }

    /// Render the next request: `suffix` (emptied first) receives the bytes after the
    /// reused prefix.  The body is exactly `render_request`'s for these items and
    /// options.
    pub fn next(
        &mut self,
        items: &'a [Shared],
        opts: &'a Options<'a>,
        suffix: &mut Vec<u8>,
    ) -> Step {
        let n = neutral_of(items);
        let plan = Plan::new(self.wire, opts, &n);
        let mut marks = Vec::with_capacity(plan.units.len() + 1);
        let (k, from) = match &self.prev {
            Some((before, at)) => match before.shared_parts(&plan) {
                0 => (0, Mark::default()),
                k => {
                    marks.extend_from_slice(&at[..k]);
                    (k, at[k - 1])
                }
            },
            None => (0, Mark::default()),
        };
        let mut w = Json::reusing(std::mem::take(suffix), 0);
        let st = plan.write(&mut w, opts, (k, from), &mut marks);
        *suffix = w.finish();
        let meta = meta(&plan, &n, st, from.at + suffix.len());
        self.prev = Some((plan, marks));
        Step {
            reuse: from.at,
            meta,
        }
    }

    /// Forget the previous request: the next one is written in full (after a request
    /// that could not be rendered, whose body the caller does not have).
    pub fn reset(&mut self) {
        self.prev = None;
    }
}

/// Render every request of a session (`(items, options)` in order) incrementally, the
/// bodies assembled in plain buffers: what the bindings do into Python `bytes`, for
/// Rust callers and tests.  Each result also says how many leading bytes it reused.
pub fn render_session<'a>(
    wire: Wire,
    requests: &[(&'a [Shared], &'a Options<'a>)],
) -> Vec<(Rendered, usize)> {
    let mut s = Session::new(wire);
    let mut suffix = Vec::new();
    let mut out: Vec<(Rendered, usize)> = Vec::with_capacity(requests.len());
    for &(items, opts) in requests {
        let step = s.next(items, opts, &mut suffix);
        let mut body = Vec::with_capacity(step.reuse + suffix.len());
        if let Some((prev, _)) = out.last() {
            body.extend_from_slice(&prev.body[..step.reuse]);
        }
        body.extend_from_slice(&suffix);
        out.push((
            Rendered {
                body,
                meta: step.meta,
            },
            step.reuse,
        ));
    }
    out
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
