//! Rendering (hot path 3 of 3): a commit → provider-neutral messages → the request body
//! bytes of a built-in provider, in one pass, with no Python work per item.
//!
//! `neutral` holds the item rules (pairing, summaries, degradation) once; each wire
//! module only translates neutral messages into its vendor's shape and enforces that
//! vendor's structural rules (first role, what may be sent back, where system goes).
//! Output is a pure function of the input bytes: no clock, no randomness, no hash-map
//! iteration order reaches the bytes.

pub mod anthropic;
pub mod gemini;
pub mod input;
pub mod native;
pub mod neutral;
pub mod openai_chat;
pub mod openai_responses;
pub mod session;

use crate::commit::{self, ImageSource, Shared};
use crate::estimate::{self, Estimate, Frame};
use crate::json::Json;
use input::Options;
use neutral::{NBlock, NRole, Neutral, Txt};
use std::borrow::Cow;

/// Text of the user message put first when a conversation would open with the
/// assistant (Anthropic and Gemini refuse that; the text says why it is there).
pub const OPENING_PLACEHOLDER: &str = "(conversation continues from earlier turns)";

/// The built-in wire formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAiChat,
    OpenAiResponses,
    Gemini,
}

impl Wire {
    /// Every built-in wire format.
    pub const ALL: [Wire; 4] = [
        Wire::Anthropic,
        Wire::OpenAiChat,
        Wire::OpenAiResponses,
        Wire::Gemini,
    ];

    /// The provider name of the wire (what `from_name` reads).
    pub fn name(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::OpenAiChat => "openai-chat",
            Wire::OpenAiResponses => "openai-responses",
            Wire::Gemini => "gemini",
        }
    }

    /// Parse a provider name as the CLI and the registry spell it.
    pub fn from_name(name: &str) -> Option<Wire> {
        match name {
            "anthropic" => Some(Wire::Anthropic),
            "openai-chat" => Some(Wire::OpenAiChat),
            "openai-responses" => Some(Wire::OpenAiResponses),
            "gemini" => Some(Wire::Gemini),
            _ => None,
        }
    }
}

/// A rendered request: the body as sent, a small JSON breakdown for `--explain`, and
/// the billed-prompt estimate when one was asked for (`crate::estimate`).
pub struct Rendered {
    pub body: Vec<u8>,
    pub meta: Vec<u8>,
    pub estimate: Option<Estimate>,
}

/// One system-prompt block and its layer (0 = session constant, 1 = situation).
pub struct Sys<'a> {
    pub text: Txt<'a>,
    pub layer: u8,
}

/// Whether two lists of system blocks are provably written the same.
fn same_sys(a: &[Sys<'_>], b: &[Sys<'_>]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.layer == y.layer && x.text.same(&y.text))
}

/// System blocks in request order: L0 (the caller's session-constant blocks, then the
/// commit's leading system items), then L1 (the caller's situation blocks, then system
/// items that arrived mid-conversation).  Empty texts are dropped (vendors refuse them).
pub fn system_blocks<'a>(opts: &'a Options<'a>, n: &Neutral<'a>) -> Vec<Sys<'a>> {
    let mut out: Vec<Sys<'a>> = Vec::new();
    for layer in [0u8, 1u8] {
        for b in opts.system.iter().filter(|b| b.layer.min(1) == layer) {
            if !b.text.is_empty() {
                out.push(Sys {
                    text: Txt::Own(Cow::Borrowed(&b.text)),
                    layer,
                });
            }
        }
        for &(item, l) in &n.system {
            if l == layer {
                out.push(Sys {
                    text: Txt::Item(item),
                    layer,
                });
            }
        }
    }
    out
}

