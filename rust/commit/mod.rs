//! The commit as the core reads it: one reader and one item type, shared by rendering
//! and the commit diff.
//!
//! Python hands a commit over as msgspec MessagePack (the whole commit, or its item
//! list).  `reader` decodes it with every declared length capped by the bytes that
//! remain and the nesting bounded by [`MAX_DEPTH`], so hostile bytes give an error,
//! never an abort or a stack overflow.  Each item becomes an [`Item`] that owns its
//! strings together with their JSON-escaped forms: items are immutable, so the escaping
//! (most of the cost of writing a request body) is done once per item and reused by
//! every later render, through the content-keyed cache of `cache`.

pub mod cache;
pub mod reader;

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use xxhash_rust::xxh3::Xxh3;

use crate::json::{escape_into, nests_deeper};

/// Deepest nesting of MessagePack maps and arrays accepted in a commit, counting the
/// commit map itself as level 1.  A commit's own structure takes 5 levels above any
/// stored value (commit → items → item → blocks → block) and stored values nest at most
/// `ctxrules.limits.MAX_NESTING` = 100 levels (e.g. a tool_use block's `input`), so 105
/// accepts every commit whose values respect that limit.  The same bound applies to the
/// JSON the core parses (render options, tool schemas, tool arguments), whose structure
/// above a stored value is shallower.
pub const MAX_DEPTH: usize = 5 + 100;

/// Levels above an item in a commit (the commit map and its `items` array); an item's
/// own depth budget is the rest, the same whether it came in a commit or a bare list.
const ITEM_LEVEL: usize = 2;

/// Role of a commit item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Role {
    #[default]
    User,
    Assistant,
    Tool,
    System,
}

/// Compression state of a commit item (docs/items.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum State {
    #[default]
    Full,
    Aged,
    Cleared,
    Summarized,
    Summary,
}

impl State {
    /// The name `ctxrules.model` uses.
    pub fn name(self) -> &'static str {
        match self {
            State::Full => "full",
            State::Aged => "aged",
            State::Cleared => "cleared",
            State::Summarized => "summarized",
            State::Summary => "summary",
        }
    }
}

/// A string of an item, kept JSON-escaped (without quotes): that is the form every body
/// needs, so it is made once per item.  Most strings need no escaping, and then `esc` is
/// the text itself (`plain`).  Escaping is one-to-one, so escaped forms compare (and
/// hash) like the texts they escape.
#[derive(Clone, Copy, Debug, Default)]
pub struct S<'a> {
    pub esc: &'a str,
    pub plain: bool,
}

impl<'a> S<'a> {
    /// Whether the string is empty.
    pub fn is_empty(&self) -> bool {
        self.esc.is_empty()
    }

    /// The text itself (unescaped again when it needed escaping; rarely needed).
    pub fn raw(&self) -> Cow<'a, str> {
        if self.plain {
            return Cow::Borrowed(self.esc);
        }
        let quoted = format!("\"{}\"", self.esc);
        // Our own escaper wrote it, so it parses; should it not, the escaped text is
        // still the best available answer.
        Cow::Owned(serde_json::from_str::<String>(&quoted).unwrap_or_else(|_| self.esc.into()))
    }
}

/// How many memo sets an item has (`Item::memo`): one per token encoding.
pub const MEMO_SETS: usize = 2;

/// Values worked out from an item once and then kept with it for every later request
/// that holds it (the estimator's token counts: `crate::estimate`).  Slot `i` is
/// unknown until first asked for; threads that race for it compute the same value.
#[derive(Debug)]
pub struct Memo(Box<[AtomicU64]>);

impl Memo {
    /// The value no slot holds: "not worked out yet".
    const UNKNOWN: u64 = u64::MAX;

    fn new(len: usize) -> Memo {
        Memo((0..len).map(|_| AtomicU64::new(Self::UNKNOWN)).collect())
    }

