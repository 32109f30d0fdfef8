//! Google Gemini (`POST /v1beta/models/{model}:generateContent`; the model is in the
//! URL, not the body).
//!
//! Rules enforced: roles are `user` / `model`, alternating (neighbours merged); system
//! goes to `systemInstruction`; the first content is the user's; `functionCall` parts are
//! answered by `functionResponse` parts (same `id` and `name`) opening the next content.
//! Gemini's thought signatures arrive as thinking blocks of vendor "gemini" (empty text);
//! the signature is attached to the part that follows it, as Gemini returned it.  Other
//! thinking came from another vendor (Anthropic's, with or without text): its signature
//! means nothing here, so it is dropped, like another vendor's compaction block (Gemini
//! reads the history it stands for).
//! Tool schemas go in `parametersJsonSchema`, which takes full JSON Schema.

use super::input::Options;
use super::neutral::{NBlock, NRole, Neutral};
use super::{view, Sys, OPENING_PLACEHOLDER};
use crate::json::Json;

fn is_signature(b: &NBlock<'_>) -> bool {
    match b {
        NBlock::Thinking(t) => {
            let (_, signature, vendor) = t.thinking();
            vendor.esc == "gemini" && !signature.is_empty()
        }
        _ => false,
    }
}

/// Write the body; returns the number of contents.
pub fn write(w: &mut Json, opts: &Options<'_>, sys: &[Sys<'_>], n: &Neutral<'_>) -> usize {
    let v = view(n, |role, b| match b {
        NBlock::Thinking(_) => role == NRole::Assistant && is_signature(b),
        NBlock::Redacted(_) | NBlock::Compaction(_) => false,
        NBlock::Image(_) => role == NRole::User,
        _ => true,
    });
    // A model turn of signatures only has nothing to attach them to.
    let msgs: Vec<_> = v
        .msgs()
        .into_iter()
        .filter(|(_, blocks)| blocks.iter().any(|b| !is_signature(b)))
        .collect();
    let opening = matches!(msgs.first(), Some((NRole::Assistant, _)));
    w.raw("{\"contents\":[");
    let mut first = true;
    if opening {
        w.sep(&mut first);
        w.raw("{\"role\":\"user\",\"parts\":[{\"text\":");
        w.str(OPENING_PLACEHOLDER);
        w.raw("}]}");
    }
    // Merging after the signature filter may have put two same-role turns side by side.
    let mut prev: Option<NRole> = if opening { Some(NRole::User) } else { None };
    for (role, blocks) in &msgs {
        if prev == Some(*role) {
            // Continue the previous content: reopen its parts list (drop its `]}`).
            w.buf.truncate(w.buf.len() - 2);
        } else {
            w.sep(&mut first);
            w.raw(match role {
                NRole::User => "{\"role\":\"user\",\"parts\":[",
                NRole::Assistant => "{\"role\":\"model\",\"parts\":[",
            });
        }
        prev = Some(*role);
        let mut fp = prev_parts_open(w);
        let mut signature: Option<&str> = None;
        for b in blocks.iter() {
            if let NBlock::Thinking(t) = b {
                signature = Some(t.thinking().1.esc);
                continue;
            }
            w.sep(&mut fp);
            match b {
                NBlock::Text(t) => {
                    w.raw("{\"text\":");
                    t.write(w);
                }
                NBlock::Image(img) => {
                    let src = img.image();
                    if src.is_url() {
                        w.raw("{\"fileData\":{\"mimeType\":");
                        w.pre_str(src.media_type.esc);
                        w.field_pre("fileUri", src.url.esc);
                    } else {
                        w.raw("{\"inlineData\":{\"mimeType\":");
                        w.pre_str(src.media_type.esc);
                        w.field_pre("data", src.data.esc);
                    }
                    w.raw("}");
                }
                NBlock::ToolUse(call) => {
                    w.raw("{\"functionCall\":{\"id\":");
                    call.write_id(w);
                    w.field_pre("name", call.name().esc);
                    w.raw(",\"args\":");
                    w.raw(call.item.args_json());
                    w.raw("}");
                }
                NBlock::ToolResult(call) => {
                    w.raw("{\"functionResponse\":{\"id\":");
                    call.write_id(w);
                    w.field_pre("name", call.name().esc);
                    w.raw(if call.is_error() {
                        ",\"response\":{\"error\":"
                    } else {
                        ",\"response\":{\"output\":"
                    });
                    w.pre_str(call.content().esc);
                    w.raw("}}");
                }
                NBlock::Thinking(_) | NBlock::Redacted(_) | NBlock::Compaction(_) => {}
            }
            if let Some(s) = signature.take() {
                w.field_pre("thoughtSignature", s);
            }
            w.raw("}");
        }
        w.raw("]}");
    }
    w.raw("]");
    if !sys.is_empty() {
        w.raw(",\"systemInstruction\":{\"parts\":[");
        let mut first = true;
        for s in sys {
            w.sep(&mut first);
            w.raw("{\"text\":");
            s.text.write(w);
            w.raw("}");
        }
        w.raw("]}");
    }
    if !opts.tools.is_empty() {
        w.raw(",\"tools\":[{\"functionDeclarations\":[");
        let mut first = true;
        for t in &opts.tools {
            w.sep(&mut first);
            w.raw("{\"name\":");
            w.str(&t.name);
            w.field_str("description", &t.description);
            if let Some(s) = t.input_schema {
                w.raw(",\"parametersJsonSchema\":");
                w.raw(s.get());
            }
            w.raw("}");
        }
        w.raw("]}]");
    }
    if let Some(extra) = opts.extra {
        w.splice_object(extra);
    }
    w.raw("}");
    msgs.len() + usize::from(opening)
}

/// Whether the parts list just opened is empty (true) or continues one (false).
fn prev_parts_open(w: &Json) -> bool {
    w.buf.last() == Some(&b'[')
}
