//! OpenAI Chat Completions (`POST /v1/chat/completions`).
//!
//! Rules enforced: system text is one leading `system` message; an assistant turn's
//! calls are `tool_calls` with `function.arguments` as a JSON *string*, each answered by
//! a role `tool` message with its `tool_call_id` before any other message; reasoning
//! blocks are not sent (Chat has no field for them); images only in user messages.

use super::input::Options;
use super::neutral::{write_joined, Call, NBlock, NRole, Neutral, Txt};
use super::{view, Head, Plan, State, Sys, Wire};
use crate::commit::ImageSource;
use crate::json::Json;

/// Join text parts the way every text-only wire field here does (escaped: two newlines).
pub const TEXT_JOIN: &str = "\\n\\n";

/// What both OpenAI APIs can send back: no reasoning (neither takes it without the
/// vendor's own ids), images only from the user, no compaction (Responses adds its own).
pub fn keep(role: NRole, b: &NBlock<'_>) -> bool {
    match b {
        NBlock::Thinking(_) | NBlock::Redacted(_) | NBlock::Compaction(_) => false,
        NBlock::Image(_) => role == NRole::User,
        _ => true,
    }
}

/// The text blocks of a message, in order.
pub fn texts<'b, 'c>(blocks: &'b [NBlock<'c>]) -> impl Iterator<Item = &'b Txt<'c>> + Clone {
    blocks.iter().filter_map(|b| match b {
        NBlock::Text(t) => Some(t),
        _ => None,
    })
}

/// Write an image as the URL both OpenAI APIs take: its own, or a `data:` URL of its
/// inline bytes (as a JSON string).
pub fn image_url(w: &mut Json, src: &ImageSource<'_>) {
    if src.is_url() {
        w.pre_str(src.url.esc);
    } else {
        w.raw("\"data:");
        w.pre(src.media_type.esc);
        w.raw(";base64,");
        w.pre(src.data.esc);
        w.raw("\"");
    }
}

/// Finish the body after the conversation: `,"tools":[…]` (nothing without tools), each
/// tool `tool_open` + name, its description if any, `parameters`, then `tool_close`,
/// which ends the tool object; `max_tokens` under the API's name `max_key`; the caller's
/// extra fields; the closing brace.
pub fn finish(
    w: &mut Json,
    opts: &Options<'_>,
    tool_open: &str,
    tool_close: &str,
    max_key: &str,
    wire: super::Wire,
) {
    if !super::native::write_tools(w, opts, wire) && !opts.tools.is_empty() {
        w.raw(",\"tools\":[");
        let mut first = true;
        for t in &opts.tools {
            w.sep(&mut first);
            w.raw(tool_open);
            w.str(&t.name);
            if !t.description.is_empty() {
                w.field_str("description", &t.description);
            }
            w.raw(",\"parameters\":");
            w.raw(t.schema_or_empty());
            w.raw(tool_close);
        }
        w.raw("]");
    }
    if let Some(max) = opts.max_tokens {
        w.raw(",");
        w.key(max_key);
        w.uint(max);
    }
    if let Some(extra) = opts.extra {
        w.splice_object(extra);
    }
    w.raw("}");
}

/// How one API spells user content parts: the opening of a text part (the text
/// follows), and the opening and closing around an image's URL.
pub struct PartShapes {
    pub text: &'static str,
    pub image: &'static str,
    pub image_end: &'static str,
}

const CHAT_PARTS: PartShapes = PartShapes {
    text: "{\"type\":\"text\",\"text\":",
    image: "{\"type\":\"image_url\",\"image_url\":{\"url\":",
    image_end: "}}",
};

/// Write the text and image blocks of a user message as content parts, comma-separated
/// (the brackets are the caller's); other blocks are skipped.  Images go as URLs.
pub fn content_parts(w: &mut Json, blocks: &[NBlock<'_>], shape: PartShapes) {
    let mut first = true;
    for b in blocks {
        match b {
            NBlock::Text(t) => {
                w.sep(&mut first);
                w.raw(shape.text);
                t.write(w);
                w.raw("}");
            }
            NBlock::Image(img) => {
                w.sep(&mut first);
                w.raw(shape.image);
                image_url(w, &img.image());
                w.raw(shape.image_end);
            }
            _ => {}
        }
    }
}

/// Lay out the body: the view; the head is the model and the system text.
pub fn plan<'a>(opts: &'a Options<'a>, sys: Vec<Sys<'a>>, n: &Neutral<'a>) -> Plan<'a> {
    let head = Head {
        model: &opts.model,
        sys: true,
        ..Head::default()
    };
    Plan::empty(Wire::OpenAiChat, head, sys, view(n, keep))
}

/// The model and the system text as the leading `system` message.
pub fn head(w: &mut Json, h: &Head<'_>, sys: &[Sys<'_>], st: &mut State) {
    w.raw("{\"model\":");
    w.str(h.model);
    w.raw(",\"messages\":[");
    if let Some(n) = h.native_sys.as_ref().filter(|n| !n.elements.is_empty()) {
        // The recorded system messages, where they stood: first.
        for e in &n.elements {
            w.sep(&mut st.first);
            w.raw(e);
            st.count += 1;
        }
    } else if !sys.is_empty() {
        w.sep(&mut st.first);
        system_message(w, sys);
        st.count += 1;
    }
}