    /// Slot `i`, computed by `f` the first time (`f` must not return `u64::MAX`).
    #[inline]
    pub fn get(&self, i: usize, f: impl FnOnce() -> u64) -> u64 {
        // Acquire / release: what `f` stored in other slots before this one is seen
        // by whoever sees this one.
        let slot = &self.0[i];
        let known = slot.load(Ordering::Acquire);
        if known != Self::UNKNOWN {
            return known;
        }
        let v = f();
        debug_assert_ne!(v, Self::UNKNOWN);
        slot.store(v, Ordering::Release);
        v
    }

    /// Slots held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds no slot.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Where a string is in its batch's text (see `S`).
#[derive(Clone, Copy, Debug, Default)]
struct Span {
    at: u32,
    len: u32,
    plain: bool,
}

/// A content block of an item, as stored: only the kinds rendering uses (text, image,
/// thinking, redacted thinking, a provider's compaction that does something) are kept.
/// `cache_control` is deliberately not read: breakpoints come only from the layering
/// policy, never from (possibly imported) content.  Tool use/result blocks are not kept
/// either (pairing comes from the item's fields).
#[derive(Debug)]
enum BlockSpans {
    Text(Span),
    Image([Span; 4]),
    Thinking([Span; 3]),
    Redacted(Span),
    /// content, encrypted_content, signature, tool_changes (JSON), id, vendor; boxed, as
    /// the rare kind, so every other block stays small.
    Compaction(Box<[Span; 6]>),
}

/// A content block, borrowing the strings of its item.
#[derive(Clone, Copy, Debug)]
pub enum Block<'a> {
    Text(S<'a>),
    Image(ImageSource<'a>),
    Thinking {
        thinking: S<'a>,
        signature: S<'a>,
        /// Who minted `signature` ("" = Anthropic, "gemini" = a thought signature).
        vendor: S<'a>,
    },
    Redacted(S<'a>),
    /// A provider's compaction of everything before it (`ctxrules.model.CompactionBlock`);
    /// only effective ones are kept (`compaction_is_effective`).
    Compaction(Compaction<'a>),
}

/// A provider's compaction block.
#[derive(Clone, Copy, Debug, Default)]
pub struct Compaction<'a> {
    /// Anthropic's summary text (empty for other vendors).
    pub content: S<'a>,
    /// Opaque state to send back verbatim (OpenAI's; Anthropic's metadata).
    pub encrypted_content: S<'a>,
    /// Anthropic's signature over the summary, sent back verbatim.
    pub signature: S<'a>,
    /// Anthropic's tool changes of the compacted range: JSON array text (checked, spliced
    /// as it is), or empty.
    pub tool_changes: &'a str,
    /// The vendor's item id (OpenAI), kept but not sent.
    pub id: S<'a>,
    /// Who made it ("" = Anthropic, "openai" = OpenAI Responses): only that vendor is
    /// sent it.
    pub vendor: S<'a>,
}

impl Compaction<'_> {
    /// Whether `vendor` made it (vendors compare by name; "" is Anthropic).
    pub fn is_from(&self, vendor: &str) -> bool {
        self.vendor.esc == vendor
    }
}

/// Whether a compaction block does anything (the rule of
/// `ctxrules.model.CompactionBlock.effective`): Anthropic's (vendor "") needs a summary —
/// a null or empty one is a failed compaction, a no-op the vendor ignores and we never
/// send as an empty summary; another vendor's needs its encrypted state.
pub fn compaction_is_effective(
    vendor: &str,
    content: Option<&str>,
    encrypted: Option<&str>,
) -> bool {
    if vendor.is_empty() {
        content.is_some_and(|c| !c.is_empty())
    } else {
        encrypted.is_some_and(|e| !e.is_empty())
    }
}

/// Where an image's bytes are.
#[derive(Clone, Copy, Debug, Default)]
pub struct ImageSource<'a> {
    pub kind: S<'a>,
    pub media_type: S<'a>,
    pub data: S<'a>,
    pub url: S<'a>,
}

impl ImageSource<'_> {
    /// True when the image is given by URL rather than inline bytes.
    pub fn is_url(&self) -> bool {
        self.kind.esc == "url" || (self.data.is_empty() && !self.url.is_empty())
    }
}