/// A provider's view of the neutral messages: blocks it cannot send removed, messages
/// left empty dropped, same-role neighbours merged.  A user message that opens with
/// tool results always directly follows the assistant message with the calls, because
/// that message holds a tool_use, which every view keeps.
///
/// The kept blocks of all messages share one vector (`spans` cuts it into messages), so
/// a view costs two allocations, not one per message.  The blocks are copies (a few
/// words each, borrowing the commit), so a plan made from the view outlives the neutral
/// messages: an incremental render keeps the previous request's plan.
pub struct View<'c> {
    pub blocks: Vec<NBlock<'c>>,
    /// Role, first block and end of each message, in order.
    pub spans: Vec<(NRole, usize, usize)>,
}

impl<'c> View<'c> {
    /// Start the view at its last block `mark` accepts — the vendor's own compaction
    /// block, behind which that vendor reads nothing (Anthropic ignores what comes
    /// before it, OpenAI would read and bill it again): the messages before it and
    /// the blocks before it in its message are dropped.  No tool pair is split: a
    /// compaction block is on an assistant message, whose tool calls come after every
    /// other block of it, and whose predecessors' results were sent before it.
    pub fn from_last(&mut self, mark: impl Fn(&NBlock<'c>) -> bool) {
        let Some(k) = self.blocks.iter().rposition(mark) else {
            return;
        };
        if k == 0 {
            return;
        }
        self.blocks.drain(..k);
        self.spans.retain(|&(_, _, end)| end > k);
        for (_, start, end) in &mut self.spans {
            *start = start.saturating_sub(k);
            *end -= k;
        }
    }

    /// The messages as units of a plan, each with no marks.
    pub fn units(&self) -> Vec<Unit> {
        self.spans
            .iter()
            .map(|&(role, a, b)| Unit {
                role,
                blocks: (a, b),
                marks: (0, 0),
                native: None,
            })
            .collect()
    }
}

/// Build a provider's view (see `View`); `keep` says which blocks it can send.
pub fn view<'c>(n: &Neutral<'c>, keep: impl Fn(NRole, &NBlock<'c>) -> bool) -> View<'c> {
    let mut blocks: Vec<NBlock<'c>> = Vec::with_capacity(n.blocks.len());
    let mut spans: Vec<(NRole, usize, usize)> = Vec::with_capacity(n.messages.len());
    for m in &n.messages {
        let start = blocks.len();
        blocks.extend(n.blocks_of(m).iter().filter(|b| keep(m.role, b)).cloned());
        let end = blocks.len();
        if end == start {
            continue;
        }
        match spans.last_mut() {
            Some((role, _, e)) if *role == m.role => *e = end,
            _ => spans.push((m.role, start, end)),
        }
    }
    View { blocks, spans }
}

/// What a wire writes before its first message, as the values it writes it from (and
/// the plan's system blocks when `sys` says so): the head writers read nothing else, so
/// two heads that are the same (`Plan::shared_parts`) are the same bytes.  Each wire
/// fills only the fields its head writes (the rest stay empty).  Two heads are the same
/// when every field is equal (derived, so a field added here is compared too).
#[derive(Default, PartialEq, Eq)]
pub struct Head<'a> {
    pub model: &'a str,
    pub max_tokens: Option<u64>,
    /// The `ttl` of Anthropic's breakpoints (the head's and the messages').
    pub cache_ttl: Option<&'a str>,
    /// The head writes the system blocks (`Plan::sys`).
    pub sys: bool,
    /// Indices in `Plan::sys` of the blocks that carry a breakpoint (Anthropic).
    pub sys_bps: Vec<usize>,
    /// The conversation opens with the assistant: a placeholder user turn goes first.
    pub opening: bool,
    /// The system blocks are written as recorded (`native::system`).
    pub native_sys: Option<native::NativeSys<'a>>,
    /// Responses: the input is written as this recorded string (`native::mark_units`).
    pub input_text: Option<&'a str>,
}

/// One message of a plan as its wire writes it: a role and a range of `Plan::blocks`,
/// with a range of `Plan::marks` (block offsets in the message that the wire treats
/// apart: Anthropic's cache breakpoints; where a Gemini content merges a next message).
#[derive(Clone, Copy, Debug)]
pub struct Unit {
    pub role: NRole,
    pub blocks: (usize, usize),
    pub marks: (usize, usize),
    /// The recorded elements the unit is written as (`native::unit_elements`).
    pub native: Option<(u32, u32)>,
}

/// A request body laid out before it is written: the head, the messages (units), and
/// what the tail needs.  Writing is append-only and each unit is written from its own
/// role, blocks and marks, the head and the writer `State` before it, so a body is a
/// function of its plan (and the tail's options); `session` reuses a previous body up
/// to the first part of the plan that differs.
pub struct Plan<'a> {
    pub wire: Wire,
    pub head: Head<'a>,
    pub blocks: Vec<NBlock<'a>>,
    pub units: Vec<Unit>,
    pub marks: Vec<usize>,
    /// The system blocks (written in the head, or by Gemini after the messages).
    pub sys: Vec<Sys<'a>>,
    /// Anthropic: the last tool carries a breakpoint.
    pub tool_bp: bool,
    /// Where the cache breakpoints are, in the body's order, for the breakdown.
    pub breakpoints: Vec<Breakpoint>,
    /// The recorded request this one replays, when it was recorded on this wire.
    pub native: Option<&'a input::Native<'a>>,
}

