//! What the renderer reads: a commit as msgspec encodes it to MessagePack, and the
//! render options as JSON.
//!
//! The commit crosses as MessagePack because its strings need no unescaping: every text
//! borrows from the input bytes, so decoding a 10k-item commit copies no content (JSON
//! would copy every string holding a newline or a quote, which is most of them).  The
//! options are small and hold raw JSON (schemas, extra fields) spliced into the body.  Unknown fields are ignored on purpose: the
//! commit carries bookkeeping (reason, locked, …) that rendering does not need.
//! Blocks are decoded as one flat struct rather than a tagged enum because serde
//! buffers internally tagged enums, which would copy every string.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// Role of a commit item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Role {
    #[default]
    User,
    Assistant,
    Tool,
    System,
}

/// Compression state of a commit item (SPEC §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum State {
    #[default]
    Full,
    Aged,
    Cleared,
    Summarized,
    Summary,
}

/// The part of a `ContextCommit` the renderer uses.
#[derive(Debug, Default)]
pub struct Commit<'a> {
    pub items: Vec<Item<'a>>,
}

/// One `ContextItem` (see /work/notes/ITEMS.md for what each role carries).
#[derive(Debug, Default)]
pub struct Item<'a> {
    pub source_node_id: &'a str,
    pub role: Role,
    pub state: State,
    pub rendered: &'a str,
    pub tokens: u64,
    pub name: &'a str,
    pub caller: Option<&'a str>,
    pub tool_use_id: Option<&'a str>,
    pub tool_input: &'a str,
    pub is_error: bool,
    pub blocks: Vec<Block<'a>>,
}

/// A content block of an item.  `cache_control` is deliberately not read: breakpoints
/// come only from the layering policy, never from (possibly imported) content.
#[derive(Debug, Default)]
pub struct Block<'a> {
    pub kind: &'a str,
    pub text: &'a str,
    pub source: Option<ImageSource<'a>>,
    pub thinking: &'a str,
    pub signature: &'a str,
    /// Who minted `signature` ("" = Anthropic, "gemini" = a thought signature).
    pub vendor: &'a str,
    pub data: &'a str,
}

/// Where an image's bytes are.
#[derive(Debug, Default)]
pub struct ImageSource<'a> {
    pub kind: &'a str,
    pub media_type: &'a str,
    pub data: &'a str,
    pub url: &'a str,
}

impl ImageSource<'_> {
    /// True when the image is given by URL rather than inline bytes.
    pub fn is_url(&self) -> bool {
        self.kind == "url" || (self.data.is_empty() && !self.url.is_empty())
    }

    /// A `data:` URL for inline images, the URL itself otherwise.
    pub fn as_url(&self) -> String {
        if self.is_url() {
            self.url.to_string()
        } else {
            format!("data:{};base64,{}", self.media_type, self.data)
        }
    }
}

/// One system-prompt block with its stability layer (0 = session constant, 1 = situation).
#[derive(Deserialize, Debug)]
pub struct SystemBlock<'a> {
    #[serde(borrow)]
    pub text: Cow<'a, str>,
    #[serde(default)]
    pub layer: u8,
}

/// A tool declaration; `input_schema` is passed through as raw JSON.
#[derive(Deserialize, Debug)]
pub struct Tool<'a> {
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(borrow, default)]
    pub description: Cow<'a, str>,
    #[serde(borrow, default)]
    pub input_schema: Option<&'a RawValue>,
}

impl Tool<'_> {
    /// The schema as raw JSON; a tool declared without one takes no arguments, which
    /// every vendor that requires a schema spells as an empty object schema.
    pub fn schema_or_empty(&self) -> &str {
        match self.input_schema {
            Some(s) => s.get(),
            None => "{\"type\":\"object\",\"properties\":{}}",
        }
    }
}

/// Everything besides the commit that shapes a request body.
#[derive(Deserialize, Debug, Default)]
pub struct Options<'a> {
    #[serde(borrow, default)]
    pub model: Cow<'a, str>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(borrow, default)]
    pub system: Vec<SystemBlock<'a>>,
    #[serde(borrow, default)]
    pub tools: Vec<Tool<'a>>,
    /// Extra top-level body fields (temperature, tool_choice, thinking, …), an object.
    #[serde(borrow, default)]
    pub extra: Option<&'a RawValue>,
    /// Place cache breakpoints (providers with explicit cache control only).
    #[serde(default = "yes")]
    pub cache: bool,
    #[serde(default)]
    pub cache_ttl: Option<String>,
}

fn yes() -> bool {
    true
}

/// Decode a MessagePack-encoded commit.
pub fn parse_commit(bytes: &[u8]) -> Result<Commit<'_>, String> {
    super::msgpack::commit(bytes)
}

/// Decode render options.
pub fn parse_options(bytes: &[u8]) -> Result<Options<'_>, String> {
    if bytes.is_empty() {
        return Ok(Options {
            cache: true,
            ..Options::default()
        });
    }
    serde_json::from_slice(bytes).map_err(|e| format!("render options JSON: {e}"))
}