/// An item's prepared data (see `Item`); its strings are spans of its batch's text.
/// `args_json` is the one string kept unescaped: it is spliced into bodies as JSON.
#[derive(Debug)]
struct Data {
    role: Role,
    state: State,
    tokens: u64,
    is_error: bool,
    use_blocks: bool,
    /// See `Item::unchanged`.
    unchanged: bool,
    /// See `Item::content_hash`; 0 until first asked for.
    content_hash: AtomicU64,
    /// See `Item::memo`; made on first use.
    memo: [OnceLock<Memo>; MEMO_SETS],
    source_node_id: Span,
    attached_from: Option<Span>,
    rendered: Span,
    name: Span,
    caller: Option<Span>,
    tool_use_id: Option<Span>,
    tool_input: Span,
    args: Span,
    args_json: Span,
    /// This item's range of `Batch::blocks`.
    blocks: (u32, u32),
    /// This item's part of `Batch::text` (for sizes).
    text: (u32, u32),
    /// This item's MessagePack bytes in `Batch::keys` (the cache key).
    key: (usize, usize),
}

/// Items prepared together: all their strings in one buffer, their data in one array.
/// One decode makes one batch (a few allocations, not several per item), and a commit
/// rendered again reads its items from memory laid out in order.  A dropped batch
/// gives its buffers back to `spare` for the next decode.
#[derive(Debug)]
pub struct Batch {
    text: Vec<u8>,
    keys: Vec<u8>,
    data: Vec<Data>,
    blocks: Vec<BlockSpans>,
}

impl Drop for Batch {
    fn drop(&mut self) {
        spare::BYTES.give(std::mem::take(&mut self.text));
        spare::BYTES.give(std::mem::take(&mut self.keys));
        spare::DATA.give(std::mem::take(&mut self.data));
    }
}

/// A prepared item as the caches and renders hold it: its batch and its place there,
/// and whether it is folded.
#[derive(Clone, Debug)]
pub struct Shared {
    batch: Arc<Batch>,
    idx: u32,
    /// `state() == Summarized`, kept in the handle (in what was its padding): a long
    /// session's commit is mostly folded items that no request shows, and a pass that
    /// skips them reads only the handles, not each item's data in its own batch (a
    /// cache miss or two per item, most of a render at ~3,500 items).
    folded: bool,
}

impl Shared {
    /// The item at `idx` of `batch`.
    fn new(batch: Arc<Batch>, idx: u32) -> Shared {
        let folded = batch.data[idx as usize].state == State::Summarized;
        Shared { batch, idx, folded }
    }

    /// Whether the item is folded (`summarized`): what `get().state()` says, read
    /// without touching the item's data.
    #[inline(always)]
    pub fn folded(&self) -> bool {
        self.folded
    }

    /// The item.
    #[inline(always)]
    pub fn get(&self) -> Item<'_> {
        let b = &*self.batch;
        Item {
            batch: b,
            d: &b.data[self.idx as usize],
        }
    }

    /// The MessagePack bytes the item was prepared from.
    pub fn key(&self) -> &[u8] {
        let (a, n) = self.get().d.key;
        &self.batch.keys[a..a + n]
    }

    /// Bytes this item takes in its batch (for the caches' memory bounds).
    pub fn size(&self) -> usize {
        let d = self.get().d;
        std::mem::size_of::<Data>()
            + d.text.1 as usize
            + d.key.1
            + d.blocks.1 as usize * std::mem::size_of::<BlockSpans>()
    }
}

/// One `ContextItem` (docs/items.md says what each role carries), prepared for
/// rendering: every string is kept with its JSON-escaped form, the tool arguments as
/// one JSON object text, and what the renderer and the diff decide per item (whether
/// the text blocks still say what `rendered` says, the diff's content hash) is decided
/// once.
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    batch: &'a Batch,
    d: &'a Data,
}

