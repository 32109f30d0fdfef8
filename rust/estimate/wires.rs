//! Each wire's segments, walked from its plan in the specification's order: the
//! vendor's prefix order, which is not always the body's (Gemini's system instruction
//! is written last but read second).  Each walk mirrors its writer in
//! `crate::render` and its rules in the Python provider module of the same wire.

use super::jsonfmt::Style;
use super::{Seg, Segments};
use crate::json::Json;
use crate::render::neutral::{NBlock, NRole, Txt};
use crate::render::OPENING_PLACEHOLDER;
use crate::render::{anthropic, gemini, openai_chat, openai_responses, Plan, Wire};

/// Add the segments of the request `plan` lays out.
pub(super) fn walk(s: &mut Segments<'_>, plan: &Plan<'_>) {
    match plan.wire {
        Wire::Anthropic => anthropic_walk(s, plan),
        Wire::OpenAiChat => chat_walk(s, plan),
        Wire::OpenAiResponses => responses_walk(s, plan),
        Wire::Gemini => gemini_walk(s, plan),
    }
}

/// The tokens of a text joined from a message's texts (`"\n\n"` between them): one
/// text's own count, else the joined text's.
fn joined<'t, 'c: 't>(s: &Segments<'_>, texts: impl Iterator<Item = &'t Txt<'c>> + Clone) -> u64 {
    let mut it = texts.clone();
    match (it.next(), it.next()) {
        (None, _) => 0,
        (Some(one), None) => s.txt(one),
        _ => {
            let parts: Vec<_> = texts.map(|t| t.raw()).collect();
            s.own(&parts.join("\n\n"))
        }
    }
}

// -- Anthropic Messages ---------------------------------------------------------------

/// The line breaks of a text (Anthropic bills each beyond the tokenizer's count).
fn line_breaks(t: &Txt<'_>) -> f64 {
    t.raw().bytes().filter(|&c| c == b'\n').count() as f64
}

/// Tools, then system blocks, then every content block of the messages (a segment
/// each).  Thinking counts in the last assistant message only; a request that starts
/// at a compaction block does not read the opening placeholder before it; a top-level
/// `cache_control` is a breakpoint on the last block.
fn anthropic_walk(s: &mut Segments<'_>, plan: &Plan<'_>) {
    let ttl = plan
        .head
        .cache_ttl
        .filter(|t| !t.is_empty())
        .unwrap_or("5m");
    s.tools(plan.tool_bp.then_some(ttl));
    for (i, sys) in plan.sys.iter().enumerate() {
        let key = s.key(b"system", |w| {
            w.raw("{\"type\":\"text\",\"text\":");
            sys.text.write(w);
            w.raw("}");
        });
        let prose = s.txt(&sys.text);
        let breaks = s.f.framing.line_break * line_breaks(&sys.text);
        let bp = plan.head.sys_bps.contains(&i).then_some(ttl);
        s.add(key, prose, 0, breaks, 0, 0, bp);
    }
    let compacted = matches!(plan.blocks.first(), Some(NBlock::Compaction(_)));
    if plan.head.opening && !compacted {
        let opening = NBlock::Text(Txt::Own(OPENING_PLACEHOLDER.into()));
        let first = s.count();
        if let Some((seg, _)) = anthropic_block(s, NRole::User, &opening, false) {
            s.add_seg(seg, None);
        }
        s.add_framing(first, s.f.framing.message);
    }
    let last_assistant = plan.units.iter().rposition(|u| u.role == NRole::Assistant);
    let all_thinking = s.f.framing.thinking_all != 0.0;
    for u in 0..plan.units.len() {
        let (role, blocks, marks) = plan.unit(u);
        let b0 = plan.units[u].blocks.0;
        let first = s.count();
        for (bi, b) in blocks.iter().enumerate() {
            let bp = marks.contains(&bi).then_some(ttl);
            // A block shared with the previous request adds the segment kept of it.
            match s.kept(b0 + bi) {
                Some(seg) => s.add_block(b0 + bi, seg, bp, true),
                None => {
                    match anthropic_block(s, role, b, all_thinking || Some(u) == last_assistant) {
                        Some((seg, keep)) => s.add_block(b0 + bi, seg, bp, keep),
                        None => s.no_block(b0 + bi),
                    }
                }
            }
        }
        if s.count() > first {
            s.add_framing(first, s.f.framing.message);
        }
    }
    if let Some(ttl) = s.auto_breakpoint() {
        s.breakpoint_last(ttl);
    }
    // The request's own framing, the primed reply, after the last breakpoint.
    let key = s.key(b"reply", |_| {});
    s.add(key, 0, 0, s.f.framing.request, 0, 0, None);
}

