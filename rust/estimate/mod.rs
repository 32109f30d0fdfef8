//! The billed-prompt estimate of a request, made where its body is made.
//!
//! The specification is Python's (`ctxrules.providers.estimate` and each provider's
//! `estimate_*`): it reads a body and splits it into *segments* in the vendor's prefix
//! order (a tool definition, a system block, a content block or a message), each with
//! an identity and its billed tokens.  Here the same segments are made from the
//! request's plan (`crate::render::Plan`) while it is rendered: what each segment
//! holds is known without reading the body back, and each item's token counts are
//! worked out once and kept with the prepared item (`commit::Item::memo`), so a
//! request's estimate is a sum over its plan.  A test holds the two equal on every
//! request of the corpus and on random commits.
//!
//! What the rules are made of — the tokenizer and its calibrations, the vendor's tool
//! prompt and framing, its image rule, the tool declarations as the model reads them —
//! crosses from Python once per model profile and render options, as a `Frame`; the
//! walk of each wire (`wires`) only decides which of them each segment takes.
//!
//! A segment's identity here is a hash of its bytes as the wire writes them, cache
//! markers left out: equal bytes give equal keys, which is all the cache rules compare.

pub mod images;
pub mod jsonfmt;
mod wires;

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use xxhash_rust::xxh3::xxh3_128;

use crate::commit::{Item, Memo};
use crate::json::Json;
use crate::render::neutral::{BlockRef, Txt};
use crate::render::Plan;
use crate::tokens::{self, Encoding};
use images::ImageRule;

/// The framing numbers of every wire (each wire reads its own).
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct Framing {
    /// Anthropic: around each tool_use and tool_result block.
    pub tool_block: f64,
    /// OpenAI: per message, priming the reply, per tool call, per name.  Gemini:
    /// `message` on each content's first part.  Anthropic:
    /// `message` on each message's first block, `request` on a last segment (the primed
    /// reply, and the prompt extended thinking adds), `thinking_all` (non-zero: the
    /// thinking of every assistant turn is read, not the last turn's only).
    pub message: f64,
    pub request: f64,
    pub thinking_all: f64,
    /// OpenAI Responses: the tokens a stored conversation (`previous_response_id`,
    /// `conversation`) can add; non-zero flags the estimate (the body does not hold it).
    pub stored_conversation: f64,
    pub reply: f64,
    pub tool_call: f64,
    pub name: f64,
    /// OpenAI (both APIs): what an assistant message with text adds beyond `message`
    /// (the gpt-5 models: the channel of its final answer).
    pub assistant_text: f64,
    /// Anthropic: tokens a line break in a text block or the system text adds beyond the
    /// tokenizer's count.
    pub line_break: f64,
    /// OpenAI Chat: added to the system message's framing (negative where the tool
    /// declarations join it: the frame states it only when tools are declared).
    pub system: f64,
    /// Gemini: per functionCall / functionResponse part; a thought signature's tokens
    /// from its length, `slope × chars − offset` (at least 0).
    pub function_part: f64,
    pub signature_slope: f64,
    pub signature_offset: f64,
    /// Gemini: non-zero when the signatures of every turn are billed (Gemini 3.5), not
    /// the current turn's only.
    pub signature_all: f64,
    /// Gemini: tokens of an inline PDF's page, and the most its extracted text can add
    /// per page (the body does not give it: flagged as `document_text`).
    pub pdf_page: f64,
    pub pdf_text_high: f64,
    /// OpenAI Responses: a compaction item's tokens from its encrypted state,
    /// `max(0, chars × num ÷ den − envelope) ÷ per_token` (integer division).
    pub state_num: u64,
    pub state_den: u64,
    pub state_envelope: u64,
    pub state_per_token: u64,
}

/// One segment the options make (a tool definition, or all tools as one declaration):
/// its identity as the specification states it, its texts, the tool prompt it carries.
#[derive(Deserialize, Debug)]
struct ToolUnitIn {
    key: String,
    #[serde(default)]
    prose: Vec<String>,
    #[serde(default)]
    structured: Vec<String>,
    #[serde(default)]
    tool_prompt: u64,
    #[serde(default)]
    framing: f64,
    #[serde(default)]
    tail: bool,
}