impl<'a> Item<'a> {
    #[inline(always)]
    fn slice(&self, at: u32, len: u32) -> &'a str {
        let (a, b) = (at as usize, at as usize + len as usize);
        let text = &self.batch.text;
        debug_assert!(b <= text.len() && std::str::from_utf8(&text[a..b]).is_ok());
        // SAFETY: spans are made only by `Builder::push*`, around whole `&str`s (or
        // their escaped forms, also UTF-8: escaping copies multi-byte sequences as they
        // are and adds ASCII) pushed into this buffer, so the range is in bounds and
        // UTF-8.  Checked slicing would read the bytes at both ends: for the ~10
        // strings of each of 10,000 items that was a cache miss each and a third of a
        // render.
        unsafe { std::str::from_utf8_unchecked(text.get_unchecked(a..b)) }
    }

    #[inline(always)]
    fn s(&self, s: Span) -> S<'a> {
        S {
            esc: self.slice(s.at, s.len),
            plain: s.plain,
        }
    }

    /// Role.
    #[inline(always)]
    pub fn role(&self) -> Role {
        self.d.role
    }

    /// Compression state.
    #[inline(always)]
    pub fn state(&self) -> State {
        self.d.state
    }

    /// Token count.
    pub fn tokens(&self) -> u64 {
        self.d.tokens
    }

    /// Whether a tool result reported an error.
    pub fn is_error(&self) -> bool {
        self.d.is_error
    }

    /// Whether the text blocks joined reproduce `rendered`, so they give the order.
    pub fn use_blocks(&self) -> bool {
        self.d.use_blocks
    }

    /// Whether the item is still as its node made it: `full`, not attached from another
    /// commit, and no rule changed it (every change through the rule API sets a
    /// `reason` of its own; a node's own item says `new`, or `anchor`).  Only such an
    /// item may be written in its recorded form (`crate::render::native`).
    pub fn unchanged(&self) -> bool {
        self.d.unchanged
    }

    /// Hash of `rendered` and `tool_input`: the diff's "rendered the same" test.  Made
    /// on first use (rendering never needs it) from the escaped forms: escaping is one
    /// to one and never leaves a NUL byte, so `esc(rendered) NUL esc(tool_input)` tells
    /// exactly what the two texts tell.
    pub fn content_hash(&self) -> u64 {
        let known = self.d.content_hash.load(Ordering::Relaxed);
        if known != 0 {
            return known;
        }
        let mut h = Xxh3::new();
        h.update(self.rendered().esc.as_bytes());
        h.update(&[0]);
        h.update(self.tool_input().esc.as_bytes());
        // 0 means "not yet": a hash of 0 is made again each time, which is only slower.
        let hash = h.digest();
        self.d.content_hash.store(hash, Ordering::Relaxed);
        hash
    }

    /// The item's memo `set` (`< MEMO_SETS`), made on first use with `fixed` slots plus
    /// `per_block` slots per content block; every caller of a set asks for the same
    /// shape.  What is kept there lives as long as the prepared item (the item caches).
    pub fn memo(&self, set: usize, fixed: usize, per_block: usize) -> &'a Memo {
        self.d.memo[set].get_or_init(|| Memo::new(fixed + per_block * self.d.blocks.1 as usize))
    }

    /// The number of content blocks (`block` takes `0..` this).
    pub fn block_count(&self) -> u32 {
        self.d.blocks.1
    }

    /// The node this item shows (a virtual `sm_…` id for summary items).
    pub fn source_node_id(&self) -> S<'a> {
        self.s(self.d.source_node_id)
    }

    /// The commit an attach expanded this item from, if any.
    pub fn attached_from(&self) -> Option<S<'a>> {
        self.d.attached_from.map(|s| self.s(s))
    }

    /// The text shown for the item.
    pub fn rendered(&self) -> S<'a> {
        self.s(self.d.rendered)
    }

    /// Tool name (tool items).
    pub fn name(&self) -> S<'a> {
        self.s(self.d.name)
    }

    /// The assistant item that made this tool call.
    pub fn caller(&self) -> Option<S<'a>> {
        self.d.caller.map(|s| self.s(s))
    }

    /// The call id pairing a tool call with its result.
    pub fn tool_use_id(&self) -> Option<S<'a>> {
        self.d.tool_use_id.map(|s| self.s(s))
    }

    /// The tool arguments as stored (JSON text, or text a rule cut).
    pub fn tool_input(&self) -> S<'a> {
        self.s(self.d.tool_input)
    }

    /// The tool arguments as one JSON object text: `tool_input` when it is an object,
    /// `{}` when empty, else the text wrapped as `{"truncated_args": …}` so vendors that
    /// require an object still get one, and nothing of it is lost.
    pub fn args_json(&self) -> &'a str {
        self.s(self.d.args_json).esc
    }

    /// `args_json` escaped, for the vendors that take arguments as a JSON string.
    pub fn args(&self) -> S<'a> {
        self.s(self.d.args)
    }

    /// The content blocks.
    pub fn blocks(&self) -> impl Iterator<Item = Block<'a>> + 'a {
        let me = *self;
        (0..self.d.blocks.1).map(move |i| me.block(i))
    }

    /// Content block `i` (of `0..` the number `blocks` yields).
    #[inline]
    pub fn block(&self, i: u32) -> Block<'a> {
        let (a, n) = self.d.blocks;
        debug_assert!(i < n);
        match self.batch.blocks[(a + i) as usize] {
            BlockSpans::Text(t) => Block::Text(self.s(t)),
            BlockSpans::Image([k, m, d, u]) => Block::Image(ImageSource {
                kind: self.s(k),
                media_type: self.s(m),
                data: self.s(d),
                url: self.s(u),
            }),
            BlockSpans::Thinking([t, s, v]) => Block::Thinking {
                thinking: self.s(t),
                signature: self.s(s),
                vendor: self.s(v),
            },
            BlockSpans::Redacted(d) => Block::Redacted(self.s(d)),
            BlockSpans::Compaction(ref spans) => {
                let [c, e, sig, tc, id, v] = **spans;
                Block::Compaction(Compaction {
                    content: self.s(c),
                    encrypted_content: self.s(e),
                    signature: self.s(sig),
                    tool_changes: self.s(tc).esc,
                    id: self.s(id),
                    vendor: self.s(v),
                })
            }
        }
    }

    /// The images among the blocks (a tool's returned images, a user's attachments).
    pub fn images(&self) -> impl Iterator<Item = ImageSource<'a>> + 'a {
        self.blocks().filter_map(|b| match b {
            Block::Image(src) => Some(src),
            _ => None,
        })
    }

    /// Whether the item has image blocks.
    pub fn has_images(&self) -> bool {
        self.images().next().is_some()
    }

    /// Ask the CPU to start loading the item's ids (its first strings, see
    /// `Builder::prepare`) into the cache.  A pass over a commit touches each item's
    /// ids first; without a hint every item cost a cache miss there.
    #[inline(always)]
    pub fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = self
                .batch
                .text
                .as_ptr()
                .wrapping_add(self.d.text.0 as usize);
            // SAFETY: a prefetch is only a hint: it never faults and changes no state
            // the program can see, whatever the address.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
            };
        }
    }

    /// Bytes of the item's texts, escaped (an estimate of its rendered size).
    pub fn text_len(&self) -> usize {
        self.d.text.1 as usize
    }

    /// Whether `other` is provably the same item: the same prepared item, or one
    /// prepared from the same MessagePack bytes (which determine everything read from
    /// an item, see `cache`).  Items decoded without their bytes (the identity path of
    /// the Python bindings) are the same only as the same prepared item.  `false` is
    /// no proof of a difference.
    pub fn same(&self, other: &Item<'_>) -> bool {
        if std::ptr::eq(self.d, other.d) {
            return true;
        }
        let (a, n) = self.d.key;
        let (b, m) = other.d.key;
        n != 0 && n == m && self.batch.keys[a..a + n] == other.batch.keys[b..b + m]
    }
}