/// Where a cache breakpoint is (named for the breakdown only when one is made).
#[derive(Clone, Copy, Debug)]
pub enum Breakpoint {
    /// `system[i]`, the end of layer L0 or L1.
    System { i: usize, layer: u8 },
    /// `messages[i]` as sent (L2).
    Message(usize),
    /// `tools[i]`, the end of L0.
    Tool(usize),
}

impl std::fmt::Display for Breakpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Breakpoint::System { i, layer } => write!(f, "system[{i}] (end of L{layer})"),
            Breakpoint::Message(i) => write!(f, "messages[{i}] (L2)"),
            Breakpoint::Tool(i) => write!(f, "tools[{i}] (end of L0)"),
        }
    }
}

impl<'a> Plan<'a> {
    /// Lay out `wire`'s body for the neutral messages `n`.
    pub fn new(wire: Wire, opts: &'a Options<'a>, n: &Neutral<'a>) -> Plan<'a> {
        let sys = system_blocks(opts, n);
        let mut plan = match wire {
            Wire::Anthropic => anthropic::plan(opts, sys, n),
            Wire::OpenAiChat => openai_chat::plan(opts, sys, n),
            Wire::OpenAiResponses => openai_responses::plan(opts, sys, n),
            Wire::Gemini => gemini::plan(sys, n),
        };
        if let Some(nat) = opts.native_for(wire.name()) {
            plan.head.native_sys = native::system(nat, &plan.sys);
            let from = plan
                .head
                .native_sys
                .as_ref()
                .map_or(0, |n| n.elements.len());
            native::mark_units(&mut plan, nat, from as u32);
            plan.native = Some(nat);
        }
        plan
    }

    /// Whether the core estimates the body from this plan: not when the body replays a
    /// recording (`native`), whose recorded parts have shapes the plan does not hold
    /// (several text blocks of one item, a system string, tools as declared): the
    /// specification estimates that body from its bytes (`estimate_body`), so the
    /// estimate is always of the body sent.
    pub fn estimable(&self) -> bool {
        self.native.is_none()
    }

    /// The recorded elements of unit `i` when it is written as recorded.
    fn native_unit(&self, i: usize) -> Option<(&input::Native<'a>, (u32, u32))> {
        Some((self.native?, self.units[i].native?))
    }

    /// A plan with its wire, head and system blocks, and no messages yet.
    fn empty(wire: Wire, head: Head<'a>, sys: Vec<Sys<'a>>, v: View<'a>) -> Plan<'a> {
        Plan {
            wire,
            head,
            units: v.units(),
            blocks: v.blocks,
            marks: Vec::new(),
            sys,
            tool_bp: false,
            breakpoints: Vec::new(),
            native: None,
        }
    }

    /// The blocks and marks of unit `i`.
    pub fn unit(&self, i: usize) -> (NRole, &[NBlock<'a>], &[usize]) {
        let u = &self.units[i];
        (
            u.role,
            &self.blocks[u.blocks.0..u.blocks.1],
            &self.marks[u.marks.0..u.marks.1],
        )
    }

    /// How many leading parts (the head, then units) `self` and `other` provably write
    /// as the same bytes: 0 when their wires or heads differ.
    pub fn shared_parts(&self, other: &Plan<'_>) -> usize {
        if self.wire != other.wire
            || self.head != other.head
            || (self.head.sys && !same_sys(&self.sys, &other.sys))
        {
            return 0;
        }
        let units = (0..self.units.len().min(other.units.len()))
            .take_while(|&i| {
                let (ra, ba, ma) = self.unit(i);
                let (rb, bb, mb) = other.unit(i);
                ra == rb
                    && ma == mb
                    && ba.len() == bb.len()
                    && ba.iter().zip(bb).all(|(x, y)| x.same(y))
                    && match (self.native_unit(i), other.native_unit(i)) {
                        (None, None) => true,
                        (Some((na, ra)), Some((nb, rb))) => {
                            ra == rb
                                && (ra.0..ra.1).all(|e| {
                                    let (x, y) = (na.elements[e as usize], nb.elements[e as usize]);
                                    neutral::same_str(x.get(), y.get())
                                })
                        }
                        _ => false,
                    }
            })
            .count();
        1 + units
    }

    /// Write part `k` (0: the head, then unit `k - 1`) from its block `skip` on (0 but
    /// for a unit resumed after its shared leading blocks: `shared_blocks`); `ends`,
    /// when given, gets the buffer length after each block of a unit (Anthropic's
    /// units, the only ones resumed mid-way).
    fn write_part(
        &self,
        w: &mut Json,
        k: usize,
        st: &mut State,
        skip: usize,
        ends: Option<&mut Vec<usize>>,
    ) {
        debug_assert!(skip == 0 || (k > 0 && self.wire == Wire::Anthropic));
        if k == 0 {
            match self.wire {
                Wire::Anthropic => anthropic::head(w, &self.head, &self.sys, st),
                Wire::OpenAiChat => openai_chat::head(w, &self.head, &self.sys, st),
                Wire::OpenAiResponses => openai_responses::head(w, &self.head, &self.sys, st),
                Wire::Gemini => gemini::head(w, &self.head, st),
            }
            return;
        }
        if let Some((nat, range)) = self.native_unit(k - 1) {
            if self.head.input_text.is_none() {
                native::write_elements(w, nat, range, st);
            }
            return;
        }
        let (role, blocks, marks) = self.unit(k - 1);
        match self.wire {
            Wire::Anthropic => anthropic::unit(w, &self.head, role, blocks, marks, st, skip, ends),
            Wire::OpenAiChat => openai_chat::unit(w, role, blocks, st),
            Wire::OpenAiResponses => openai_responses::unit(w, role, blocks, st),
            Wire::Gemini => gemini::unit(w, role, blocks, marks, st),
        }
    }

    /// Write the parts from `from` on and then the tail at the end of `w`: what comes
    /// after the body's first `from.mark.at` bytes (written before and reused);
    /// `marks` gets where the body stands after each part.  Returns the writer's final
    /// state.
    pub fn write(
        &self,
        w: &mut Json,
        opts: &Options<'_>,
        from: Start,
        marks: &mut Vec<Mark>,
    ) -> State {
        let st = self.write_parts(w, from, marks, None);
        self.write_tail(w, opts);
        st
    }

    /// `write` without the tail; `ends`, when given, gets where the body stands after
    /// each block written of an Anthropic unit (`Session` keeps them, so a unit can be
    /// resumed after the blocks it shares with the next request's).
    pub fn write_parts(
        &self,
        w: &mut Json,
        from: Start,
        marks: &mut Vec<Mark>,
        mut ends: Option<&mut Vec<usize>>,
    ) -> State {
        let Start {
            part,
            blocks: mut skip,
            mark: Mark { at: base, mut st },
        } = from;
        let origin = w.buf.len();
        for k in part..=self.units.len() {
            let before = ends.as_ref().map_or(0, |e| e.len());
            self.write_part(w, k, &mut st, skip, ends.as_deref_mut());
            skip = 0;
            if let Some(e) = ends.as_deref_mut() {
                for end in &mut e[before..] {
                    *end = base + (*end - origin);
                }
            }
            marks.push(Mark {
                at: base + (w.buf.len() - origin),
                st,
            });
        }
        st
    }

    /// How many leading blocks unit `u` of `self` and of `other` provably write as the
    /// same bytes, when a unit can be resumed mid-way (Anthropic, written from the plan:
    /// a block's bytes depend on it and on whether it carries a breakpoint, and only the
    /// message's closing follows the blocks).  0 where it cannot.  The units before `u`
    /// are taken to be the same (`shared_parts`).
    pub fn shared_blocks(&self, other: &Plan<'_>, u: usize) -> usize {
        if self.wire != Wire::Anthropic
            || other.wire != Wire::Anthropic
            || u >= self.units.len().min(other.units.len())
            || self.native_unit(u).is_some()
            || other.native_unit(u).is_some()
        {
            return 0;
        }
        let (ra, ba, ma) = self.unit(u);
        let (rb, bb, mb) = other.unit(u);
        if ra != rb {
            return 0;
        }
        let same = ba.iter().zip(bb).take_while(|(x, y)| x.same(y)).count();
        // A block with a breakpoint in one and not in the other is written apart: the
        // shared blocks stop before the first such block.
        ma.iter()
            .chain(mb)
            .filter(|&&m| m < same && ma.contains(&m) != mb.contains(&m))
            .min()
            .map_or(same, |&m| m)
    }

    /// The writer's state after the shared leading blocks of a unit written from
    /// `before` (Anthropic: the message's separator written, its count not yet added).
    pub fn mid_unit(before: State) -> State {
        State {
            first: false,
            count: before.count,
        }
    }

    /// The tail: the end of the message list and what follows it (tools, parameters,
    /// Gemini's system instruction).
    pub fn write_tail(&self, w: &mut Json, opts: &Options<'_>) {
        match self.wire {
            Wire::Anthropic => anthropic::tail(w, opts, self.tool_bp),
            Wire::OpenAiChat => openai_chat::tail(w, opts),
            Wire::OpenAiResponses => openai_responses::tail(w, opts, &self.head),
            Wire::Gemini => gemini::tail(w, opts, &self.sys, &self.head),
        }
    }

    /// Whether `self` with `opts` and `other` with `other_opts` provably have the same
    /// tail: the same wire and options (the very same parsed options), and what else a
    /// tail writer reads — Anthropic's tool breakpoint, Gemini's system blocks.
    pub fn same_tail(
        &self,
        opts: &Options<'_>,
        other: &Plan<'_>,
        other_opts: &Options<'_>,
    ) -> bool {
        self.wire == other.wire
            && std::ptr::eq(
                (opts as *const Options<'_>).cast::<u8>(),
                (other_opts as *const Options<'_>).cast::<u8>(),
            )
            && self.tool_bp == other.tool_bp
            && self.head.input_text == other.head.input_text
            && (self.wire != Wire::Gemini
                || (same_sys(&self.sys, &other.sys)
                    && self.head.native_sys == other.head.native_sys))
    }
}

/// What a writer carries from one part of a body to the next: whether the message
/// list is still empty (no comma before the next), and how many wire messages it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    pub first: bool,
    pub count: usize,
}

impl Default for State {
    fn default() -> Self {
        State {
            first: true,
            count: 0,
        }
    }
}

/// Where writing starts: part `part` (0: the head, then units), of which the first
/// `blocks` blocks are already in the body (a unit resumed after the blocks it shares
/// with the previous request's: `Plan::shared_blocks`), the body standing at `mark`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Start {
    pub part: usize,
    pub blocks: usize,
    pub mark: Mark,
}

/// Where a body stood after one part of its plan: the byte offset and the writer state.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mark {
    pub at: usize,
    pub st: State,
}

/// Render the neutral context as JSON shaped like `ctxrules.model.Context`
/// (`system` text blocks and `messages`), for `render_commit` and plugin providers.
pub fn render_context(commit_bytes: &[u8], options_bytes: &[u8]) -> Result<Vec<u8>, String> {
    write_context(&commit::decode_commit(commit_bytes)?, options_bytes)
}

/// `render_context` of decoded items.
pub fn write_context(items: &[Shared], options_bytes: &[u8]) -> Result<Vec<u8>, String> {
    let opts = input::parse_options(options_bytes)?;
    let n = neutral::build(items);
    let mut w = Json::with_capacity(body_estimate(items));
    w.raw("{\"system\":[");
    let mut first = true;
    for s in system_blocks(&opts, &n) {
        w.sep(&mut first);
        w.raw("{\"type\":\"text\",\"text\":");
        s.text.write(&mut w);
        w.raw("}");
    }
    w.raw("],\"messages\":[");
    let mut first = true;
    for m in &n.messages {
        w.sep(&mut first);
        w.raw(match m.role {
            NRole::User => "{\"role\":\"user\",\"content\":[",
            NRole::Assistant => "{\"role\":\"assistant\",\"content\":[",
        });
        let mut fb = true;
        for b in n.blocks_of(m) {
            w.sep(&mut fb);
            neutral_block(&mut w, b);
        }
        w.raw("]}");
    }
    w.raw("]}");
    Ok(w.finish())
}

/// Room to reserve for a body written from `items`: their texts, escaped.
pub fn body_estimate(items: &[Shared]) -> usize {
    // Folded items are not written (and not read: see `Shared::folded`).
    items
        .iter()
        .filter(|i| !i.folded())
        .map(|i| i.get().text_len())
        .sum::<usize>()
        + 1024
}

fn neutral_block(w: &mut Json, b: &NBlock<'_>) {
    open_block(w, b, Fields::All);
    w.raw("}");
}

/// Which optional fields `open_block` writes (of an image source, of a compaction block).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Fields {
    /// Every non-empty field the item carries (`render_context` round-trips them).
    All,
    /// Only those Anthropic's API takes (for an image, those of the source's type; a
    /// compaction block without our `id` / `vendor`).
    Wire,
}

/// Write `b` as an Anthropic-shaped content block (the shape `ctxrules.model` also uses)
/// without its closing `}`, so a caller may add fields such as `cache_control`.  Thinking
/// carries its signature and vendor when set: Anthropic's view keeps only signed thinking
/// without a vendor, so its wire form is the same; a compaction block likewise (with
/// `Fields::Wire` its `id` and `vendor` are left out).
pub fn open_block(w: &mut Json, b: &NBlock<'_>, fields: Fields) {
    match b {
        NBlock::Text(t) => {
            w.raw("{\"type\":\"text\",\"text\":");
            t.write(w);
        }
        NBlock::Image(img) => image_block(w, &img.image(), fields),
        NBlock::Thinking(t) => {
            let (thinking, signature, vendor) = t.thinking();
            w.raw("{\"type\":\"thinking\",\"thinking\":");
            w.pre_str(thinking.esc);
            if !signature.is_empty() {
                w.field_pre("signature", signature.esc);
            }
            if !vendor.is_empty() {
                w.field_pre("vendor", vendor.esc);
            }
        }
        NBlock::Redacted(data) => {
            w.raw("{\"type\":\"redacted_thinking\",\"data\":");
            w.pre_str(data.esc);
        }
        NBlock::Compaction(c) => {
            // Anthropic's shape; the blocks written are effective, so an Anthropic block
            // always has its summary (never an empty one).
            let c = c.compaction();
            w.raw("{\"type\":\"compaction\"");
            if !c.content.is_empty() {
                w.field_pre("content", c.content.esc);
            }
            if !c.encrypted_content.is_empty() {
                w.field_pre("encrypted_content", c.encrypted_content.esc);
            }
            if !c.signature.is_empty() {
                w.field_pre("signature", c.signature.esc);
            }
            if !c.tool_changes.is_empty() {
                w.raw(",\"tool_changes\":");
                w.raw(c.tool_changes);
            }
            if fields == Fields::All {
                if !c.id.is_empty() {
                    w.field_pre("id", c.id.esc);
                }
                if !c.vendor.is_empty() {
                    w.field_pre("vendor", c.vendor.esc);
                }
            }
        }
        NBlock::ToolUse(call) => {
            w.raw("{\"type\":\"tool_use\",\"id\":");
            call.write_id(w);
            w.field_pre("name", call.name().esc);
            w.raw(",\"input\":");
            w.raw(call.item.args_json());
        }
        NBlock::ToolResult(call) => {
            let content = call.content();
            w.raw("{\"type\":\"tool_result\",\"tool_use_id\":");
            call.write_id(w);
            if !call.item.has_images() {
                w.field_pre("content", content.esc);
            } else {
                // A tool that returned images: text and images as content blocks.
                w.raw(",\"content\":[");
                let mut first = true;
                if !content.is_empty() {
                    w.sep(&mut first);
                    w.raw("{\"type\":\"text\",\"text\":");
                    w.pre_str(content.esc);
                    w.raw("}");
                }
                for src in call.item.images() {
                    w.sep(&mut first);
                    image_block(w, &src, fields);
                    w.raw("}");
                }
                w.raw("]");
            }
            if call.is_error() {
                w.raw(",\"is_error\":true");
            }
        }
    }
}

/// An image block without its closing `}` (see `open_block`).
fn image_block(w: &mut Json, src: &ImageSource<'_>, image: Fields) {
    w.raw("{\"type\":\"image\",\"source\":{\"type\":");
    let url = src.is_url();
    w.raw(if url { "\"url\"" } else { "\"base64\"" });
    if image == Fields::Wire {
        if url {
            w.field_pre("url", src.url.esc);
        } else {
            w.field_pre("media_type", src.media_type.esc);
            w.field_pre("data", src.data.esc);
        }
    } else {
        for (k, v) in [
            ("media_type", src.media_type),
            ("data", src.data),
            ("url", src.url),
        ] {
            if !v.is_empty() {
                w.field_pre(k, v.esc);
            }
        }
    }
    w.raw("}");
}

/// Render the request body of `wire` for a commit, plus its breakdown.
pub fn render_request(
    wire: Wire,
    commit_bytes: &[u8],
    options_bytes: &[u8],
) -> Result<Rendered, String> {
    render_request_in(wire, commit_bytes, options_bytes, Vec::new())
}

/// `render_request` writing the body into `buf` (cleared first), which comes back as
/// `Rendered::body`.  A caller rendering repeatedly can hand the same buffer back each
/// time: a fresh multi-megabyte buffer costs a page fault per 4 KiB on first touch,
/// which was a tenth of the render.
pub fn render_request_in(
    wire: Wire,
    commit_bytes: &[u8],
    options_bytes: &[u8],
    buf: Vec<u8>,
) -> Result<Rendered, String> {
    write_request(
        wire,
        &commit::decode_commit(commit_bytes)?,
        options_bytes,
        buf,
    )
}

/// `render_request_in` of decoded items.
pub fn write_request(
    wire: Wire,
    items: &[Shared],
    options_bytes: &[u8],
    buf: Vec<u8>,
) -> Result<Rendered, String> {
    write_request_estimated(wire, items, options_bytes, buf, None)
}

/// `write_request`, with the request's estimate under `frame` when one is given: made
/// from the same plan, in the same call.
pub fn write_request_estimated(
    wire: Wire,
    items: &[Shared],
    options_bytes: &[u8],
    buf: Vec<u8>,
    frame: Option<&Frame>,
) -> Result<Rendered, String> {
    let opts = input::parse_options(options_bytes)?;
    let n = neutral_of(items);
    let plan = Plan::new(wire, &opts, &n);
    let mut w = Json::reusing(buf, body_estimate(items));
    let st = plan.write(&mut w, &opts, Start::default(), &mut Vec::new());
    let body = w.finish();
    let mut meta = Json::with_capacity(256);
    write_meta(&mut meta, &plan, &n, st, body.len());
    Ok(Rendered {
        body,
        meta: meta.finish(),
        estimate: frame
            .filter(|_| plan.estimable())
            .map(|f| estimate::estimate(&plan, f)),
    })
}

/// The neutral messages of a request: `neutral::build`, with the opening placeholder
/// when there is nothing to say yet (e.g. a system-only session: every vendor needs a
/// first user turn, so the placeholder is it).
pub fn neutral_of(items: &[Shared]) -> Neutral<'_> {
    let mut n = neutral::build(items);
    if n.messages.is_empty() {
        n.push_message(
            NRole::User,
            NBlock::Text(Txt::Own(OPENING_PLACEHOLDER.into())),
        );
    }
    n
}