#[derive(Deserialize, Debug)]
struct FrameIn {
    wire: String,
    encoding: String,
    calibration: f64,
    structured_calibration: f64,
    #[serde(default)]
    tools: Vec<ToolUnitIn>,
    #[serde(default)]
    auto_breakpoint: Option<String>,
    #[serde(default)]
    framing: Framing,
    images: ImageRule,
}

/// A tool segment, counted once when the frame is made.
#[derive(Debug, Clone)]
pub struct ToolUnit {
    key: u128,
    prose: u64,
    structured: u64,
    tool_prompt: u64,
    /// Fixed tokens beyond the tool prompt (a structured-output format's).
    framing: f64,
    /// After the tools (a structured-output format): never carries their breakpoint.
    tail: bool,
}

/// Everything an estimate takes besides the plan, handed over once per model profile
/// and render options (see the module docs).
#[derive(Debug, Clone)]
pub struct Frame {
    /// The specification's name of the rules (`"anthropic-messages"`, …).
    pub wire: String,
    pub encoding: Encoding,
    pub calibration: f64,
    pub structured_calibration: f64,
    tools: Vec<ToolUnit>,
    /// Anthropic: the TTL of a top-level `cache_control` among the extra fields.
    auto_breakpoint: Option<String>,
    pub framing: Framing,
    pub images: ImageRule,
    /// Tokens of each role word OpenAI frames a message with.
    roles: [u64; ROLES.len()],
}

/// The role words OpenAI's framing counts (`Frame::role`).
const ROLES: [&str; 5] = ["system", "user", "assistant", "tool", "developer"];

impl Frame {
    /// Read a frame's JSON (see `ctxrules.providers.estimate.estimate_frame`); the tool
    /// texts are counted here, once.
    pub fn parse(bytes: &[u8]) -> Result<Frame, String> {
        let f: FrameIn =
            serde_json::from_slice(bytes).map_err(|e| format!("estimate frame JSON: {e}"))?;
        let encoding = Encoding::from_name(&f.encoding)
            .ok_or_else(|| format!("estimate frame: no core encoding {:?}", f.encoding))?;
        for (name, c) in [
            ("calibration", f.calibration),
            ("structured_calibration", f.structured_calibration),
        ] {
            if !(c.is_finite() && c > 0.0) {
                return Err(format!("estimate frame: {name} must be > 0, got {c}"));
            }
        }
        let count = |texts: &[String]| -> u64 {
            texts
                .iter()
                .map(|t| tokens::count_cached(encoding, t) as u64)
                .sum()
        };
        let tools = f
            .tools
            .iter()
            .map(|t| ToolUnit {
                key: xxh3_128(t.key.as_bytes()),
                prose: count(&t.prose),
                structured: count(&t.structured),
                tool_prompt: t.tool_prompt,
                framing: t.framing,
                tail: t.tail,
            })
            .collect();
        let roles = ROLES.map(|r| tokens::count_cached(encoding, r) as u64);
        Ok(Frame {
            wire: f.wire,
            encoding,
            calibration: f.calibration,
            structured_calibration: f.structured_calibration,
            tools,
            auto_breakpoint: f.auto_breakpoint,
            framing: f.framing,
            images: f.images,
            roles,
        })
    }

    /// Tokens of an OpenAI role word.
    fn role(&self, role: &str) -> u64 {
        ROLES
            .iter()
            .position(|r| *r == role)
            .map_or(0, |i| self.roles[i])
    }
}

/// A request's estimate: its segments in prefix order (identity, raw tokens before
/// rounding, the cache breakpoint each carries), and the figures the specification
/// reports beside them.  `prefix` tokens (an unrecorded harness prefix) lead the
/// segments as one more; `tokens` are the rounded segments, the running total rounded
/// so they add up to `input_tokens`.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub keys: Vec<u128>,
    pub raws: Vec<f64>,
    /// (segment, TTL) of each breakpoint, in order; segments counted without the prefix.
    pub breakpoints: Vec<(usize, String)>,
    pub tool_prompt: u64,
    pub framing: f64,
    pub images: u64,
    pub content: f64,
    pub prefix: u64,
    pub tokens: Vec<u64>,
    pub input_tokens: u64,
    /// Images whose size is unknown (each counted at its rule's `unknown`), and how many
    /// more tokens they can be (the range the estimate states).
    pub unknown_images: u64,
    pub unknown_extra: u64,
    /// Inline PDFs whose extracted text is not in the body (Gemini `document_text`).
    pub unknown_documents: u64,
}

