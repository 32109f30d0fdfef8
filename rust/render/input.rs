//! What the renderer reads besides the commit (`crate::commit`): the render options,
//! as JSON.
//!
//! The options are small and hold raw JSON (schemas, extra fields) spliced into the
//! body.  Unknown fields are ignored on purpose.  Their nesting is checked before
//! serde_json reads them: serde_json stops recursing at 128 levels, but a `RawValue`
//! (a schema, the extra fields) is skipped without that check and then written into
//! the body as it is.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::commit::MAX_DEPTH;
use crate::json::nests_deeper;

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
    /// The recorded request this one replays (`Native`), when it was recorded on a wire.
    #[serde(borrow, default)]
    pub native: Option<Native<'a>>,
    /// `auto_cache`, worked out on first use.
    #[serde(skip)]
    auto_cache: OnceLock<bool>,
}

impl Options<'_> {
    /// Whether `extra` has a top-level `cache_control` (automatic caching, as a recorded
    /// Anthropic request may carry it).  Read once per parsed options, not once per
    /// request: a session's requests share theirs.
    pub fn auto_cache(&self) -> bool {
        *self.auto_cache.get_or_init(|| {
            self.extra.is_some_and(|e| {
                serde_json::from_str::<HashMap<String, &RawValue>>(e.get())
                    .is_ok_and(|m| m.contains_key("cache_control"))
            })
        })
    }
}

/// The recorded form of a request a session was imported from: what the renderer
/// writes back verbatim wherever the rules left the recorded content as it was
/// (`crate::render::native`).  Python decides what is kept
/// (`ctxrules.render.native`); this side only checks and writes.
#[derive(Deserialize, Debug, Default)]
pub struct Native<'a> {
    /// The provider name of the wire the request was recorded on: the table is used
    /// only when rendering for that wire.
    #[serde(borrow, default)]
    pub wire: Cow<'a, str>,
    /// The elements of the recorded conversation list (messages, contents or input
    /// items), each as recorded.
    #[serde(borrow, default)]
    pub elements: Vec<&'a RawValue>,
    /// How many members (see `Member`) each element has: an element is written as
    /// recorded only when all of them are in the unit, unchanged.
    #[serde(default)]
    pub members: Vec<u32>,
    /// The recorded system field (Anthropic `system`, Gemini `systemInstruction`,
    /// Responses `instructions`), its key as recorded.
    #[serde(borrow, default)]
    pub system: Option<NativeField<'a>>,
    /// How many system nodes the recorded system field was read into.
    #[serde(default)]
    pub system_nodes: u32,
    /// The recorded tool declarations, written instead of the canonical ones (Python
    /// passes them only when the request's tools are the recorded ones).
    #[serde(borrow, default)]
    pub tools: Option<&'a RawValue>,
    /// Anthropic: the recorded tools end with a cache breakpoint.
    #[serde(default)]
    pub tools_bp: bool,
    /// Responses: the recorded `input` was this string (its one element is the user
    /// message the importer read it as).
    #[serde(borrow, default)]
    pub input_text: Option<&'a RawValue>,
    /// Per node id, where the node's content is in the recorded request.
    #[serde(borrow, default)]
    pub nodes: HashMap<Cow<'a, str>, Member<'a>>,
}

/// A recorded field written as it was: its key and its value.
#[derive(Deserialize, Debug)]
pub struct NativeField<'a> {
    #[serde(borrow)]
    pub key: Cow<'a, str>,
    #[serde(borrow)]
    pub value: &'a RawValue,
}

/// Where one node's content is in the recorded request: `el` the elements (a range)
/// its item's own blocks (or, for a tool node, its result) came from, `call` those
/// its tool call came from (a tool node: its caller's message), `sys` whether it is
/// (part of) the recorded system field; `bp` / `call_bp` whether those recorded
/// blocks carried a cache breakpoint (Anthropic); `skip` that it was not sent; `args`
/// a tool node's recorded arguments.
#[derive(Deserialize, Debug, Default, Clone)]
pub struct Member<'a> {
    #[serde(default)]
    pub el: Option<(u32, u32)>,
    #[serde(default)]
    pub call: Option<(u32, u32)>,
    #[serde(default)]
    pub sys: bool,
    #[serde(default)]
    pub bp: bool,
    #[serde(default)]
    pub call_bp: bool,
    /// The request did not send it: a Responses request chained on
    /// `previous_response_id` stands for it by that id.
    #[serde(default)]
    pub skip: bool,
    /// Its call was not sent (its caller is `skip`).
    #[serde(default)]
    pub call_skip: bool,
    /// A tool node's arguments as recorded: its call is as recorded while its item's
    /// `tool_input` is this, whatever a rule did to its result.
    #[serde(borrow, default)]
    pub args: Option<Cow<'a, str>>,
}

impl Options<'_> {
    /// The native table, when it was recorded on `wire` (a provider name).
    pub fn native_for(&self, wire: &str) -> Option<&Native<'_>> {
        self.native.as_ref().filter(|n| n.wire == wire)
    }
}

fn yes() -> bool {
    true
}

/// Decode render options.
pub fn parse_options(bytes: &[u8]) -> Result<Options<'_>, String> {
    if bytes.is_empty() {
        return Ok(Options {
            cache: true,
            ..Options::default()
        });
    }
    if nests_deeper(bytes, MAX_DEPTH) {
        return Err(format!(
            "render options JSON: nested deeper than {MAX_DEPTH} levels"
        ));
    }
    let opts: Options<'_> =
        serde_json::from_slice(bytes).map_err(|e| format!("render options JSON: {e}"))?;
    if let Some(extra) = opts.extra {
        if !extra.get().trim_start().starts_with('{') {
            return Err("render options: 'extra' must be a JSON object".into());
        }
    }
    Ok(opts)
}