/// Builds a batch: items are added one by one, then the batch is frozen.
#[derive(Default)]
struct Builder {
    text: Vec<u8>,
    keys: Vec<u8>,
    data: Vec<Data>,
    blocks: Vec<BlockSpans>,
}

/// A batch's text is split before it passes this (its spans are 32-bit offsets).
const BATCH_TEXT: usize = 1 << 31;

impl Builder {
    /// Push `s` escaped; returns where it is.
    fn push(&mut self, s: &str) -> Result<Span, String> {
        let at = self.text.len();
        escape_into(&mut self.text, s);
        self.span(at, s.len())
    }

    /// Push `s` as it is (text that is already JSON, spliced into bodies unescaped).
    fn push_json(&mut self, s: &str) -> Result<Span, String> {
        let at = self.text.len();
        self.text.extend_from_slice(s.as_bytes());
        self.span(at, s.len())
    }

    fn span(&self, at: usize, raw_len: usize) -> Result<Span, String> {
        if self.text.len() > u32::MAX as usize {
            return Err("commit item: its texts exceed 4 GiB".into());
        }
        let len = self.text.len() - at;
        Ok(Span {
            at: at as u32,
            len: len as u32,
            // Escaping only ever lengthens a text.
            plain: len == raw_len,
        })
    }

