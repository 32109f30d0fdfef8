//! Anthropic Messages (`POST /v1/messages`).
//!
//! Rules enforced: system goes in the top-level `system` blocks; the first message is
//! the user's; tool_result blocks open the user message right after the tool_use; thinking
//! is sent back only with its signature (unsigned thinking would be refused); Anthropic's
//! own compaction blocks are sent back and the request starts at the latest (the API
//! reads nothing before it; the opening user placeholder, if any, is before it too); at most 4
//! `cache_control` breakpoints, placed at layer boundaries only: end of L0 (tools and
//! session system), end of L1 (situation), and in L2 the end of the previous request's
//! messages and the end of this one — so the next request reads what this one writes,
//! within the 20-block look-back.

use super::input::Options;
use super::neutral::{NBlock, NRole, Neutral, Txt};
use super::{open_block, view, Fields, Sys, OPENING_PLACEHOLDER};
use crate::json::Json;

/// Most breakpoints a request may carry.
pub const MAX_BREAKPOINTS: usize = 4;

fn cache_control(w: &mut Json, opts: &Options<'_>) {
    match opts.cache_ttl.as_deref() {
        Some(ttl) if !ttl.is_empty() => {
            w.raw(",\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":");
            w.str(ttl);
            w.raw("}");
        }
        _ => w.raw(",\"cache_control\":{\"type\":\"ephemeral\"}"),
    }
}

/// Write the body; returns the number of messages.
pub fn write(
    w: &mut Json,
    opts: &Options<'_>,
    sys: &[Sys<'_>],
    n: &Neutral<'_>,
    breakpoints: &mut Vec<String>,
) -> usize {
    // Declared before `msgs`, which may borrow them.
    let placeholder = NBlock::Text(Txt::Own(OPENING_PLACEHOLDER.into()));
    let mut tail: Option<NBlock<'_>> = None;
    let mut v = view(n, |role, b| match b {
        // Another vendor's signature (a Gemini thought signature) means nothing here.
        NBlock::Thinking(t) => {
            let (_, signature, vendor) = t.thinking();
            role == NRole::Assistant && !signature.is_empty() && vendor.is_empty()
        }
        NBlock::Redacted(_) => role == NRole::Assistant,
        NBlock::Image(_) => role == NRole::User,
        // Anthropic's own compaction blocks (vendor ""), as the model returned them.
        NBlock::Compaction(c) => role == NRole::Assistant && c.compaction().is_from(""),
        _ => true,
    });
    // Anthropic ignores every block before its latest compaction block: not sent.
    v.from_last(|b| matches!(b, NBlock::Compaction(_)));
    // Ending with the assistant makes its message a prefill, which Anthropic refuses
    // when it ends with whitespace: trim the final text; drop what trimming empties.
    // The last message's blocks are the tail of `v.blocks`.
    if let Some(&(NRole::Assistant, start, _)) = v.spans.last() {
        while v.blocks.len() > start {
            let Some(NBlock::Text(t)) = v.blocks.last() else {
                break;
            };
            let raw = t.raw();
            let kept = raw.trim_end();
            if kept.len() == raw.len() {
                break;
            }
            let kept = (!kept.is_empty()).then(|| kept.to_string());
            v.blocks.pop();
            if let Some(kept) = kept {
                tail = Some(NBlock::Text(Txt::Own(kept.into())));
                break;
            }
        }
        if let Some(t) = tail.as_ref() {
            v.blocks.push(t);
        }
        if v.blocks.len() == start {
            v.spans.pop();
        } else if let Some(last) = v.spans.last_mut() {
            last.2 = v.blocks.len();
        }
    }
    let mut msgs = v.msgs();
    let opening_blocks = [&placeholder];
    if msgs.is_empty() {
        msgs.push((NRole::User, &opening_blocks));
    }
    let opening = matches!(msgs.first(), Some((NRole::Assistant, _)));

    // Where the breakpoints go (decided before writing, so the count is known).
    let last_l0 = sys.iter().rposition(|s| s.layer == 0);
    let last_l1 = sys.iter().rposition(|s| s.layer >= 1);
    let tool_bp = opts.cache && last_l0.is_none() && !opts.tools.is_empty();
    let sys_bps: Vec<usize> = if opts.cache {
        last_l0.into_iter().chain(last_l1).collect()
    } else {
        Vec::new()
    };
    let mut msg_bps: Vec<(usize, usize)> = Vec::new(); // (message, block) in `msgs`
    if opts.cache {
        // A top-level `cache_control` among the extra fields (automatic caching, as a
        // recorded request may carry it) is a breakpoint of its own.
        let auto = opts.extra.is_some_and(|e| {
            serde_json::from_str::<std::collections::HashMap<String, &serde_json::value::RawValue>>(
                e.get(),
            )
            .is_ok_and(|m| m.contains_key("cache_control"))
        });
        let used = sys_bps.len() + usize::from(tool_bp) + usize::from(auto);
        let last = msgs.len() - 1;
        let mut targets = vec![last];
        if last >= 2 {
            targets.push(last - 2);
        }
        for mi in targets {
            if used + msg_bps.len() >= MAX_BREAKPOINTS {
                break;
            }
            if let Some(bi) = msgs[mi].1.iter().rposition(|b| b.cacheable()) {
                msg_bps.push((mi, bi));
            }
        }
    }

    w.raw("{\"model\":");
    w.str(&opts.model);
    w.raw(",\"max_tokens\":");
    w.uint(opts.max_tokens.unwrap_or(4096));
    if !sys.is_empty() {
        w.raw(",\"system\":[");
        let mut first = true;
        for (i, s) in sys.iter().enumerate() {
            w.sep(&mut first);
            w.raw("{\"type\":\"text\",\"text\":");
            s.text.write(w);
            if sys_bps.contains(&i) {
                cache_control(w, opts);
                breakpoints.push(format!("system[{i}] (end of L{})", s.layer.min(1)));
            }
            w.raw("}");
        }
        w.raw("]");
    }
    w.raw(",\"messages\":[");
    let mut first = true;
    if opening {
        w.sep(&mut first);
        w.raw("{\"role\":\"user\",\"content\":[");
        block(w, &placeholder, false, opts);
        w.raw("]}");
    }
    let shift = usize::from(opening);
    for (mi, (role, blocks)) in msgs.iter().enumerate() {
        w.sep(&mut first);
        w.raw(match role {
            NRole::User => "{\"role\":\"user\",\"content\":[",
            NRole::Assistant => "{\"role\":\"assistant\",\"content\":[",
        });
        let mut fb = true;
        for (bi, b) in blocks.iter().enumerate() {
            w.sep(&mut fb);
            let bp = msg_bps.contains(&(mi, bi));
            if bp {
                breakpoints.push(format!("messages[{}] (L2)", mi + shift));
            }
            block(w, b, bp, opts);
        }
        w.raw("]}");
    }
    w.raw("]");
    if !opts.tools.is_empty() {
        w.raw(",\"tools\":[");
        let mut first = true;
        let last = opts.tools.len() - 1;
        for (i, t) in opts.tools.iter().enumerate() {
            w.sep(&mut first);
            w.raw("{\"name\":");
            w.str(&t.name);
            w.field_str("description", &t.description);
            w.raw(",\"input_schema\":");
            w.raw(t.schema_or_empty());
            if tool_bp && i == last {
                cache_control(w, opts);
                breakpoints.push(format!("tools[{i}] (end of L0)"));
            }
            w.raw("}");
        }
        w.raw("]");
    }
    if let Some(extra) = opts.extra {
        w.splice_object(extra);
    }
    w.raw("}");
    msgs.len() + shift
}

fn block(w: &mut Json, b: &NBlock<'_>, bp: bool, opts: &Options<'_>) {
    open_block(w, b, Fields::Wire);
    if bp {
        cache_control(w, opts);
    }
    w.raw("}");
}