/// Python's `round` of a float: to the nearest integer, halves to even.
fn round(x: f64) -> u64 {
    x.round_ties_even() as u64
}

impl Estimate {
    /// The same segments led by `prefix` tokens (the specification's `prefix_tokens`).
    pub fn with_prefix(&self, prefix: u64) -> Estimate {
        let mut e = Estimate {
            prefix,
            tokens: Vec::new(),
            input_tokens: 0,
            ..self.clone()
        };
        e.round();
        e
    }

    /// Round the running total (as the specification does, with the prefix first).
    fn round(&mut self) {
        let mut tokens = Vec::with_capacity(self.raws.len() + 1);
        let (mut total, mut done) = (0f64, 0u64);
        let prefix = (self.prefix > 0).then_some(self.prefix as f64);
        for r in prefix.iter().chain(&self.raws) {
            total += r;
            let now = round(total);
            tokens.push(now - done);
            done = now;
        }
        self.tokens = tokens;
        self.input_tokens = done;
    }

    /// Segments, the prefix segment included.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether there are no segments.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Framing tokens, rounded (as the specification reports them).
    pub fn framing_tokens(&self) -> u64 {
        round(self.framing)
    }

    /// Content tokens, rounded.
    pub fn content_tokens(&self) -> u64 {
        round(self.content)
    }

    /// How many leading segments `self` and `previous` share (the same identities,
    /// the prefix segment the same when both have one), and the tokens of those
    /// segments in `self`.
    pub fn shared_prefix(&self, previous: &Estimate) -> (usize, u64) {
        let lead = usize::from(self.prefix > 0);
        if lead != usize::from(previous.prefix > 0) {
            return (0, 0);
        }
        let n = lead
            + self
                .keys
                .iter()
                .zip(&previous.keys)
                .take_while(|(a, b)| a == b)
                .count();
        (n, self.tokens[..n].iter().sum())
    }
}

/// Requests estimated since the process started (`stats`).
static ESTIMATES: AtomicU64 = AtomicU64::new(0);
/// Item values worked out (token counts, image sizes), each once per prepared item.
static MEMO_FILLS: AtomicU64 = AtomicU64::new(0);
/// Segment identities worked out (bytes written and hashed).
static KEYS: AtomicU64 = AtomicU64::new(0);

/// How many requests were estimated, item values worked out and segment identities
/// worked out since start.
pub fn stats() -> (u64, u64, u64) {
    (
        ESTIMATES.load(Ordering::Relaxed),
        MEMO_FILLS.load(Ordering::Relaxed),
        KEYS.load(Ordering::Relaxed),
    )
}

/// The estimate of the request `plan` lays out, under `frame`.
pub fn estimate(plan: &Plan<'_>, frame: &Frame) -> Estimate {
    estimate_reusing(plan, frame, &[], 0).0
}

/// A content block's segment as its wire's walk worked it out (Anthropic: a segment
/// per block), kept per plan block so that the next request of a session adds it again
/// for a block the two share instead of writing, hashing and counting the block again
/// (`estimate_reusing`).  The same values added in the same order give the same sums,
/// to the last bit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seg {
    key: u128,
    prose: u64,
    structured: u64,
    framing: f64,
    images: u64,
}

/// `estimate`, taking the segments of this plan's first `same` blocks from `prev`
/// (what the previous request's estimate under the same frame kept per block, when its
/// plan's first `same` blocks are provably these: `Session` knows).  Returns the
/// estimate and what to keep of it for the next request.  A block kept as `None` is
/// worked out again: thinking (counted only in the last assistant turn), images (which
/// also flag unknown sizes), blocks of wires that are not walked a block at a time.
pub fn estimate_reusing(
    plan: &Plan<'_>,
    frame: &Frame,
    prev: &[Option<Seg>],
    same: usize,
) -> (Estimate, Vec<Option<Seg>>) {
    ESTIMATES.fetch_add(1, Ordering::Relaxed);
    let mut s = Segments::new(frame, &prev[..same.min(prev.len())]);
    wires::walk(&mut s, plan);
    let segs = std::mem::take(&mut s.segs);
    (s.finish(), segs)
}