    /// Prepare one decoded item, keeping `key` (its MessagePack bytes) when given;
    /// returns its index in the batch.
    fn add(&mut self, raw: &reader::RawItem<'_>, key: Option<&[u8]>) -> Result<u32, String> {
        let start = self.text.len();
        let blocks_start = self.blocks.len();
        let d = self.prepare(raw)?;
        let key = key.unwrap_or_default();
        let d = Data {
            blocks: (
                blocks_start as u32,
                (self.blocks.len() - blocks_start) as u32,
            ),
            text: (start as u32, (self.text.len() - start) as u32),
            key: (self.keys.len(), key.len()),
            ..d
        };
        self.keys.extend_from_slice(key);
        self.data.push(d);
        Ok((self.data.len() - 1) as u32)
    }

    /// Size the buffers once for the `rest` bytes of input still to come (escaping adds
    /// a few percent), from buffers earlier batches left: they then never move while
    /// they fill, and their pages are already mapped.
    fn size_for(&mut self, rest: usize, keyed: bool) {
        if self.data.capacity() == 0 {
            let rest = rest.min(BATCH_TEXT);
            self.text = spare::BYTES.take(rest + rest / 8);
            if keyed {
                self.keys = spare::BYTES.take(rest);
            }
            self.data = spare::DATA.take(rest / 256 + 1);
        }
    }

    /// The item's data; blocks are appended to `self.blocks` (ranges set by `add`).
    fn prepare(&mut self, r: &reader::RawItem<'_>) -> Result<Data, String> {
        // The ids first: building the neutral messages reads them for every item and
        // nothing else of most items, so they share a cache line or two.
        let source_node_id = self.push(r.source_node_id)?;
        let caller = r.caller.map(|s| self.push(s)).transpose()?;
        let tool_use_id = r.tool_use_id.map(|s| self.push(s)).transpose()?;
        let attached_from = r.attached_from.map(|s| self.push(s)).transpose()?;
        let name = self.push(r.name)?;
        let rendered = self.push(r.rendered)?;
        let tool_input = self.push(r.tool_input)?;
        let obj = object_args(r.tool_input);
        let obj = obj.as_deref().unwrap_or_else(|| r.tool_input.trim());
        let args_json = self.push_json(obj)?;
        let args = self.push(obj)?;
        let mut texts: Vec<&str> = Vec::new();
        reader::blocks(r.blocks, |b| {
            let spans = match b.kind {
                "text" => {
                    texts.push(b.text);
                    BlockSpans::Text(self.push(b.text)?)
                }
                // An image without a source has nothing to show.
                "image" => match b.source {
                    Some(s) => BlockSpans::Image([
                        self.push(s.kind)?,
                        self.push(s.media_type)?,
                        self.push(s.data)?,
                        self.push(s.url)?,
                    ]),
                    None => return Ok(()),
                },
                "thinking" => BlockSpans::Thinking([
                    self.push(b.thinking)?,
                    self.push(b.signature)?,
                    self.push(b.vendor)?,
                ]),
                "redacted_thinking" => BlockSpans::Redacted(self.push(b.data)?),
                "compaction" => {
                    // A no-op (failed) compaction has nothing to send to anyone, and one
                    // whose tool changes are not a JSON array cannot be sent as it came:
                    // without the block its vendor reads the history it stands for.
                    let changes = b.tool_changes.map(str::trim).unwrap_or_default();
                    if !compaction_is_effective(b.vendor, b.content, b.encrypted_content)
                        || !(changes.is_empty() || json_array(changes))
                    {
                        return Ok(());
                    }
                    BlockSpans::Compaction(Box::new([
                        self.push(b.content.unwrap_or_default())?,
                        self.push(b.encrypted_content.unwrap_or_default())?,
                        self.push(b.signature)?,
                        self.push_json(changes)?,
                        self.push(b.id)?,
                        self.push(b.vendor)?,
                    ]))
                }
                // Tool use/result and unknown blocks are never rendered from `blocks`.
                _ => return Ok(()),
            };
            self.blocks.push(spans);
            Ok(())
        })?;
        Ok(Data {
            role: r.role,
            state: r.state,
            tokens: r.tokens,
            is_error: r.is_error,
            use_blocks: blocks_match(&texts, r.rendered),
            unchanged: r.state == State::Full
                && r.attached_from.is_none()
                && matches!(r.reason, None | Some("new" | "anchor")),
            content_hash: AtomicU64::new(0),
            memo: Default::default(),
            source_node_id,
            attached_from,
            rendered,
            name,
            caller,
            tool_use_id,
            tool_input,
            args,
            args_json,
            blocks: (0, 0),
            text: (0, 0),
            key: (0, 0),
        })
    }