/// The segment of content block `b` (None: it makes none), and whether the next
/// request may take it as it is for the same block (`Segments::kept`): not thinking,
/// whose count depends on where the last assistant turn is, nor images, which also
/// flag unknown sizes.
fn anthropic_block(
    s: &mut Segments<'_>,
    role: NRole,
    b: &NBlock<'_>,
    last_assistant: bool,
) -> Option<(Seg, bool)> {
    let tag: &[u8] = match role {
        NRole::User => b"user",
        NRole::Assistant => b"assistant",
    };
    let key = s.key(tag, |w| anthropic::block(w, b, false, None));
    let framing = s.f.framing.tool_block;
    let seg = |prose, structured, framing, images| Seg {
        key,
        prose,
        structured,
        framing,
        images,
    };
    Some(match b {
        NBlock::Text(t) => {
            let prose = s.txt(t);
            let breaks = s.f.framing.line_break * line_breaks(t);
            (seg(prose, 0, breaks, 0), true)
        }
        NBlock::Image(img) => {
            let src = img.image();
            let size = if src.is_url() {
                None
            } else {
                s.image_size(&img.item, img.i)
            };
            let images = s.image(size);
            (seg(0, 0, 0.0, images), false)
        }
        NBlock::ToolUse(call) => {
            let structured = s.call(&call.item, Some(Style::Spaced));
            (seg(0, structured, framing, 0), true)
        }
        NBlock::ToolResult(call) => {
            let structured = s.result(&call.item);
            let mut images = 0;
            let mut any = false;
            for (i, block) in call.item.blocks().enumerate() {
                if let crate::commit::Block::Image(src) = block {
                    let size = if src.is_url() {
                        None
                    } else {
                        s.image_size(&call.item, i as u32)
                    };
                    images += s.image(size);
                    any = true;
                }
            }
            (seg(0, structured, framing, images), !any)
        }
        NBlock::Thinking(t) => {
            let prose = if last_assistant { s.thinking(t) } else { 0 };
            (seg(prose, 0, 0.0, 0), false)
        }
        NBlock::Redacted(_) => (seg(0, 0, 0.0, 0), true),
        NBlock::Compaction(c) => {
            // A compaction without a summary is no segment (the view never has one).
            if c.compaction().content.is_empty() {
                return None;
            }
            let prose = s.summary(c);
            (seg(prose, 0, 0.0, 0), true)
        }
    })
}

// -- OpenAI (both APIs) ---------------------------------------------------------------

/// An image as OpenAI reads it: from a `data:` URL (its own, or the one made of its
/// inline bytes), else of unknown size.
fn openai_image(s: &mut Segments<'_>, img: &crate::render::neutral::BlockRef<'_>) -> u64 {
    let src = img.image();
    let size = if src.is_url() {
        let url = src.url.raw();
        match url.strip_prefix("data:").and(url.split_once(',')) {
            Some((_, b64)) => super::images::decoded_size(b64),
            None => None,
        }
    } else {
        let media = src.media_type.raw();
        match media.split_once(',') {
            // The URL's first comma is inside the media type.
            Some((_, rest)) => {
                let b64 = format!("{rest};base64,{}", src.data.raw());
                super::images::decoded_size(&b64)
            }
            None => s.image_size(&img.item, img.i),
        }
    };
    s.image(size)
}

/// The texts and image tokens of a user message's content parts.
fn user_parts(s: &mut Segments<'_>, blocks: &[NBlock<'_>]) -> (u64, u64) {
    let (mut texts, mut images) = (0, 0);
    for b in blocks {
        match b {
            NBlock::Text(t) => texts += s.txt(t),
            NBlock::Image(img) => images += openai_image(s, img),
            _ => {}
        }
    }
    (texts, images)
}

/// OpenAI's system text (both APIs): one message of the texts joined, framed as a
/// message of `role`; `write` writes its bytes (its identity).
fn openai_system(s: &mut Segments<'_>, plan: &Plan<'_>, role: &str, write: impl FnOnce(&mut Json)) {
    if plan.sys.is_empty() {
        return;
    }
    let key = s.key(b"", write);
    let prose = s.role(role) + joined(s, plan.sys.iter().map(|x| &x.text));
    let framing = s.f.framing.message + s.f.framing.system;
    s.add(key, prose, 0, framing, 0, 0, None);
}