/// The fixed slots of an item's memo (`commit::Item::memo`), then `PER_BLOCK` per block.
#[derive(Clone, Copy)]
enum Slot {
    /// `rendered`.
    Rendered = 0,
    /// `[Summary] ` + `rendered`.
    Summary,
    /// The text a tool item without its pairing is shown as.
    Degraded,
    /// The name and the arguments as `json.dumps` writes them (Anthropic tool_use).
    ToolSpaced,
    /// The name and the arguments as msgspec writes them (Gemini functionCall).
    ToolCompact,
    /// The name and the arguments as sent (OpenAI function calls).
    ToolRaw,
    /// The name and `{"output": …}` / `{"error": …}` (Gemini functionResponse).
    GeminiResult,
}
const FIXED: usize = 7;
/// Per block: its text's tokens (text, thinking, compaction summary), then a length or
/// an image's width (`NO_SIZE` when unknown), then an image's height.
const PER_BLOCK: usize = 3;
const NO_SIZE: u64 = 1 << 32;

/// The segments of one request under construction, in prefix order, and the figures
/// beside them (the specification's `SegmentBuilder`).
pub(crate) struct Segments<'f> {
    pub(crate) f: &'f Frame,
    set: usize,
    keys: Vec<u128>,
    /// Each segment's calibrated content and its fixed tokens, summed at the end (as
    /// the specification sums them, so the floats agree).
    cs: Vec<f64>,
    fixed: Vec<f64>,
    breakpoints: Vec<(usize, String)>,
    tool_prompt: u64,
    framing: f64,
    images: u64,
    content: f64,
    unknown_images: u64,
    unknown_extra: u64,
    unknown_documents: u64,
    scratch: Json,
    /// The previous request's segments of the blocks this plan shares with it.
    prev: &'f [Option<Seg>],
    /// This request's, per plan block (walks a block at a time only).
    segs: Vec<Option<Seg>>,
}

impl<'f> Segments<'f> {
    fn new(f: &'f Frame, prev: &'f [Option<Seg>]) -> Self {
        Segments {
            f,
            set: f.encoding.index(),
            keys: Vec::new(),
            cs: Vec::new(),
            fixed: Vec::new(),
            breakpoints: Vec::new(),
            tool_prompt: 0,
            framing: 0.0,
            images: 0,
            content: 0.0,
            unknown_images: 0,
            unknown_extra: 0,
            unknown_documents: 0,
            scratch: Json::with_capacity(4096),
            prev,
            segs: Vec::new(),
        }
    }

    /// Plan block `i`'s segment, when the previous request kept it for a shared block.
    pub(crate) fn kept(&self, i: usize) -> Option<Seg> {
        self.prev.get(i).copied().flatten()
    }

    /// Add block `i`'s segment `seg` (with the TTL of its breakpoint), and keep it for
    /// the next request when `keep`.
    pub(crate) fn add_block(&mut self, i: usize, seg: Seg, bp: Option<&str>, keep: bool) {
        debug_assert_eq!(self.segs.len(), i);
        self.add_seg(seg, bp);
        self.segs.push(keep.then_some(seg));
    }

    /// Add the segment `seg` (with the TTL of its breakpoint).
    pub(crate) fn add_seg(&mut self, seg: Seg, bp: Option<&str>) {
        self.add(
            seg.key,
            seg.prose,
            seg.structured,
            seg.framing,
            seg.images,
            0,
            bp,
        );
    }

    /// Block `i` makes no segment.
    pub(crate) fn no_block(&mut self, i: usize) {
        debug_assert_eq!(self.segs.len(), i);
        self.segs.push(None);
    }