    fn finish(self) -> Arc<Batch> {
        Arc::new(Batch {
            text: self.text,
            keys: self.keys,
            data: self.data,
            blocks: self.blocks,
        })
    }
}

/// The tool arguments as an object text (see `Item::args`); `None`: use the text as is.
fn object_args(input: &str) -> Option<String> {
    let t = input.trim();
    if t.is_empty() {
        return Some("{}".into());
    }
    // Arguments nested deeper than any stored value may be are not spliced into a
    // body as JSON: they are sent as text, like arguments a rule cut.
    let is_object = t.starts_with('{')
        && !nests_deeper(t.as_bytes(), MAX_DEPTH)
        && serde_json::from_str::<&serde_json::value::RawValue>(t).is_ok();
    if is_object {
        return None;
    }
    let mut out = Vec::with_capacity(input.len() + 24);
    out.extend_from_slice(b"{\"truncated_args\":\"");
    escape_into(&mut out, input);
    out.extend_from_slice(b"\"}");
    // SAFETY: literal ASCII around an escaped `&str` (see Builder::finish).
    Some(unsafe { String::from_utf8_unchecked(out) })
}

/// Whether `t` is one JSON array no deeper than a stored value may be (so it can be
/// spliced into a body as it is).
fn json_array(t: &str) -> bool {
    t.starts_with('[')
        && !nests_deeper(t.as_bytes(), MAX_DEPTH)
        && serde_json::from_str::<&serde_json::value::RawValue>(t).is_ok()
}

/// Whether the text blocks of an item joined reproduce `rendered`.
fn blocks_match(texts: &[&str], rendered: &str) -> bool {
    if texts.is_empty() {
        return false;
    }
    ["\n", "", "\n\n"]
        .iter()
        .any(|sep| joined_eq(texts, sep, rendered))
}

fn joined_eq(parts: &[&str], sep: &str, target: &str) -> bool {
    let mut rest = target;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            match rest.strip_prefix(sep) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        match rest.strip_prefix(p) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.is_empty()
}

/// The items of a commit, in order.
pub type Items = Vec<Shared>;

/// Where a decoded item came from while a decode runs.
enum Slot {
    Cached(Shared),
    New { batch: usize, idx: u32, hash: u64 },
}

