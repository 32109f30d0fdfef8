//! Commit items → provider-neutral messages (the one implementation of the item rules
//! in /work/notes/ITEMS.md; every wire format is written from this).
//!
//! Pairing is decided here, once: a tool item becomes a tool_use on its caller's
//! assistant message and a tool_result in the user message right after it, or — when
//! its call id is missing, duplicated, or its caller is absent — plain user text.  So no
//! provider can ever see an orphan result or an unanswered call, whatever the rules did.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use serde_json::value::RawValue;

use super::input::{Block, Commit, ImageSource, Item, Role, State};

/// A fast non-cryptographic hasher (the Fx scheme) for the id sets: the ids are ours,
/// not an attacker's, and SipHash was a visible share of rendering time.  Only
/// membership is asked of these sets, so their order never reaches the output.
#[derive(Default, Clone, Copy)]
struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type IdSet<'c> = HashSet<&'c str, BuildHasherDefault<Fx>>;

/// Text a summary item is shown with (SPEC §5).
pub const SUMMARY_PREFIX: &str = "[Summary] ";

/// Role of a neutral message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NRole {
    User,
    Assistant,
}

/// Tool arguments: a JSON object as is, or text that is not one (e.g. cut by aging).
#[derive(Clone, Copy, Debug)]
pub enum Args<'c> {
    Object(&'c str),
    Text(&'c str),
}

impl Args<'_> {
    /// Classify a tool_input text; empty means no arguments.
    pub fn of(s: &str) -> Args<'_> {
        let t = s.trim();
        if t.is_empty() {
            return Args::Object("{}");
        }
        if t.starts_with('{') && serde_json::from_str::<&RawValue>(t).is_ok() {
            Args::Object(t)
        } else {
            Args::Text(s)
        }
    }

    /// The arguments as one JSON object text; text that is not an object is wrapped so
    /// vendors that require an object still get one, and nothing of it is lost.
    pub fn object_json(&self) -> Cow<'_, str> {
        match *self {
            Args::Object(s) => Cow::Borrowed(s),
            Args::Text(s) => {
                let mut out = String::from("{\"truncated_args\":");
                out.push_str(&serde_json::to_string(s).expect("string"));
                out.push('}');
                Cow::Owned(out)
            }
        }
    }
}

/// A neutral content block, borrowing from the commit.
#[derive(Debug)]
pub enum NBlock<'c> {
    Text(Cow<'c, str>),
    Image(&'c ImageSource<'c>),
    Thinking {
        thinking: &'c str,
        signature: &'c str,
        /// Who minted the signature: only that vendor is sent it.
        vendor: &'c str,
    },
    Redacted(&'c str),
    ToolUse {
        id: Cow<'c, str>,
        name: &'c str,
        args: Args<'c>,
    },
    ToolResult {
        id: Cow<'c, str>,
        name: &'c str,
        content: &'c str,
        is_error: bool,
        /// The tool item's blocks: images a tool returned (sent where the vendor can).
        extra: &'c [Block<'c>],
    },
}

/// The images among a tool item's blocks.
pub fn images<'a>(blocks: &'a [Block<'a>]) -> impl Iterator<Item = &'a ImageSource<'a>> {
    blocks
        .iter()
        .filter(|b| b.kind == "image")
        .filter_map(|b| b.source.as_ref())
}

