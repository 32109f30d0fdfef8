//! Commit items → provider-neutral messages (the one implementation of the item rules
//! in docs/items.md; every wire format is written from this).
//!
//! Pairing is decided here, once: a tool item becomes a tool_use on its caller's
//! assistant message and a tool_result in the user message right after it, or — when
//! its call id is missing, duplicated, or its caller is absent — plain user text.  So no
//! provider can ever see an orphan result or an unanswered call, whatever the rules did.

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::LazyLock;

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::commit::{Block, Compaction, ImageSource, Item, Role, Shared, State, S};
use crate::json::Json;

/// The hasher of the id sets: xxh3 keyed with a per-process random seed.  Ids come
/// from imported transcripts, so a fixed cheap hash (Fx, tried first) would let crafted
/// ids collide and make pairing quadratic; SipHash was a visible share of rendering
/// time.  Only membership is asked of these sets, so neither the seed nor their order
/// ever reaches the output.
#[derive(Clone, Copy)]
struct IdHasher(u64);

static ID_SEED: LazyLock<u64> = LazyLock::new(|| RandomState::new().hash_one(0x6374_7872u64));

impl Default for IdHasher {
    fn default() -> Self {
        IdHasher(*ID_SEED)
    }
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxh3_64_with_seed(bytes, self.0);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type IdSet<'c> = HashSet<&'c str, BuildHasherDefault<IdHasher>>;

/// Text a summary item is shown with (docs/items.md).
pub const SUMMARY_PREFIX: &str = "[Summary] ";

/// Role of a neutral message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NRole {
    User,
    Assistant,
}

/// Text of a neutral block: an item's string, or text made from item strings, or text
/// of the renderer's own.  Item strings are written from their escaped forms (made once
/// per item); only the renderer's own text is escaped when written.  Each item text
/// names the item it is read from, so what is worked out once per item (its token
/// counts, `crate::estimate`) is found from the block.
#[derive(Debug, Clone)]
pub enum Txt<'c> {
    /// An item's `rendered` text.
    Item(Item<'c>),
    /// The text of an item's text block.
    Block(BlockRef<'c>),
    /// A summary item's text after `SUMMARY_PREFIX`.
    Summary(Item<'c>),
    /// A tool item whose pairing is missing, as user text:
    /// `[tool NAME called with INPUT; result]` (or `; error]`), a newline, the result.
    Degraded(Item<'c>),
    /// Text of the renderer's own (placeholders, system blocks of the options, a
    /// trimmed copy), escaped when written.
    Own(Cow<'c, str>),
}

impl<'c> Txt<'c> {
    /// The item string the text is, for the kinds that are one.
    #[inline]
    pub fn item_str(&self) -> Option<S<'c>> {
        match self {
            Txt::Item(item) => Some(item.rendered()),
            Txt::Block(b) => Some(b.text()),
            _ => None,
        }
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        match self {
            Txt::Item(_) | Txt::Block(_) => self.item_str().is_none_or(|s| s.is_empty()),
            Txt::Summary(_) | Txt::Degraded(_) => false,
            Txt::Own(t) => t.is_empty(),
        }
    }

    /// The text as it is (assembled for the made-up kinds; unescaped: rarely needed).
    pub fn raw(&self) -> Cow<'c, str> {
        match self {
            Txt::Item(_) | Txt::Block(_) => self.item_str().unwrap_or_default().raw(),
            Txt::Summary(item) => Cow::Owned(format!("{SUMMARY_PREFIX}{}", item.rendered().raw())),
            Txt::Degraded(item) => {
                let mut s = format!("[tool {}", item.name().raw());
                if !item.tool_input().is_empty() {
                    s.push_str(" called with ");
                    s.push_str(&item.tool_input().raw());
                }
                s.push_str(if item.is_error() {
                    "; error]\n"
                } else {
                    "; result]\n"
                });
                s.push_str(&item.rendered().raw());
                Cow::Owned(s)
            }
            Txt::Own(t) => t.clone(),
        }
    }

    /// Append the text JSON-escaped, without quotes.
    pub fn write_inner(&self, w: &mut Json) {
        match self {
            Txt::Item(item) => w.pre(item.rendered().esc),
            Txt::Block(b) => w.pre(b.text().esc),
            Txt::Summary(item) => {
                w.raw(SUMMARY_PREFIX);
                w.pre(item.rendered().esc);
            }
            Txt::Degraded(item) => {
                // The literal parts need no escaping except the newline.
                w.raw("[tool ");
                w.pre(item.name().esc);
                if !item.tool_input().is_empty() {
                    w.raw(" called with ");
                    w.pre(item.tool_input().esc);
                }
                w.raw(if item.is_error() {
                    "; error]\\n"
                } else {
                    "; result]\\n"
                });
                w.pre(item.rendered().esc);
            }
            Txt::Own(t) => w.escaped_inner(t),
        }
    }

    /// Append the text as a JSON string literal.
    pub fn write(&self, w: &mut Json) {
        w.raw("\"");
        self.write_inner(w);
        w.raw("\"");
    }

    /// Whether `other` is provably written as the same bytes (see `NBlock::same`):
    /// item strings (of either kind) that are equal, summaries of equal strings, the
    /// same degraded item, or equal own texts.
    pub fn same(&self, other: &Txt<'_>) -> bool {
        match (self, other) {
            (Txt::Summary(a), Txt::Summary(b)) => same_str(a.rendered().esc, b.rendered().esc),
            (Txt::Degraded(a), Txt::Degraded(b)) => a.same(b),
            (Txt::Own(a), Txt::Own(b)) => same_str(a, b),
            _ => match (self.item_str(), other.item_str()) {
                (Some(a), Some(b)) => same_str(a.esc, b.esc),
                _ => false,
            },
        }
    }
}

/// Whether two strings are equal, without reading them when they are the same slice
/// (the usual case: both renders hold the same prepared item).
#[inline]
pub fn same_str(a: &str, b: &str) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

/// Append one JSON string literal of `parts` joined by `sep` (no joined copy made);
/// `sep` must need no escaping.
pub fn write_joined<'t, 'c: 't>(
    w: &mut Json,
    parts: impl IntoIterator<Item = &'t Txt<'c>>,
    sep: &str,
) {
    w.raw("\"");
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 {
            w.raw(sep);
        }
        p.write_inner(w);
    }
    w.raw("\"");
}