/// Decode a commit as `msgspec.msgpack.encode(commit)` writes it (fields other than
/// `items` are checked for shape and skipped).  Items seen before in any commit's bytes
/// come from the content cache; new ones are added to it.
pub fn decode_commit(bytes: &[u8]) -> Result<Items, String> {
    let mut slots: Vec<Slot> = Vec::new();
    let mut batches: Vec<Arc<Batch>> = Vec::new();
    let mut b = Builder::default();
    reader::commit_items(bytes, |at, key| {
        let k = slots.len();
        let hash = cache::hash(key);
        if let Some(s) = cache::lookup(hash, key) {
            slots.push(Slot::Cached(s));
            return Ok(());
        }
        if b.text.len() >= BATCH_TEXT {
            batches.push(std::mem::take(&mut b).finish());
        }
        b.size_for(bytes.len().saturating_sub(at), true);
        let raw = reader::whole_item(&mut reader::Reader::new(key, at));
        let idx = raw
            .and_then(|raw| b.add(&raw, Some(key)))
            .map_err(|e| format!("items[{k}]: {e}"))?;
        slots.push(Slot::New {
            batch: batches.len(),
            idx,
            hash,
        });
        Ok(())
    })?;
    batches.push(b.finish());
    let mut fresh: Vec<(u64, Shared)> = Vec::new();
    let items = slots
        .into_iter()
        .map(|s| match s {
            Slot::Cached(s) => s,
            Slot::New { batch, idx, hash } => {
                let s = Shared::new(batches[batch].clone(), idx);
                fresh.push((hash, s.clone()));
                s
            }
        })
        .collect();
    cache::insert(fresh);
    Ok(items)
}

/// Decode a bare item list as `msgspec.msgpack.encode(commit.items)` writes it, without
/// the content cache (the caller keeps the items by identity, see the Python bindings);
/// `name_of(k)` is how an error names the k-th item (`items[k]` in a commit).
pub fn decode_items(bytes: &[u8], name_of: impl Fn(usize) -> String) -> Result<Items, String> {
    let mut made: Vec<(usize, u32)> = Vec::new();
    let mut batches: Vec<Arc<Batch>> = Vec::new();
    let mut b = Builder::default();
    b.size_for(bytes.len(), false);
    let r = reader::array_items(bytes, |raw| {
        if b.text.len() >= BATCH_TEXT {
            batches.push(std::mem::take(&mut b).finish());
            b.size_for(BATCH_TEXT, false);
        }
        let idx = b.add(&raw, None)?;
        made.push((batches.len(), idx));
        Ok(())
    });
    r.map_err(|e| format!("{}: {e}", name_of(made.len())))?;
    batches.push(b.finish());
    Ok(made
        .into_iter()
        .map(|(batch, idx)| Shared::new(batches[batch].clone(), idx))
        .collect())
}

/// Buffers of dropped batches, kept for the next decode: a fresh multi-megabyte buffer
/// costs a page fault per 4 KiB on first touch, which was most of a cold decode.
mod spare {
    use std::sync::Mutex;

    /// A few buffers of one kind, at most `KEEP_BYTES` together.
    pub struct Spare<T> {
        kept: Mutex<Vec<Vec<T>>>,
    }

    const KEEP: usize = 4;
    const KEEP_BYTES: usize = 64 << 20;
    /// Smaller buffers are cheap to make: not kept.
    const MIN_BYTES: usize = 64 << 10;

    pub static BYTES: Spare<u8> = Spare::new();
    pub static DATA: Spare<super::Data> = Spare::new();

    fn bytes<T>(v: &Vec<T>) -> usize {
        v.capacity() * std::mem::size_of::<T>().max(1)
    }

    impl<T> Spare<T> {
        const fn new() -> Self {
            Spare {
                kept: Mutex::new(Vec::new()),
            }
        }

        /// An empty buffer with room for at least `n` elements.
        pub fn take(&self, n: usize) -> Vec<T> {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            let best = (0..kept.len())
                .filter(|&i| kept[i].capacity() >= n)
                .min_by_key(|&i| kept[i].capacity());
            let mut v = match best {
                Some(i) => kept.swap_remove(i),
                None => Vec::new(),
            };
            drop(kept);
            v.reserve(n);
            v
        }

        /// Keep `v`'s memory for a later `take` (or let it go when enough is kept).
        pub fn give(&self, mut v: Vec<T>) {
            if bytes(&v) < MIN_BYTES {
                return;
            }
            v.clear();
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            let held: usize = kept.iter().map(bytes).sum();
            if kept.len() < KEEP && held + bytes(&v) <= KEEP_BYTES {
                kept.push(v);
            }
        }
    }
}