/// Chat Completions: the tools (one declaration), each message with its framing (the
/// system text one message), then the reply primer.
fn chat_walk(s: &mut Segments<'_>, plan: &Plan<'_>) {
    s.tools(None);
    let f = s.f.framing.clone();
    openai_system(s, plan, "system", |w| {
        openai_chat::system_message(w, &plan.sys)
    });
    for u in 0..plan.units.len() {
        let (role, blocks, _) = plan.unit(u);
        match role {
            NRole::User => {
                for b in blocks {
                    if let NBlock::ToolResult(call) = b {
                        let key = s.key(b"", |w| openai_chat::tool_message(w, call));
                        let structured = s.result(&call.item);
                        s.add(key, s.role("tool"), structured, f.message, 0, 0, None);
                    }
                }
                if let Some((one, more)) = openai_chat::user_content(blocks) {
                    let key = s.key(b"", |w| openai_chat::user_message(w, blocks, one, more));
                    let (texts, images) = user_parts(s, blocks);
                    s.add(key, s.role("user") + texts, 0, f.message, images, 0, None);
                }
            }
            NRole::Assistant => {
                let key = s.key(b"", |w| openai_chat::assistant_message(w, blocks));
                let text = joined(s, openai_chat::texts(blocks));
                let (mut structured, mut framing) = (0, f.message);
                if openai_chat::texts(blocks).next().is_some() {
                    framing += f.assistant_text;
                }
                for b in blocks {
                    if let NBlock::ToolUse(call) = b {
                        structured += s.call(&call.item, None);
                        framing += f.tool_call;
                    }
                }
                s.add(
                    key,
                    s.role("assistant") + text,
                    structured,
                    framing,
                    0,
                    0,
                    None,
                );
            }
        }
    }
    let key = s.key(b"reply", |_| {});
    s.add(key, 0, 0, f.reply, 0, 0, None);
}

/// Responses: the tools, the instructions, then the input items as Chat's messages
/// (consecutive calls share one assistant header), then the reply primer.
fn responses_walk(s: &mut Segments<'_>, plan: &Plan<'_>) {
    #[derive(PartialEq, Clone, Copy)]
    enum Kind {
        Call,
        Other,
    }
    s.tools(None);
    let f = s.f.framing.clone();
    openai_system(s, plan, "developer", |w| {
        w.raw("instructions:");
        let texts = plan.sys.iter().map(|x| &x.text);
        crate::render::neutral::write_joined(w, texts, openai_chat::TEXT_JOIN);
    });
    let mut previous = Kind::Other;
    for u in 0..plan.units.len() {
        let (role, blocks, _) = plan.unit(u);
        match role {
            NRole::User => {
                for b in blocks {
                    if let NBlock::ToolResult(call) = b {
                        let key = s.key(b"", |w| openai_responses::function_call_output(w, call));
                        let structured = s.result(&call.item);
                        s.add(key, 0, structured, f.message + f.name, 0, 0, None);
                        previous = Kind::Other;
                    }
                }
                if openai_responses::parts(blocks) > 0 {
                    let key = s.key(b"", |w| openai_responses::user_message(w, blocks));
                    let (texts, images) = user_parts(s, blocks);
                    s.add(key, s.role("user") + texts, 0, f.message, images, 0, None);
                    previous = Kind::Other;
                }
            }
            NRole::Assistant => {
                for b in blocks {
                    if let NBlock::Compaction(c) = b {
                        let key = s.key(b"", |w| openai_responses::compaction_item(w, c));
                        let chars = s.chars(c);
                        let state = (chars * f.state_num / f.state_den.max(1))
                            .saturating_sub(f.state_envelope)
                            / f.state_per_token.max(1);
                        s.add(key, 0, 0, state as f64, 0, 0, None);
                        previous = Kind::Other;
                    }
                }
                if openai_chat::texts(blocks).next().is_some() {
                    let key = s.key(b"", |w| openai_responses::assistant_message(w, blocks));
                    let text = joined(s, openai_chat::texts(blocks));
                    let framing = f.message + f.assistant_text;
                    s.add(key, s.role("assistant") + text, 0, framing, 0, 0, None);
                    previous = Kind::Other;
                }
                for b in blocks {
                    if let NBlock::ToolUse(call) = b {
                        let key = s.key(b"", |w| openai_responses::function_call(w, call));
                        let structured = s.call(&call.item, None);
                        let header = if previous == Kind::Call {
                            0.0
                        } else {
                            f.message + f.name
                        };
                        s.add(key, 0, structured, f.tool_call + header, 0, 0, None);
                        previous = Kind::Call;
                    }
                }
            }
        }
    }
    let key = s.key(b"reply", |_| {});
    s.add(key, 0, 0, f.reply, 0, 0, None);
}

