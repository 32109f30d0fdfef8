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