impl NBlock<'_> {
    /// Blocks that may carry a cache breakpoint on Anthropic.
    pub fn cacheable(&self) -> bool {
        !matches!(self, NBlock::Thinking { .. } | NBlock::Redacted(_))
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
    pub system: Vec<(&'c str, u8)>,
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
    seen_ids: HashMap<&'c str, u32, BuildHasherDefault<Fx>>,
    /// Ids made for repeated call ids (see `wire_id`).
    renamed: HashSet<String, BuildHasherDefault<Fx>>,
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

    fn user(&mut self, item: &'c Item<'c>) {
        self.flush();
        if !item.rendered.is_empty() {
            self.push(NRole::User, NBlock::Text(Cow::Borrowed(item.rendered)));
        }
        for b in &item.blocks {
            if b.kind == "image" {
                if let Some(src) = &b.source {
                    self.push(NRole::User, NBlock::Image(src));
                }
            }
        }
    }

    fn assistant(&mut self, item: &'c Item<'c>) {
        if !self.pending.is_empty() {
            self.flush();
        }
        if !matches!(self.out.messages.last(), Some(m) if m.role == NRole::Assistant) {
            self.open_assistants.clear();
        }
        let mut any = false;
        if item.state == State::Summary {
            let mut s = String::with_capacity(SUMMARY_PREFIX.len() + item.rendered.len());
            s.push_str(SUMMARY_PREFIX);
            s.push_str(item.rendered);
            self.push(NRole::Assistant, NBlock::Text(Cow::Owned(s)));
            any = true;
        } else {
            // Text blocks give the original block order, but only while they still say
            // what `rendered` says (a rule may have rewritten the text).
            let use_blocks = blocks_match(&item.blocks, item.rendered);
            for b in &item.blocks {
                let block = match b.kind {
                    "text" if use_blocks && !b.text.is_empty() => {
                        NBlock::Text(Cow::Borrowed(b.text))
                    }
                    "thinking" => NBlock::Thinking {
                        thinking: b.thinking,
                        signature: b.signature,
                        vendor: b.vendor,
                    },
                    "redacted_thinking" => NBlock::Redacted(b.data),
                    _ => continue,
                };
                self.push(NRole::Assistant, block);
                any = true;
            }
            if !use_blocks && !item.rendered.is_empty() {
                self.push(NRole::Assistant, NBlock::Text(Cow::Borrowed(item.rendered)));
                any = true;
            }
        }
        if any {
            self.empty_open = false;
            self.open_assistants.insert(item.source_node_id);
        } else if matches!(self.out.messages.last(), Some(m) if m.role == NRole::Assistant) {
            self.open_assistants.insert(item.source_node_id);
        } else {
            // An empty assistant turn still owns its tool calls: its first tool_use
            // opens its message.
            self.open_assistants.clear();
            self.open_assistants.insert(item.source_node_id);
            self.empty_open = true;
        }
    }

    /// The id a call goes out with: its own, or — when the commit already used it (e.g.
    /// transcripts whose tool reuses ids across turns) — `{id}_{n}`, so every vendor sees
    /// unique ids and the call and its result still carry the same one.
    fn wire_id(&mut self, id: &'c str) -> Cow<'c, str> {
        if !self.renamed.contains(id) {
            if let std::collections::hash_map::Entry::Vacant(e) = self.seen_ids.entry(id) {
                e.insert(1);
                return Cow::Borrowed(id);
            }
        }
        // The counter per id makes n-fold repeats linear, not quadratic.
        let mut n = *self.seen_ids.get(id).unwrap_or(&1);
        loop {
            n += 1;
            let candidate = format!("{id}_{n}");
            if !self.seen_ids.contains_key(candidate.as_str()) && !self.renamed.contains(&candidate)
            {
                self.seen_ids.insert(id, n);
                self.renamed.insert(candidate.clone());
                return Cow::Owned(candidate);
            }
        }
    }

    fn tool(&mut self, item: &'c Item<'c>) {
        let id = item.tool_use_id.unwrap_or("");
        let caller = item.caller.unwrap_or("");
        let last_is_assistant =
            matches!(self.out.messages.last(), Some(m) if m.role == NRole::Assistant);
        // open_assistants holds only rendered (not summarized) assistant items of the
        // open turn, so membership also proves the caller is present.
        let paired = !id.is_empty()
            && self.open_assistants.contains(caller)
            && (last_is_assistant || self.empty_open);
        if paired {
            let id = self.wire_id(id);
            self.empty_open = false;
            self.push(
                NRole::Assistant,
                NBlock::ToolUse {
                    id: id.clone(),
                    name: item.name,
                    args: Args::of(item.tool_input),
                },
            );
            self.pending.push(NBlock::ToolResult {
                id,
                name: item.name,
                content: item.rendered,
                is_error: item.is_error,
                extra: &item.blocks,
            });
        } else {
            self.out.degraded += 1;
            self.flush();
            self.empty_open = false;
            let mut s = format!("[tool {}", item.name);
            if !item.tool_input.is_empty() {
                s.push_str(" called with ");
                s.push_str(item.tool_input);
            }
            s.push_str(if item.is_error {
                "; error]\n"
            } else {
                "; result]\n"
            });
            s.push_str(item.rendered);
            self.push(NRole::User, NBlock::Text(Cow::Owned(s)));
        }
    }
}

/// Whether the non-empty text blocks of `blocks` joined reproduce `rendered`.
fn blocks_match(blocks: &[Block<'_>], rendered: &str) -> bool {
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| b.kind == "text")
        .map(|b| b.text)
        .collect();
    if texts.is_empty() {
        return false;
    }
    ["\n", "", "\n\n"]
        .iter()
        .any(|sep| joined_eq(&texts, sep, rendered))
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

/// Render a commit's items to neutral messages.  Ids repeated in the commit are made
/// unique (`wire_id`); an id is never dropped.
pub fn build<'c>(commit: &'c Commit<'c>) -> Neutral<'c> {
    let mut b = Builder {
        out: Neutral::default(),
        pending: Vec::new(),
        open_assistants: Owners::default(),
        seen_ids: HashMap::with_capacity_and_hasher(
            commit.items.iter().filter(|i| i.role == Role::Tool).count(),
            BuildHasherDefault::default(),
        ),
        renamed: HashSet::default(),
        empty_open: false,
    };
    for item in &commit.items {
        if item.state == State::Summarized {
            continue;
        }
        let t = &mut b.out.tokens;
        match (item.role, item.state) {
            (_, State::Summary) => t.summary += item.tokens,
            (Role::System, _) => t.system += item.tokens,
            (Role::User, _) => t.user += item.tokens,
            (Role::Assistant, _) => t.assistant += item.tokens,
            (Role::Tool, _) => t.tool += item.tokens,
        }
        match item.role {
            Role::System if item.state != State::Summary => {
                if !item.rendered.is_empty() {
                    let layer = u8::from(!b.out.messages.is_empty() || !b.pending.is_empty());
                    b.out.system.push((item.rendered, layer));
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