// -- Gemini ----------------------------------------------------------------------------

/// Tools (one declaration), the system instruction (one segment), then every part of
/// the contents; a thought signature is billed with the part it rides on.
fn gemini_walk(s: &mut Segments<'_>, plan: &Plan<'_>) {
    s.tools(None);
    let f = s.f.framing.clone();
    if !plan.sys.is_empty() {
        let key = s.key(b"system", |w| gemini::system_instruction(w, &plan.sys));
        let prose = plan.sys.iter().map(|x| s.txt(&x.text)).sum();
        s.add(key, prose, 0, 0.0, 0, 0, None);
    }
    // Each content's framing (`message`: Gemini 3) rides on its first part, as the
    // specification adds it once the content's parts are made.
    if plan.head.opening {
        let opening = NBlock::Text(Txt::Own(OPENING_PLACEHOLDER.into()));
        let first = s.count();
        gemini_part(s, NRole::User, &opening, None, true, &f);
        s.add_framing(first, f.message);
    }
    // The current turn opens at the last user content with a text part: signatures of
    // earlier turns are not billed (unless the frame's `signature_all` says they are).
    let turn = (0..plan.units.len())
        .rev()
        .find(|&u| {
            let (role, blocks, _) = plan.unit(u);
            role == NRole::User && blocks.iter().any(|b| matches!(b, NBlock::Text(_)))
        })
        .unwrap_or(0);
    for u in 0..plan.units.len() {
        let (role, blocks, merged) = plan.unit(u);
        let current = u >= turn || f.signature_all != 0.0;
        let first = s.count();
        gemini::for_parts(blocks, merged, |b, signature| {
            gemini_part(s, role, b, signature, current, &f);
        });
        if s.count() > first {
            s.add_framing(first, f.message);
        }
    }
}

fn gemini_part(
    s: &mut Segments<'_>,
    role: NRole,
    b: &NBlock<'_>,
    signature: Option<&crate::render::neutral::BlockRef<'_>>,
    billed: bool,
    f: &super::Framing,
) {
    let tag: &[u8] = match role {
        NRole::User => b"user",
        NRole::Assistant => b"model",
    };
    let key = s.key(tag, |w| {
        gemini::part(w, b, signature.map(|t| t.thinking().1.esc))
    });
    // A signature of an earlier turn is not billed (`billed` false).
    let sig = signature.filter(|_| billed).map_or(0.0, |t| {
        (f.signature_slope * s.chars(t) as f64 - f.signature_offset).max(0.0)
    });
    match b {
        NBlock::ToolUse(call) => {
            let structured = s.call(&call.item, Some(Style::Compact));
            s.add(key, 0, structured, f.function_part + sig, 0, 0, None);
        }
        NBlock::ToolResult(call) => {
            let structured = s.gemini_result(&call.item);
            s.add(key, 0, structured, f.function_part + sig, 0, 0, None);
        }
        NBlock::Image(img)
            if !img.image().is_url() && img.image().media_type.raw() == "application/pdf" =>
        {
            // An inline PDF: its pages, flagged for the text Gemini extracts from it.
            let tokens = s.pdf(&img.image().data.raw());
            s.add(key, 0, 0, tokens + sig, 0, 0, None);
        }
        NBlock::Image(img)
            if !img.image().is_url() && img.image().media_type.raw().starts_with("text/") =>
        {
            // A text file sent inline: the model reads its text.
            let text = super::images::decoded_text(&img.image().data.raw());
            let prose = s.own(&text);
            s.add(key, prose, 0, sig, 0, 0, None);
        }
        NBlock::Image(img) => {
            let src = img.image();
            // fileData (by URL): a size the body does not hold.
            let size = if src.is_url() {
                None
            } else {
                s.image_size(&img.item, img.i)
            };
            let images = s.image(size);
            s.add(key, 0, 0, sig, images, 0, None);
        }
        NBlock::Text(t) => {
            let prose = s.txt(t);
            s.add(key, prose, 0, sig, 0, 0, None);
        }
        // Not parts (`for_parts` never gives them).
        NBlock::Thinking(_) | NBlock::Redacted(_) | NBlock::Compaction(_) => {}
    }
}
