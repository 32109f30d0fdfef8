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
use super::{body_estimate, neutral_of, write_meta, Mark, Plan, Rendered, Start, Wire};
use crate::commit::Shared;
use crate::estimate::{self, Estimate, Frame, Seg};
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

/// What is kept of a rendered request to make the next one from (owned data, so a
/// caller can keep it between calls: `Session::resume`, `Session::into_trace`).
#[derive(Debug, Default, Clone)]
pub struct Trace {
    /// Where the body stood after each part (the head, then each unit).
    pub marks: Vec<Mark>,
    /// The body's length.
    pub len: usize,
    /// Where it stood after each block of the plan (Anthropic; empty for other wires).
    pub ends: Vec<usize>,
    /// The estimate's segment of each plan block (`estimate::estimate_reusing`; empty
    /// when the request was not estimated or its wire is not walked a block at a time).
    pub segs: Vec<Option<Seg>>,
}

/// The previous request of a session: its plan, options, frame and trace.
struct Prev<'a> {
    plan: Plan<'a>,
    opts: &'a Options<'a>,
    frame: Option<&'a Frame>,
    trace: Trace,
}

impl Prev<'_> {
    /// Where the next request's writing starts and how many of its plan's leading
    /// blocks are this request's (for its estimate); `marks` and `ends` get what is
    /// taken from this request's.
    fn start(
        &self,
        plan: &Plan<'_>,
        marks: &mut Vec<Mark>,
        ends: &mut Vec<usize>,
    ) -> (Start, usize) {
        let k = self.plan.shared_parts(plan);
        if k == 0 {
            return (Start::default(), 0);
        }
        let t = &self.trace;
        marks.extend_from_slice(&t.marks[..k]);
        // Units before `u` are the same whole; `u` may share its leading blocks.
        let u = k - 1;
        let done = plan.units.get(u).map_or(plan.blocks.len(), |x| x.blocks.0);
        let whole = t.ends.len() == self.plan.blocks.len();
        let j = if whole {
            self.plan.shared_blocks(plan, u)
        } else {
            0
        };
        if whole {
            ends.extend_from_slice(&t.ends[..done + j]);
        }
        let mark = match j {
            0 => t.marks[k - 1],
            _ => Mark {
                at: t.ends[done + j - 1],
                st: Plan::mid_unit(t.marks[k - 1].st),
            },
        };
        let start = Start {
            part: k,
            blocks: j,
            mark,
        };
        (start, done + j)
    }
}

/// The renderer of one session's successive requests for one wire format.
///
/// The caller keeps each body (the next one is assembled from it) and the items,
/// options and frame of the previous request alive: the previous plan borrows them.
pub struct Session<'a> {
    wire: Wire,
    prev: Option<Prev<'a>>,
}

impl<'a> Session<'a> {
    /// A session with no request rendered yet.
    pub fn new(wire: Wire) -> Self {
        Session { wire, prev: None }
    }

    /// A session whose previous request was `items` under `opts` (estimated under
    /// `frame`, if given), rendered by an earlier `next` whose `trace` this is
    /// (`Session::into_trace`): a caller that keeps only owned data between requests
    /// (the items, the options' JSON, the frame, the trace and the body) resumes from
    /// it.  Its plan is laid out again (a few words per block, no text written); the
    /// trace must be that very request's, which the caller keeps together with it.
    pub fn resume(
        wire: Wire,
        items: &'a [Shared],
        opts: &'a Options<'a>,
        frame: Option<&'a Frame>,
        trace: Trace,
    ) -> Self {
        let n = neutral_of(items);
        let plan = Plan::new(wire, opts, &n);
        debug_assert_eq!(trace.marks.len(), plan.units.len() + 1);
        Session {
            wire,
            prev: Some(Prev {
                plan,
                opts,
                frame,
                trace,
            }),
        }
    }

    /// What `resume` takes back of the last request rendered.
    pub fn into_trace(self) -> Option<Trace> {
        self.prev.map(|p| p.trace)
    }

    /// Render the next request: its body is exactly `render_request`'s for these items
    /// and options, made as the returned `Reuse` says from the previous body and what
    /// is appended to `out`; its breakdown is appended to `meta` if given, and its
    /// estimate under `frame` is made from the same plan if one is given — the
    /// segments of the blocks it shares with the previous request taken from that
    /// request's estimate when it was made under the same frame.
    pub fn next(
        &mut self,
        items: &'a [Shared],
        opts: &'a Options<'a>,
        out: &mut Vec<u8>,
        meta: Option<&mut Vec<u8>>,
        frame: Option<&'a Frame>,
    ) -> (Reuse, Option<Estimate>) {
        let n = neutral_of(items);
        let plan = Plan::new(self.wire, opts, &n);
        let mut marks = Vec::with_capacity(plan.units.len() + 1);
        let mut ends = Vec::new();
        if plan.wire == Wire::Anthropic {
            ends.reserve(plan.blocks.len());
        }
        let (from, same) = match &self.prev {
            Some(p) => p.start(&plan, &mut marks, &mut ends),
            None => (Start::default(), 0),
        };
        let tail = match &self.prev {
            Some(p) if plan.same_tail(opts, &p.plan, p.opts) => {
                p.trace.marks.last().map(|m| (m.at, p.trace.len))
            }
            _ => None,
        };
        // Room for what is left to write, so the buffer grows at most once.
        out.reserve(body_estimate(items).saturating_sub(from.mark.at) + 1024);
        let start = out.len();
        let mut w = Json {
            buf: std::mem::take(out),
        };
        let record = (plan.wire == Wire::Anthropic).then_some(&mut ends);
        let st = plan.write_parts(&mut w, from, &mut marks, record);
        if tail.is_none() {
            plan.write_tail(&mut w, opts);
        }
        *out = w.finish();
        let reuse = Reuse {
            head: from.mark.at,
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
        let prev = self.prev.take();
        // The previous request's segments, when it was estimated under this very frame.
        let kept: &[Option<Seg>] = match (&prev, frame) {
            (Some(p), Some(f)) if p.frame.is_some_and(|pf| std::ptr::eq(pf, f)) => &p.trace.segs,
            _ => &[],
        };
        let (estimate, segs) = match frame.filter(|_| plan.estimable()) {
            Some(f) => {
                let (e, segs) = estimate::estimate_reusing(&plan, f, kept, same);
                (Some(e), segs)
            }
            None => (None, Vec::new()),
        };
        drop(prev);
        self.prev = Some(Prev {
            plan,
            opts,
            frame,
            trace: Trace {
                marks,
                len,
                ends,
                segs,
            },
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
/// `bytes`, for Rust callers and tests.  Each result also says what it reused; each is
/// estimated under `frame` when one is given.
pub fn render_session<'a>(
    wire: Wire,
    requests: &[(&'a [Shared], &'a Options<'a>)],
    frame: Option<&'a Frame>,
) -> Vec<(Rendered, Reuse)> {
    let mut s = Session::new(wire);
    let mut out: Vec<(Rendered, Reuse)> = Vec::with_capacity(requests.len());
    for &(items, opts) in requests {
        let (mut new, mut meta) = (Vec::new(), Vec::new());
        let (reuse, estimate) = s.next(items, opts, &mut new, Some(&mut meta), frame);
        let prev = out.last().map_or(&[][..], |(r, _)| &r.body[..]);
        let body = assemble(prev, reuse, &new);
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