/// A tool item as a call or a result, with the id it goes out with: its own call id,
/// or for the `n`-th repeat (`n` > 0) `{id}_{n}` (see `Builder::wire_id`).  Every other
/// field is read from the item when written, so a block stays small.
#[derive(Debug, Clone, Copy)]
pub struct Call<'c> {
    pub item: Item<'c>,
    pub n: u32,
}

impl<'c> Call<'c> {
    /// Append the call id as a JSON string literal.
    pub fn write_id(&self, w: &mut Json) {
        let id = self.item.tool_use_id().unwrap_or_default();
        if self.n == 0 {
            w.pre_str(id.esc);
        } else {
            w.raw("\"");
            w.pre(id.esc);
            w.raw("_");
            w.uint(u64::from(self.n));
            w.raw("\"");
        }
    }

    /// The tool's name.
    pub fn name(&self) -> S<'c> {
        self.item.name()
    }

    /// What the tool returned (results).
    pub fn content(&self) -> S<'c> {
        self.item.rendered()
    }

    /// Whether the tool reported an error (results).
    pub fn is_error(&self) -> bool {
        self.item.is_error()
    }
}

/// A block of an item, by its index (`Item::block`).
#[derive(Debug, Clone, Copy)]
pub struct BlockRef<'c> {
    pub item: Item<'c>,
    pub i: u32,
}

impl<'c> BlockRef<'c> {
    /// The text of a text block.
    pub fn text(&self) -> S<'c> {
        match self.item.block(self.i) {
            Block::Text(t) => t,
            _ => S::default(),
        }
    }

    /// The image of an image block.
    pub fn image(&self) -> ImageSource<'c> {
        match self.item.block(self.i) {
            Block::Image(src) => src,
            _ => ImageSource::default(),
        }
    }

    /// `(thinking, signature, vendor)` of a thinking block; `vendor` says who minted
    /// the signature: only that vendor is sent it.
    pub fn thinking(&self) -> (S<'c>, S<'c>, S<'c>) {
        match self.item.block(self.i) {
            Block::Thinking {
                thinking,
                signature,
                vendor,
            } => (thinking, signature, vendor),
            _ => Default::default(),
        }
    }

    /// The fields of a compaction block.
    pub fn compaction(&self) -> Compaction<'c> {
        match self.item.block(self.i) {
            Block::Compaction(c) => c,
            _ => Compaction::default(),
        }
    }
}