/// The system text as one `system` message (the texts joined).
pub fn system_message(w: &mut Json, sys: &[Sys<'_>]) {
    w.raw("{\"role\":\"system\",\"content\":");
    write_joined(w, sys.iter().map(|s| &s.text), TEXT_JOIN);
    w.raw("}");
}

/// A tool result as a `tool` message.
pub fn tool_message(w: &mut Json, call: &Call<'_>) {
    w.raw("{\"role\":\"tool\",\"tool_call_id\":");
    call.write_id(w);
    w.field_pre("content", call.content().esc);
    w.raw("}");
}

/// What a user message sends besides its tool results: its first such block, and
/// whether there are more (`None`: nothing, no message).
pub fn user_content<'b, 'c>(blocks: &'b [NBlock<'c>]) -> Option<(&'b NBlock<'c>, bool)> {
    // Counted, not collected: this runs once per message.
    let mut rest = blocks
        .iter()
        .filter(|b| !matches!(b, NBlock::ToolResult(_)));
    rest.next().map(|one| (one, rest.next().is_some()))
}

/// A user message of a unit's blocks other than tool results (`user_content` says
/// there are some): one text as a string, else content parts.
pub fn user_message(w: &mut Json, blocks: &[NBlock<'_>], one: &NBlock<'_>, more: bool) {
    w.raw("{\"role\":\"user\",\"content\":");
    if let (NBlock::Text(t), false) = (one, more) {
        t.write(w);
    } else {
        w.raw("[");
        content_parts(w, blocks, CHAT_PARTS);
        w.raw("]");
    }
    w.raw("}");
}

/// An assistant message: its texts joined (or `null`) and its `tool_calls`.
pub fn assistant_message(w: &mut Json, blocks: &[NBlock<'_>]) {
    w.raw("{\"role\":\"assistant\",\"content\":");
    let text = texts(blocks);
    if text.clone().next().is_none() {
        w.raw("null");
    } else {
        write_joined(w, text, TEXT_JOIN);
    }
    let mut fc = true;
    for b in blocks {
        if let NBlock::ToolUse(call) = b {
            if fc {
                w.raw(",\"tool_calls\":[");
            }
            w.sep(&mut fc);
            w.raw("{\"id\":");
            call.write_id(w);
            w.raw(",\"type\":\"function\",\"function\":{\"name\":");
            w.pre_str(call.name().esc);
            w.raw(",\"arguments\":");
            w.pre_str(call.item.args().esc);
            w.raw("}}");
        }
    }
    if !fc {
        w.raw("]");
    }
    w.raw("}");
}

/// One neutral message: a user message's tool results as `tool` messages, then its
/// other content; an assistant message's text and its `tool_calls`.
pub fn unit(w: &mut Json, role: NRole, blocks: &[NBlock<'_>], st: &mut State) {
    match role {
        NRole::User => {
            for b in blocks {
                if let NBlock::ToolResult(call) = b {
                    w.sep(&mut st.first);
                    tool_message(w, call);
                    st.count += 1;
                }
            }
            if let Some((one, more)) = user_content(blocks) {
                w.sep(&mut st.first);
                user_message(w, blocks, one, more);
                st.count += 1;
            }
        }
        NRole::Assistant => {
            w.sep(&mut st.first);
            assistant_message(w, blocks);
            st.count += 1;
        }
    }
}

/// The end of the message list, the tools, the output limit, the extra fields.
pub fn tail(w: &mut Json, opts: &Options<'_>) {
    w.raw("]");
    finish(
        w,
        opts,
        "{\"type\":\"function\",\"function\":{\"name\":",
        "}}",
        "max_completion_tokens",
        Wire::OpenAiChat,
    );
}
