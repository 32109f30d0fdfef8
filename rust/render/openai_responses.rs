//! OpenAI Responses (`POST /v1/responses`).
//!
//! Rules enforced: system text goes to `instructions`; each call is a `function_call`
//! item with `call_id`, answered by a `function_call_output` with the same `call_id`
//! before the next message; assistant text is sent back as an assistant message with
//! string content (the form the API accepts without output item ids); reasoning items
//! need the vendor's encrypted ids, which commits do not carry, so they are not sent.
//! OpenAI's own compaction items (vendor "openai") are sent back, encrypted state
//! unchanged, and the request starts at the latest one: the API would otherwise read
//! and bill the history before it again.

use super::input::Options;
use super::neutral::{write_joined, BlockRef, Call, NBlock, NRole, Neutral};
use super::openai_chat::{content_parts, finish, keep, texts, PartShapes, TEXT_JOIN};
use super::{view, Head, Plan, State, Sys, Wire};
use crate::json::Json;

const RESPONSES_PARTS: PartShapes = PartShapes {
    text: "{\"type\":\"input_text\",\"text\":",
    image: "{\"type\":\"input_image\",\"detail\":\"auto\",\"image_url\":",
    image_end: "}",
};

/// Lay out the body: the view from the latest OpenAI compaction item; the head is the
/// model and the instructions.
pub fn plan<'a>(opts: &'a Options<'a>, sys: Vec<Sys<'a>>, n: &Neutral<'a>) -> Plan<'a> {
    let mut v = view(n, |role, b| match b {
        NBlock::Compaction(c) => role == NRole::Assistant && c.compaction().is_from("openai"),
        _ => keep(role, b),
    });
    // The API reads (and bills) items before a compaction item as well: the request
    // starts at the latest one.
    v.from_last(|b| matches!(b, NBlock::Compaction(_)));
    let head = Head {
        model: &opts.model,
        sys: true,
        ..Head::default()
    };
    Plan::empty(Wire::OpenAiResponses, head, sys, v)
}

/// The model, the instructions and the opening of the input list.
pub fn head(w: &mut Json, h: &Head<'_>, sys: &[Sys<'_>], st: &mut State) {
    w.raw("{\"model\":");
    w.str(h.model);
    match &h.native_sys {
        Some(n) => {
            // As recorded: the instructions field, system items leading the input.
            super::native::write_system_field(w, h);
            if let Some(text) = h.input_text {
                w.raw(",\"input\":");
                w.raw(text);
                return;
            }
            w.raw(",\"input\":[");
            for e in &n.elements {
                w.sep(&mut st.first);
                w.raw(e);
                st.count += 1;
            }
        }
        None => {
            if !sys.is_empty() {
                w.raw(",\"instructions\":");
                write_joined(w, sys.iter().map(|s| &s.text), TEXT_JOIN);
            }
            if let Some(text) = h.input_text {
                w.raw(",\"input\":");
                w.raw(text);
                return;
            }
            w.raw(",\"input\":[");
        }
    }
}

/// A tool result as a `function_call_output` item.
pub fn function_call_output(w: &mut Json, call: &Call<'_>) {
    w.raw("{\"type\":\"function_call_output\",\"call_id\":");
    call.write_id(w);
    w.field_pre("output", call.content().esc);
    w.raw("}");
}

/// A user message item of a unit's text and image blocks (other blocks skipped).
pub fn user_message(w: &mut Json, blocks: &[NBlock<'_>]) {
    w.raw("{\"type\":\"message\",\"role\":\"user\",\"content\":[");
    content_parts(w, blocks, RESPONSES_PARTS);
    w.raw("]}");
}

/// An OpenAI compaction item, as Codex sends it back: its encrypted state, without the
/// item id.
pub fn compaction_item(w: &mut Json, c: &BlockRef<'_>) {
    w.raw("{\"type\":\"compaction\",\"encrypted_content\":");
    w.pre_str(c.compaction().encrypted_content.esc);
    w.raw("}");
}

/// An assistant message item of a unit's texts, joined.
pub fn assistant_message(w: &mut Json, blocks: &[NBlock<'_>]) {
    w.raw("{\"type\":\"message\",\"role\":\"assistant\",\"content\":");
    write_joined(w, texts(blocks), TEXT_JOIN);
    w.raw("}");
}

/// A call as a `function_call` item.
pub fn function_call(w: &mut Json, call: &Call<'_>) {
    w.raw("{\"type\":\"function_call\",\"call_id\":");
    call.write_id(w);
    w.field_pre("name", call.name().esc);
    w.field_pre("arguments", call.item.args().esc);
    w.raw("}");
}

/// How many text and image blocks a unit has (what its message item holds).
pub fn parts(blocks: &[NBlock<'_>]) -> usize {
    blocks
        .iter()
        .filter(|b| matches!(b, NBlock::Text(_) | NBlock::Image(_)))
        .count()
}

/// One neutral message as input items: a user message's results as
/// `function_call_output`s, then its content as a message; an assistant message's
/// compaction item, its text as a message, then its `function_call`s.
pub fn unit(w: &mut Json, role: NRole, blocks: &[NBlock<'_>], st: &mut State) {
    let mut item = |w: &mut Json, write: &dyn Fn(&mut Json)| {
        w.sep(&mut st.first);
        write(w);
        st.count += 1;
    };
    match role {
        NRole::User => {
            for b in blocks {
                if let NBlock::ToolResult(call) = b {
                    item(w, &|w| function_call_output(w, call));
                }
            }
            if parts(blocks) > 0 {
                item(w, &|w| user_message(w, blocks));
            }
        }
        NRole::Assistant => {
            // A compaction item opens the view's first message (`from_last`).
            for b in blocks {
                if let NBlock::Compaction(c) = b {
                    item(w, &|w| compaction_item(w, c));
                }
            }
            if texts(blocks).next().is_some() {
                item(w, &|w| assistant_message(w, blocks));
            }
            for b in blocks {
                if let NBlock::ToolUse(call) = b {
                    item(w, &|w| function_call(w, call));
                }
            }
        }
    }
}

/// The end of the input list (none after an input written as its recorded string),
/// the tools, the output limit, the extra fields.
pub fn tail(w: &mut Json, opts: &Options<'_>, h: &Head<'_>) {
    if h.input_text.is_none() {
        w.raw("]");
    }
    // Responses makes function tools strict unless told otherwise, and strict mode
    // refuses ordinary JSON schemas (optional fields, open objects).
    finish(
        w,
        opts,
        "{\"type\":\"function\",\"name\":",
        ",\"strict\":false}",
        "max_output_tokens",
        Wire::OpenAiResponses,
    );
}
