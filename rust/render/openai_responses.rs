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
use super::neutral::{write_joined, NBlock, NRole, Neutral};
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
pub fn head(w: &mut Json, h: &Head<'_>, sys: &[Sys<'_>], _st: &mut State) {
    w.raw("{\"model\":");
    w.str(h.model);
    if !sys.is_empty() {
        w.raw(",\"instructions\":");
        write_joined(w, sys.iter().map(|s| &s.text), TEXT_JOIN);
    }
    w.raw(",\"input\":[");
}

/// One neutral message as input items: a user message's results as
/// `function_call_output`s, then its content as a message; an assistant message's
/// compaction item, its text as a message, then its `function_call`s.
pub fn unit(w: &mut Json, role: NRole, blocks: &[NBlock<'_>], st: &mut State) {
    match role {
        NRole::User => {
            let mut parts = 0usize;
            for b in blocks {
                match b {
                    NBlock::ToolResult(call) => {
                        w.sep(&mut st.first);
                        w.raw("{\"type\":\"function_call_output\",\"call_id\":");
                        call.write_id(w);
                        w.field_pre("output", call.content().esc);
                        w.raw("}");
                        st.count += 1;
                    }
                    NBlock::Text(_) | NBlock::Image(_) => parts += 1,
                    _ => {}
                }
            }
            if parts == 0 {
                return;
            }
            w.sep(&mut st.first);
            w.raw("{\"type\":\"message\",\"role\":\"user\",\"content\":[");
            content_parts(w, blocks, RESPONSES_PARTS);
            w.raw("]}");
            st.count += 1;
        }
        NRole::Assistant => {
            // A compaction item opens the view's first message (`from_last`); it is
            // sent as Codex sends it back: its encrypted state, without the item id.
            for b in blocks {
                if let NBlock::Compaction(c) = b {
                    w.sep(&mut st.first);
                    w.raw("{\"type\":\"compaction\",\"encrypted_content\":");
                    w.pre_str(c.compaction().encrypted_content.esc);
                    w.raw("}");
                    st.count += 1;
                }
            }
            let text = texts(blocks);
            if text.clone().next().is_some() {
                w.sep(&mut st.first);
                w.raw("{\"type\":\"message\",\"role\":\"assistant\",\"content\":");
                write_joined(w, text, TEXT_JOIN);
                w.raw("}");
                st.count += 1;
            }
            for b in blocks {
                if let NBlock::ToolUse(call) = b {
                    w.sep(&mut st.first);
                    w.raw("{\"type\":\"function_call\",\"call_id\":");
                    call.write_id(w);
                    w.field_pre("name", call.name().esc);
                    w.field_pre("arguments", call.item.args().esc);
                    w.raw("}");
                    st.count += 1;
                }
            }
        }
    }
}

/// The end of the input list, the tools, the output limit, the extra fields.
pub fn tail(w: &mut Json, opts: &Options<'_>) {
    w.raw("]");
    // Responses makes function tools strict unless told otherwise, and strict mode
    // refuses ordinary JSON schemas (optional fields, open objects).
    finish(
        w,
        opts,
        "{\"type\":\"function\",\"name\":",
        ",\"strict\":false}",
        "max_output_tokens",
    );
}