/// A neutral content block, borrowing from the commit (at most five words: building the
/// messages of a large commit writes and reads one per block).
#[derive(Debug, Clone)]
pub enum NBlock<'c> {
    Text(Txt<'c>),
    Image(BlockRef<'c>),
    Thinking(BlockRef<'c>),
    Redacted(S<'c>),
    ToolUse(Call<'c>),
    ToolResult(Call<'c>),
    /// A provider's compaction of everything before it: only its vendor is sent it, and
    /// that vendor's request starts at its latest one (`crate::render::View::from_last`).
    Compaction(BlockRef<'c>),
}

impl NBlock<'_> {
    /// Blocks that may carry a cache breakpoint on Anthropic.
    pub fn cacheable(&self) -> bool {
        !matches!(self, NBlock::Thinking(_) | NBlock::Redacted(_))
    }

    /// Whether `other` is provably written as the same bytes by every wire format: the
    /// same kind, of the same item (`Item::same`) and block, call suffix or strings.
    /// A writer reads nothing of a block but these, so two renders that agree on every
    /// block of a message (and on what a wire adds around it) write it identically;
    /// `false` only means "not proven", which costs an incremental render its reuse.
    pub fn same(&self, other: &NBlock<'_>) -> bool {
        match (self, other) {
            (NBlock::Text(a), NBlock::Text(b)) => a.same(b),
            (NBlock::Image(a), NBlock::Image(b))
            | (NBlock::Thinking(a), NBlock::Thinking(b))
            | (NBlock::Compaction(a), NBlock::Compaction(b)) => a.i == b.i && a.item.same(&b.item),
            (NBlock::Redacted(a), NBlock::Redacted(b)) => same_str(a.esc, b.esc),
            (NBlock::ToolUse(a), NBlock::ToolUse(b))
            | (NBlock::ToolResult(a), NBlock::ToolResult(b)) => a.n == b.n && a.item.same(&b.item),
            _ => false,
        }
    }
}

/// A neutral message: its role and its blocks, `Neutral::blocks[start..end]`.
#[derive(Debug, Clone, Copy)]
pub struct NMsg {
    pub role: NRole,
    pub start: usize,
    pub end: usize,
}

/// The neutral rendering of one commit.
#[derive(Debug, Default)]
pub struct Neutral<'c> {
    /// Texts of system items with their layer: 0 (session constant) for those before
    /// the first message, 1 (situation) for those that arrive later.
    pub system: Vec<(Item<'c>, u8)>,
    /// The blocks of all messages, in order, in one vector (one allocation, not one per
    /// message); `messages` cuts it into messages.
    pub blocks: Vec<NBlock<'c>>,
    pub messages: Vec<NMsg>,
    /// Tool items shown as user text because their pairing information was missing.
    pub degraded: usize,
    /// Token sums by category, from the items' counts.
    pub tokens: Tokens,
}

impl<'c> Neutral<'c> {
    /// The blocks of message `m`.
    pub fn blocks_of(&self, m: &NMsg) -> &[NBlock<'c>] {
        &self.blocks[m.start..m.end]
    }

    /// Append a message of one block.
    pub fn push_message(&mut self, role: NRole, block: NBlock<'c>) {
        let start = self.blocks.len();
        self.blocks.push(block);
        self.messages.push(NMsg {
            role,
            start,
            end: start + 1,
        });
    }
}

/// Token sums of the rendered items, by category.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tokens {
    pub system: u64,
    pub user: u64,
    pub assistant: u64,
    pub tool: u64,
    pub summary: u64,
}

/// The source ids of the open turn's assistant items.  A turn almost always has one
/// or two, and the caller asked about is nearly always the latest: a short list searched
/// from its end, switching to a set only for unusually long turns, beats hashing every id.
#[derive(Default)]
struct Owners<'c> {
    few: Vec<&'c str>,
    many: IdSet<'c>,
}

impl<'c> Owners<'c> {
    const FEW: usize = 16;

    fn clear(&mut self) {
        self.few.clear();
        if !self.many.is_empty() {
            self.many.clear();
        }
    }

    fn insert(&mut self, id: &'c str) {
        if !self.many.is_empty() {
            self.many.insert(id);
        } else if self.few.len() < Self::FEW {
            self.few.push(id);
        } else {
            self.many.extend(self.few.drain(..));
            self.many.insert(id);
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.few.iter().rev().any(|&o| o == id) || (!self.many.is_empty() && self.many.contains(id))
    }
}

struct Builder<'c> {
    out: Neutral<'c>,
    /// Results waiting to open the user message after the current assistant message.
    pending: Vec<NBlock<'c>>,
    /// Source ids of the assistant items merged into the last (assistant) message.
    open_assistants: Owners<'c>,
    /// Call ids used so far, with the last suffix given to a repeat of each.
    seen_ids: HashMap<&'c str, u32, BuildHasherDefault<IdHasher>>,
    /// Ids made for repeated call ids (see `wire_id`).
    renamed: HashSet<String, BuildHasherDefault<IdHasher>>,
    /// The open assistant turn has no content yet; its first tool_use opens its message.
    empty_open: bool,
}

impl<'c> Builder<'c> {
    fn push(&mut self, role: NRole, block: NBlock<'c>) {
        match self.out.messages.last_mut() {
            // The last message's blocks are the tail of `blocks`.
            Some(m) if m.role == role => {
                self.out.blocks.push(block);
                m.end += 1;
            }
            _ => self.out.push_message(role, block),
        }
    }

    /// Close the open tool group: its results open the next user message.
    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let start = self.out.blocks.len();
            self.out.blocks.append(&mut self.pending);
            self.out.messages.push(NMsg {
                role: NRole::User,
                start,
                end: self.out.blocks.len(),
            });
        }
        self.open_assistants.clear();
        self.empty_open = false;
    }

    fn user(&mut self, item: Item<'c>) {
        self.flush();
        if !item.rendered().is_empty() {
            self.push(NRole::User, NBlock::Text(Txt::Item(item)));
        }
        for (i, b) in item.blocks().enumerate() {
            if let Block::Image(_) = b {
                let i = i as u32;
                self.push(NRole::User, NBlock::Image(BlockRef { item, i }));
            }
        }
    }

    fn assistant(&mut self, item: Item<'c>) {
        if !self.pending.is_empty() {
            self.flush();
        }
        if !matches!(self.out.messages.last(), Some(m) if m.role == NRole::Assistant) {
            self.open_assistants.clear();
        }
        let mut any = false;
        if item.state() == State::Summary {
            self.push(NRole::Assistant, NBlock::Text(Txt::Summary(item)));
            any = true;
        } else {
            // Text blocks give the original block order, but only while they still say
            // what `rendered` says (a rule may have rewritten the text).
            let use_blocks = item.use_blocks();
            for (i, b) in item.blocks().enumerate() {
                let i = i as u32;
                let block = match b {
                    Block::Text(t) if use_blocks && !t.is_empty() => {
                        NBlock::Text(Txt::Block(BlockRef { item, i }))
                    }
                    Block::Thinking { .. } => NBlock::Thinking(BlockRef { item, i }),
                    Block::Redacted(data) => NBlock::Redacted(data),
                    Block::Compaction(_) => NBlock::Compaction(BlockRef { item, i }),
                    _ => continue,
                };
                self.push(NRole::Assistant, block);
                any = true;
            }
            if !use_blocks && !item.rendered().is_empty() {
                self.push(NRole::Assistant, NBlock::Text(Txt::Item(item)));
                any = true;
            }
        }
        if any {
            self.empty_open = false;
            self.open_assistants.insert(item.source_node_id().esc);
        } else if matches!(self.out.messages.last(), Some(m) if m.role == NRole::Assistant) {
            self.open_assistants.insert(item.source_node_id().esc);
        } else {
            // An empty assistant turn still owns its tool calls: its first tool_use
            // opens its message.
            self.open_assistants.clear();
            self.open_assistants.insert(item.source_node_id().esc);
            self.empty_open = true;
        }
    }

    /// The id a call goes out with: its own, or — when the commit already used it (e.g.
    /// transcripts whose tool reuses ids across turns) — `{id}_{n}`, so every vendor sees
    /// unique ids and the call and its result still carry the same one.
    ///
    /// Ids are compared in their escaped forms (escaping is one-to-one, and `_` and
    /// digits need none, so `{id}_{n}` escaped is the escaped id, `_`, `n`).
    fn wire_id(&mut self, id: S<'c>) -> u32 {
        if !self.renamed.contains(id.esc) {
            if let std::collections::hash_map::Entry::Vacant(e) = self.seen_ids.entry(id.esc) {
                e.insert(1);
                return 0;
            }
        }
        // The counter per id makes n-fold repeats linear, not quadratic.
        let mut n = *self.seen_ids.get(id.esc).unwrap_or(&1);
        loop {
            n = n.saturating_add(1);
            let candidate = format!("{}_{n}", id.esc);
            if !self.seen_ids.contains_key(candidate.as_str()) && !self.renamed.contains(&candidate)
            {
                self.seen_ids.insert(id.esc, n);
                self.renamed.insert(candidate);
                return n;
            }
        }
    }

    fn tool(&mut self, item: Item<'c>) {
        let id = item.tool_use_id().unwrap_or_default();
        // Escaped forms: compared with the escaped source ids of the open turn.
        let caller = item.caller().map_or("", |c| c.esc);
        let last_is_assistant =
            matches!(self.out.messages.last(), Some(m) if m.role == NRole::Assistant);
        // open_assistants holds only rendered (not summarized) assistant items of the
        // open turn, so membership also proves the caller is present.
        let paired = !id.is_empty()
            && self.open_assistants.contains(caller)
            && (last_is_assistant || self.empty_open);
        if paired {
            let call = Call {
                item,
                n: self.wire_id(id),
            };
            self.empty_open = false;
            self.push(NRole::Assistant, NBlock::ToolUse(call));
            self.pending.push(NBlock::ToolResult(call));
        } else {
            self.out.degraded += 1;
            self.flush();
            self.empty_open = false;
            self.push(NRole::User, NBlock::Text(Txt::Degraded(item)));
        }
    }
}

/// How many items ahead `build` asks for an item's ids to be loaded: far enough for the
/// load to arrive, near enough to stay in the cache.
const PREFETCH_AHEAD: usize = 4;

/// Render a commit's items to neutral messages.  Ids repeated in the commit are made
/// unique (`wire_id`); an id is never dropped.
pub fn build<'c>(items: &'c [Shared]) -> Neutral<'c> {
    let mut b = Builder {
        // Sized once: about a block per item (a tool item gives two), a message per two.
        out: Neutral {
            blocks: Vec::with_capacity(items.len() + items.len() / 2 + 1),
            messages: Vec::with_capacity(items.len() / 2 + 1),
            ..Neutral::default()
        },
        pending: Vec::new(),
        open_assistants: Owners::default(),
        // Not sized by a count of the tool items: that was one more pass over every
        // item, folded ones too (most of a long session's commit), each a cache miss.
        seen_ids: HashMap::default(),
        renamed: HashSet::default(),
        empty_open: false,
    };
    for (k, shared) in items.iter().enumerate() {
        if let Some(ahead) = items.get(k + PREFETCH_AHEAD).filter(|a| !a.folded()) {
            ahead.get().prefetch();
        }
        // Folded items are skipped by their handle alone: their data is never read.
        if shared.folded() {
            continue;
        }
        let item = shared.get();
        let state = item.state();
        debug_assert_ne!(state, State::Summarized);
        let t = &mut b.out.tokens;
        let sum = match (item.role(), state) {
            (_, State::Summary) => &mut t.summary,
            (Role::System, _) => &mut t.system,
            (Role::User, _) => &mut t.user,
            (Role::Assistant, _) => &mut t.assistant,
            (Role::Tool, _) => &mut t.tool,
        };
        *sum = sum.saturating_add(item.tokens());
        match item.role() {
            Role::System if state != State::Summary => {
                if !item.rendered().is_empty() {
                    let layer = u8::from(!b.out.messages.is_empty() || !b.pending.is_empty());
                    b.out.system.push((item, layer));
                }
            }
            Role::User => b.user(item),
            Role::Assistant | Role::System => b.assistant(item),
            Role::Tool => b.tool(item),
        }
    }
    b.flush();
    b.out
}
