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
use super::neutral::{BlockRef, NBlock, NRole, Neutral};
use super::{view, Head, Plan, State, Sys, Unit, Wire, OPENING_PLACEHOLDER};
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

/// Lay out the body: the view without model turns of signatures only (nothing to
/// attach them to), neighbours of one role that this leaves side by side merged into
/// one content (marks: where each merged message begins), the opening user turn.
pub fn plan<'a>(sys: Vec<Sys<'a>>, n: &Neutral<'a>) -> Plan<'a> {
    let v = view(n, |role, b| match b {
        NBlock::Thinking(_) => role == NRole::Assistant && is_signature(b),
        NBlock::Redacted(_) | NBlock::Compaction(_) => false,
        NBlock::Image(_) => role == NRole::User,
        _ => true,
    });
    let mut blocks: Vec<NBlock<'a>> = Vec::with_capacity(v.blocks.len());
    let mut units: Vec<Unit> = Vec::with_capacity(v.spans.len());
    let mut marks: Vec<usize> = Vec::new();
    for &(role, a, b) in &v.spans {
        let msg = &v.blocks[a..b];
        if msg.iter().all(is_signature) {
            continue;
        }
        let at = blocks.len();
        blocks.extend(msg.iter().cloned());
        match units.last_mut() {
            Some(u) if u.role == role => {
                marks.push(at - u.blocks.0);
                u.blocks.1 = blocks.len();
                u.marks.1 = marks.len();
            }
            _ => units.push(Unit {
                role,
                blocks: (at, blocks.len()),
                marks: (marks.len(), marks.len()),
                native: None,
            }),
        }
    }
    let head = Head {
        opening: matches!(units.first(), Some(u) if u.role == NRole::Assistant),
        ..Head::default()
    };
    Plan {
        wire: Wire::Gemini,
        head,
        blocks,
        units,
        marks,
        sys,
        tool_bp: false,
        breakpoints: Vec::new(),
        native: None,
    }
}

/// The opening of the contents, with the placeholder user turn when needed.
pub fn head(w: &mut Json, h: &Head<'_>, st: &mut State) {
    w.raw("{\"contents\":[");
    if h.opening {
        w.sep(&mut st.first);
        w.raw("{\"role\":\"user\",\"parts\":[{\"text\":");
        w.str(OPENING_PLACEHOLDER);
        w.raw("}]}");
        st.count += 1;
    }
}

/// One content: the parts of its messages (`merged`: offsets where a message after
/// the first begins).  A thought signature rides on the part after it in its message.
pub fn unit(w: &mut Json, role: NRole, blocks: &[NBlock<'_>], merged: &[usize], st: &mut State) {
    w.sep(&mut st.first);
    w.raw(match role {
        NRole::User => "{\"role\":\"user\",\"parts\":[",
        NRole::Assistant => "{\"role\":\"model\",\"parts\":[",
    });
    let mut fp = true;
    for_parts(blocks, merged, |b, signature| {
        w.sep(&mut fp);
        part(w, b, signature.map(|t| t.thinking().1.esc));
    });
    w.raw("]}");
    st.count += 1 + merged.len();
}

/// Call `f` with each block of a content that is a part, in order, and the thought
/// signature that rides on it: a signature (a thinking block) goes with the part after
/// it in its message, never into the next message (`merged`: where one begins).
pub fn for_parts<'b, 'c>(
    blocks: &'b [NBlock<'c>],
    merged: &[usize],
    mut f: impl FnMut(&'b NBlock<'c>, Option<&'b BlockRef<'c>>),
) {
    let mut signature: Option<&'b BlockRef<'c>> = None;
    for (bi, b) in blocks.iter().enumerate() {
        if merged.contains(&bi) {
            signature = None;
        }
        if let NBlock::Thinking(t) = b {
            signature = Some(t);
            continue;
        }
        f(b, signature.take());
    }
}

/// One part, with the (escaped) thought signature that rides on it.
pub fn part(w: &mut Json, b: &NBlock<'_>, signature: Option<&str>) {
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
        // Not parts (the view keeps only signatures of these, see `for_parts`).
        NBlock::Thinking(_) | NBlock::Redacted(_) | NBlock::Compaction(_) => {}
    }
    if let Some(s) = signature {
        w.field_pre("thoughtSignature", s);
    }
    w.raw("}");
}

/// The system blocks as the `systemInstruction` object.
pub fn system_instruction(w: &mut Json, sys: &[Sys<'_>]) {
    w.raw("{\"parts\":[");
    let mut first = true;
    for s in sys {
        w.sep(&mut first);
        w.raw("{\"text\":");
        s.text.write(w);
        w.raw("}");
    }
    w.raw("]}");
}

/// The end of the contents, the system instruction (as recorded when `h` says so), the
/// tools (the recorded ones when the options carry them), the extra fields.
pub fn tail(w: &mut Json, opts: &Options<'_>, sys: &[Sys<'_>], h: &Head<'_>) {
    w.raw("]");
    if !super::native::write_system_field(w, h) && !sys.is_empty() {
        w.raw(",\"systemInstruction\":");
        system_instruction(w, sys);
    }
    if !super::native::write_tools(w, opts, Wire::Gemini) && !opts.tools.is_empty() {
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
}