    /// Add a segment: prose and structured token counts (calibrated apart), fixed
    /// tokens (framing, images, a tool prompt), the TTL of a breakpoint it carries.
    /// The arithmetic is the specification's, step for step, so the floats agree.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add(
        &mut self,
        key: u128,
        prose: u64,
        structured: u64,
        framing: f64,
        images: u64,
        tool_prompt: u64,
        breakpoint: Option<&str>,
    ) {
        self.framing += framing;
        self.images += images;
        self.tool_prompt += tool_prompt;
        let fixed = framing + images as f64 + tool_prompt as f64;
        let c =
            prose as f64 * self.f.calibration + structured as f64 * self.f.structured_calibration;
        self.content += c;
        if let Some(ttl) = breakpoint {
            self.breakpoints.push((self.keys.len(), ttl.to_string()));
        }
        self.keys.push(key);
        self.cs.push(c);
        self.fixed.push(fixed);
    }

    /// Add the frame's tool segments, the last tool (not a tail unit) with `breakpoint`.
    pub(crate) fn tools(&mut self, breakpoint: Option<&str>) {
        let last = self.f.tools.iter().rposition(|t| !t.tail);
        for (i, t) in self.f.tools.iter().enumerate() {
            let bp = if Some(i) == last { breakpoint } else { None };
            self.add(
                t.key,
                t.prose,
                t.structured,
                t.framing,
                0,
                t.tool_prompt,
                bp,
            );
        }
    }

    /// Segments added so far.
    pub(crate) fn count(&self) -> usize {
        self.keys.len()
    }

    /// Add `framing` tokens to segment `i` (a message's turn marker on its first block).
    pub(crate) fn add_framing(&mut self, i: usize, framing: f64) {
        self.fixed[i] += framing;
        self.framing += framing;
    }

    /// The tokens of an image of `size` by the frame's rule; one of unknown size is
    /// counted at the rule's `unknown` and flagged with how much more it can be.
    pub(crate) fn image(&mut self, size: Option<(u64, u64)>) -> u64 {
        if size.is_none() {
            if let Some(extra) = self.f.images.unknown_extra() {
                self.unknown_images += 1;
                self.unknown_extra += extra;
            }
        }
        self.f.images.tokens(size)
    }

    /// The tokens of an inline PDF (base64 `b64`) as Gemini bills it: its pages (at
    /// least one) at the frame's `pdf_page`, flagged for the text extracted from it.
    pub(crate) fn pdf(&mut self, b64: &str) -> f64 {
        let pages = images::pdf_pages(b64).max(1);
        self.unknown_documents += 1;
        self.unknown_extra += round(pages as f64 * self.f.framing.pdf_text_high);
        pages as f64 * self.f.framing.pdf_page
    }

    /// Give the last segment `ttl` as its breakpoint unless it has one.
    pub(crate) fn breakpoint_last(&mut self, ttl: &str) {
        let Some(last) = self.keys.len().checked_sub(1) else {
            return;
        };
        if self.breakpoints.last().is_none_or(|(i, _)| *i != last) {
            self.breakpoints.push((last, ttl.to_string()));
        }
    }

    /// Anthropic: the TTL of a top-level `cache_control`, if the extra fields have one.
    pub(crate) fn auto_breakpoint(&self) -> Option<&'f str> {
        self.f.auto_breakpoint.as_deref()
    }

    /// The identity of the bytes `write` writes, after `tag` (what kind of segment).
    pub(crate) fn key(&mut self, tag: &[u8], write: impl FnOnce(&mut Json)) -> u128 {
        KEYS.fetch_add(1, Ordering::Relaxed);
        self.scratch.buf.clear();
        self.scratch.buf.extend_from_slice(tag);
        write(&mut self.scratch);
        xxh3_128(&self.scratch.buf)
    }

    /// Tokens of a text of the renderer's own (the content cache remembers them).
    pub(crate) fn own(&self, text: &str) -> u64 {
        tokens::count_cached(self.f.encoding, text) as u64
    }

    /// Tokens of an OpenAI role word.
    pub(crate) fn role(&self, role: &str) -> u64 {
        self.f.role(role)
    }

    fn memo<'c>(&self, item: &Item<'c>) -> &'c Memo {
        item.memo(self.set, FIXED, PER_BLOCK)
    }

    fn fill(&self, memo: &Memo, slot: usize, f: impl FnOnce() -> u64) -> u64 {
        memo.get(slot, || {
            MEMO_FILLS.fetch_add(1, Ordering::Relaxed);
            f()
        })
    }

    /// Tokens of `text`, kept in `item`'s memo slot `slot`.
    fn counted<'c>(
        &self,
        item: &Item<'c>,
        slot: usize,
        text: impl FnOnce() -> Cow<'c, str>,
    ) -> u64 {
        let enc = self.f.encoding;
        self.fill(self.memo(item), slot, || {
            tokens::count_cached(enc, &text()) as u64
        })
    }

    /// Tokens of a neutral text.
    pub(crate) fn txt(&self, t: &Txt<'_>) -> u64 {
        match t {
            Txt::Item(item) => {
                self.counted(item, Slot::Rendered as usize, || item.rendered().raw())
            }
            Txt::Block(b) => self.counted(&b.item, block_slot(b.i, 0), || b.text().raw()),
            Txt::Summary(item) => self.counted(item, Slot::Summary as usize, || t.raw()),
            Txt::Degraded(item) => self.counted(item, Slot::Degraded as usize, || t.raw()),
            Txt::Own(text) => self.own(text),
        }
    }

    /// Tokens of a tool item's result text.
    pub(crate) fn result(&self, item: &Item<'_>) -> u64 {
        self.counted(item, Slot::Rendered as usize, || item.rendered().raw())
    }

    /// Tokens of a thinking block's text.
    pub(crate) fn thinking(&self, b: &BlockRef<'_>) -> u64 {
        self.counted(&b.item, block_slot(b.i, 0), || b.thinking().0.raw())
    }

    /// Tokens of a compaction block's summary.
    pub(crate) fn summary(&self, b: &BlockRef<'_>) -> u64 {
        self.counted(&b.item, block_slot(b.i, 0), || b.compaction().content.raw())
    }

    /// Characters of a block's signature (thinking) or encrypted state (compaction).
    pub(crate) fn chars(&self, b: &BlockRef<'_>) -> u64 {
        self.fill(self.memo(&b.item), block_slot(b.i, 1), || {
            let s = match b.item.block(b.i) {
                crate::commit::Block::Thinking { signature, .. } => signature,
                crate::commit::Block::Compaction(c) => c.encrypted_content,
                _ => Default::default(),
            };
            s.raw().chars().count() as u64
        })
    }

    /// A tool call's name and arguments, written as `style` (`None`: as sent).
    pub(crate) fn call(&self, item: &Item<'_>, style: Option<jsonfmt::Style>) -> u64 {
        let slot = match style {
            Some(jsonfmt::Style::Spaced) => Slot::ToolSpaced,
            Some(jsonfmt::Style::Compact) => Slot::ToolCompact,
            None => Slot::ToolRaw,
        };
        self.counted(item, slot as usize, || {
            let args = item.args_json();
            let args = match style.and_then(|s| jsonfmt::rewrite(args, s)) {
                Some(a) => Cow::Owned(a),
                None => Cow::Borrowed(args),
            };
            Cow::Owned(format!("{}{}", item.name().raw(), args))
        })
    }

    /// Gemini: a tool result's name and `{"output": …}` (or `"error"`) as msgspec
    /// writes it.
    pub(crate) fn gemini_result(&self, item: &Item<'_>) -> u64 {
        self.counted(item, Slot::GeminiResult as usize, || {
            let field = if item.is_error() { "error" } else { "output" };
            Cow::Owned(format!(
                "{}{{\"{field}\":\"{}\"}}",
                item.name().raw(),
                item.rendered().esc
            ))
        })
    }

    /// The size of image block `i` of `item`, read from its base64 data.
    pub(crate) fn image_size(&self, item: &Item<'_>, i: u32) -> Option<(u64, u64)> {
        let memo = self.memo(item);
        let w = self.fill(memo, block_slot(i, 1), || {
            let data = match item.block(i) {
                crate::commit::Block::Image(src) => src.data.raw(),
                _ => Cow::Borrowed(""),
            };
            match images::decoded_size(&data) {
                Some((w, h)) => {
                    memo.get(block_slot(i, 2), || h);
                    w.min(NO_SIZE - 1)
                }
                None => NO_SIZE,
            }
        });
        (w != NO_SIZE).then(|| (w, memo.get(block_slot(i, 2), || 0)))
    }

    fn finish(self) -> Estimate {
        let mut e = Estimate {
            keys: self.keys,
            raws: self
                .cs
                .iter()
                .zip(&self.fixed)
                .map(|(c, f)| c + f)
                .collect(),
            breakpoints: self.breakpoints,
            tool_prompt: self.tool_prompt,
            framing: self.framing,
            images: self.images,
            content: self.content,
            prefix: 0,
            tokens: Vec::new(),
            input_tokens: 0,
            unknown_images: self.unknown_images,
            unknown_extra: self.unknown_extra,
            unknown_documents: self.unknown_documents,
        };
        e.round();
        e
    }
}

fn block_slot(i: u32, k: usize) -> usize {
    FIXED + PER_BLOCK * i as usize + k
}

#[cfg(test)]
mod tests;