/// The breakdown of a body written from `plan` (for `--explain`): messages, degraded
/// tool items, size, system blocks, breakpoints, token sums by category.
pub fn write_meta(m: &mut Json, plan: &Plan<'_>, n: &Neutral<'_>, st: State, body_bytes: usize) {
    m.raw("{\"messages\":");
    m.uint(st.count as u64);
    m.raw(",\"degraded\":");
    m.uint(n.degraded as u64);
    m.raw(",\"body_bytes\":");
    m.uint(body_bytes as u64);
    m.raw(",\"system_blocks\":");
    m.uint(plan.sys.len() as u64);
    m.raw(",\"breakpoints\":[");
    let mut first = true;
    for b in &plan.breakpoints {
        m.sep(&mut first);
        m.str(&b.to_string());
    }
    let t = n.tokens;
    m.raw("],\"item_tokens\":{\"system\":");
    m.uint(t.system);
    m.raw(",\"user\":");
    m.uint(t.user);
    m.raw(",\"assistant\":");
    m.uint(t.assistant);
    m.raw(",\"tool\":");
    m.uint(t.tool);
    m.raw(",\"summary\":");
    m.uint(t.summary);
    m.raw("}");
    if let Some(nat) = plan.native {
        // Round-trip: which recorded elements (and the system field) went out as
        // recorded; the rest were rewritten (or left out) because a rule changed them.
        let mut written = vec![false; nat.elements.len()];
        let sys = plan.head.native_sys.as_ref();
        for w in written.iter_mut().take(sys.map_or(0, |n| n.elements.len())) {
            *w = true;
        }
        for u in &plan.units {
            if let Some((a, b)) = u.native {
                for e in a..b {
                    written[e as usize] = true;
                }
            }
        }
        m.raw(",\"round_trip\":{\"elements\":");
        m.uint(nat.elements.len() as u64);
        m.raw(",\"rewritten\":[");
        let mut first = true;
        for (e, _) in written.iter().enumerate().filter(|(_, w)| !**w) {
            m.sep(&mut first);
            m.uint(e as u64);
        }
        m.raw("],\"system_as_recorded\":");
        m.raw(if sys.is_some_and(|n| n.field.is_some()) {
            "true"
        } else {
            "false"
        });
        m.raw("}");
    }
    m.raw("}");
}

#[cfg(test)]
mod tests;
