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
use super::{body_estimate, neutral_of, write_meta, Mark, Plan, Rendered, Wire};
use crate::commit::Shared;
use crate::estimate::{self, Estimate, Frame};
use crate::json::Json;

/// How a body rendered by [`Session::next`] is made of the previous body: its first
/// `head` bytes, then what `next` appended, then — when the tail is the same —
/// `prev[tail.0..tail.1]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reuse {
    pub head: usize,
    pub tail: Option<(usize, usize)>,
}

impl Reuse {
    /// Bytes taken from the previous body.
    pub fn bytes(&self) -> usize {
        self.head + self.tail.map_or(0, |(a, b)| b - a)
    }
}

/// The previous request of a session: its plan, options, marks and body length.
struct Prev<'a> {
    plan: Plan<'a>,
    opts: &'a Options<'a>,
    marks: Vec<Mark>,
    len: usize,
}

/// The renderer of one session's successive requests for one wire format.
///
/// The caller keeps each body (the next one is assembled from it) and the items and
/// options of the previous request alive: the previous plan borrows them.
pub struct Session<'a> {
    wire: Wire,
    prev: Option<Prev<'a>>,
}

impl<'a> Session<'a> {
    /// A session with no request rendered yet.
    pub fn new(wire: Wire) -> Self {
        Session { wire, prev: None }
    }

    /// A session whose previous request was `items` under `opts`, rendered by an earlier
    /// `next` as a body of `len` bytes that stood at `marks` after each part
    /// (`Session::marks`): a caller that keeps only owned data between requests (the
    /// items, the options' JSON, the marks and the body) resumes from it.  Its plan is
    /// laid out again (a few words per block, no text written); the marks must be those
    /// of that very request, which the caller keeps together with it.
    pub fn resume(
        wire: Wire,
        items: &'a [Shared],
        opts: &'a Options<'a>,
        marks: Vec<Mark>,
        len: usize,
    ) -> Self {
        let n = neutral_of(items);
        let plan = Plan::new(wire, opts, &n);
        debug_assert_eq!(marks.len(), plan.units.len() + 1);
        Session {
            wire,
            prev: Some(Prev {
                plan,
                opts,
                marks,
                len,
            }),
        }
    }

    /// Where the last body rendered stood after each of its parts (the head, then each
    /// unit) and its length: what `resume` takes back.
    pub fn marks(&self) -> Option<(&[Mark], usize)> {
        self.prev.as_ref().map(|p| (&p.marks[..], p.len))
    }

    /// Render the next request: its body is exactly `render_request`'s for these items
    /// and options, made as the returned `Reuse` says from the previous body and what
    /// is appended to `out`; its breakdown is appended to `meta` if given, and its
    /// estimate under `frame` is made from the same plan if one is given.
    pub fn next(
        &mut self,
        items: &'a [Shared],
        opts: &'a Options<'a>,
        out: &mut Vec<u8>,
        meta: Option<&mut Vec<u8>>,
        frame: Option<&Frame>,
    ) -> (Reuse, Option<Estimate>) {
        let n = neutral_of(items);
        let plan = Plan::new(self.wire, opts, &n);
        let mut marks = Vec::with_capacity(plan.units.len() + 1);
        let (k, from) = match &self.prev {
            Some(p) => match p.plan.shared_parts(&plan) {
                0 => (0, Mark::default()),
                k => {
                    marks.extend_from_slice(&p.marks[..k]);
                    (k, p.marks[k - 1])
                }
            },
            None => (0, Mark::default()),
        };
        let tail = match &self.prev {
            Some(p) if plan.same_tail(opts, &p.plan, p.opts) => {
                p.marks.last().map(|m| (m.at, p.len))
            }
            _ => None,
        };
        // Room for what is left to write, so the buffer grows at most once.
        out.reserve(body_estimate(items).saturating_sub(from.at) + 1024);
        let start = out.len();
        let mut w = Json {
            buf: std::mem::take(out),
        };
        let st = plan.write_parts(&mut w, (k, from), &mut marks);
        if tail.is_none() {
            plan.write_tail(&mut w, opts);
        }
        *out = w.finish();
        let reuse = Reuse {
            head: from.at,
            tail,
        };
        let len = out.len() - start + reuse.bytes();
        if let Some(meta) = meta {
            let mut m = Json {
                buf: std::mem::take(meta),
            };
            write_meta(&mut m, &plan, &n, st, len);
            *meta = m.finish();
        }
        let estimate = frame
            .filter(|_| plan.estimable())
            .map(|f| estimate::estimate(&plan, f));
        self.prev = Some(Prev {
            plan,
            opts,
            marks,
            len,
        });
        (reuse, estimate)
    }
}

/// The body `reuse` describes: `prev`'s reused bytes around the newly written `new`.
pub fn assemble(prev: &[u8], reuse: Reuse, new: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(reuse.bytes() + new.len());
    body.extend_from_slice(&prev[..reuse.head]);
    body.extend_from_slice(new);
    if let Some((a, b)) = reuse.tail {
        body.extend_from_slice(&prev[a..b]);
    }
    body
}

/// Render every request of a session (`(items, options)` in order) incrementally, the
/// bodies assembled in plain buffers (`assemble`): what the bindings do into Python
/// `bytes`, for Rust callers and tests.  Each result also says what it reused.
pub fn render_session<'a>(
    wire: Wire,
    requests: &[(&'a [Shared], &'a Options<'a>)],
) -> Vec<(Rendered, Reuse)> {
    let mut s = Session::new(wire);
    let mut out: Vec<(Rendered, Reuse)> = Vec::with_capacity(requests.len());
    for &(items, opts) in requests {
        let (mut new, mut meta) = (Vec::new(), Vec::new());
        let (reuse, _) = s.next(items, opts, &mut new, Some(&mut meta), None);
        let prev = out.last().map_or(&[][..], |(r, _)| &r.body[..]);
        let body = assemble(prev, reuse, &new);
        let estimate = None;
        out.push((
            Rendered {
                body,
                meta,
                estimate,
            },
            reuse,
        ));
    }
    out
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
