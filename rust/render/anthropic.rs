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
use super::{
    open_block, view, Breakpoint, Fields, Head, Plan, State, Sys, Unit, Wire, OPENING_PLACEHOLDER,
};
use crate::json::Json;

/// Most breakpoints a request may carry.
pub const MAX_BREAKPOINTS: usize = 4;

fn cache_control(w: &mut Json, ttl: Option<&str>) {
    match ttl {
        Some(ttl) if !ttl.is_empty() => {
            w.raw(",\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":");
            w.str(ttl);
            w.raw("}");
        }
        _ => w.raw(",\"cache_control\":{\"type\":\"ephemeral\"}"),
    }
}

/// Lay out the body: the view, the trimmed prefill, the opening turn and where the
/// breakpoints go (decided before writing, so the count is known).
pub fn plan<'a>(opts: &'a Options<'a>, sys: Vec<Sys<'a>>, n: &Neutral<'a>) -> Plan<'a> {
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
                v.blocks.push(NBlock::Text(Txt::Own(kept.into())));
                break;
            }
        }
        if v.blocks.len() == start {
            v.spans.pop();
        } else if let Some(last) = v.spans.last_mut() {
            last.2 = v.blocks.len();
        }
    }
    if v.spans.is_empty() {
        v.blocks
            .push(NBlock::Text(Txt::Own(OPENING_PLACEHOLDER.into())));
        v.spans.push((NRole::User, 0, 1));
    }
    let opening = matches!(v.spans.first(), Some((NRole::Assistant, _, _)));

    let recorded = opts.native_for("anthropic");
    let last_l0 = sys.iter().rposition(|s| s.layer == 0);
    let last_l1 = sys.iter().rposition(|s| s.layer >= 1);
    // A replayed recording keeps its own breakpoints and gets none of ours (its
    // tools' marker counts against the limit like any other).
    let tool_bp = opts.cache
        && match recorded {
            Some(nat) => nat.tools.is_some() && nat.tools_bp,
            None => last_l0.is_none() && !opts.tools.is_empty(),
        };
    let sys_bps: Vec<usize> = match recorded {
        _ if !opts.cache => Vec::new(),
        Some(nat) => super::native::recorded_breakpoints(nat, &sys, None).0,
        None => last_l0.into_iter().chain(last_l1).collect(),
    };
    let head = Head {
        model: &opts.model,
        max_tokens: Some(opts.max_tokens.unwrap_or(4096)),
        cache_ttl: opts.cache_ttl.as_deref(),
        sys: true,
        sys_bps,
        opening,
        native_sys: None,
        input_text: None,
    };
    let mut p = Plan::empty(Wire::Anthropic, head, sys, v);
    p.tool_bp = tool_bp;
    // (message, block) of the messages' breakpoints: the end of this request and of
    // the one before it.
    let mut msg_bps: Vec<(usize, usize)> = Vec::new();
    if let (true, Some(nat)) = (opts.cache, recorded) {
        msg_bps = super::native::recorded_breakpoints(nat, &[], Some(&p)).1;
        let room = MAX_BREAKPOINTS.saturating_sub(p.head.sys_bps.len() + usize::from(tool_bp));
        msg_bps.truncate(room);
    } else if opts.cache {
        // A top-level `cache_control` among the extra fields (automatic caching) is a
        // breakpoint of its own.
        let used = p.head.sys_bps.len() + usize::from(tool_bp) + usize::from(opts.auto_cache());
        let last = p.units.len() - 1;
        let mut targets = vec![last];
        if last >= 2 {
            targets.push(last - 2);
        }
        for mi in targets {
            if used + msg_bps.len() >= MAX_BREAKPOINTS {
                break;
            }
            let (_, blocks, _) = p.unit(mi);
            if let Some(bi) = blocks.iter().rposition(|b| b.cacheable()) {
                msg_bps.push((mi, bi));
            }
        }
    }
    // Marks in message order (targets were taken last first).
    msg_bps.sort_unstable();
    for (mi, bi) in &msg_bps {
        let u: &mut Unit = &mut p.units[*mi];
        if u.marks == (0, 0) {
            u.marks = (p.marks.len(), p.marks.len());
        }
        p.marks.push(*bi);
        u.marks.1 = p.marks.len();
    }
    for &i in &p.head.sys_bps {
        let layer = p.sys[i].layer.min(1);
        p.breakpoints.push(Breakpoint::System { i, layer });
    }
    let shift = usize::from(opening);
    for (mi, _) in &msg_bps {
        p.breakpoints.push(Breakpoint::Message(mi + shift));
    }
    if tool_bp {
        p.breakpoints.push(Breakpoint::Tool(opts.tools.len() - 1));
    }
    p
}

/// Model, output limit, the system blocks and the opening of the message list.
pub fn head(w: &mut Json, h: &Head<'_>, sys: &[Sys<'_>], st: &mut State) {
    w.raw("{\"model\":");
    w.str(h.model);
    w.raw(",\"max_tokens\":");
    w.uint(h.max_tokens.unwrap_or(4096));
    if !super::native::write_system_field(w, h) && !sys.is_empty() {
        w.raw(",\"system\":[");
        let mut first = true;
        for (i, s) in sys.iter().enumerate() {
            w.sep(&mut first);
            w.raw("{\"type\":\"text\",\"text\":");
            s.text.write(w);
            if h.sys_bps.contains(&i) {
                cache_control(w, h.cache_ttl);
            }
            w.raw("}");
        }
        w.raw("]");
    }
    w.raw(",\"messages\":[");
    if h.opening {
        w.sep(&mut st.first);
        w.raw("{\"role\":\"user\",\"content\":[");
        block(
            w,
            &NBlock::Text(Txt::Own(OPENING_PLACEHOLDER.into())),
            false,
            h.cache_ttl,
        );
        w.raw("]}");
        st.count += 1;
    }
}

/// One message from its block `skip` on (0: the whole message; more: resumed after
/// blocks already written, `Plan::shared_blocks`); `bps` are the offsets of its blocks
/// that carry a breakpoint; `ends` gets the buffer length after each block written.
#[allow(clippy::too_many_arguments)]
pub fn unit(
    w: &mut Json,
    h: &Head<'_>,
    role: NRole,
    blocks: &[NBlock<'_>],
    bps: &[usize],
    st: &mut State,
    skip: usize,
    mut ends: Option<&mut Vec<usize>>,
) {
    if skip == 0 {
        w.sep(&mut st.first);
        w.raw(match role {
            NRole::User => "{\"role\":\"user\",\"content\":[",
            NRole::Assistant => "{\"role\":\"assistant\",\"content\":[",
        });
    }
    let mut fb = skip == 0;
    for (bi, b) in blocks.iter().enumerate().skip(skip) {
        w.sep(&mut fb);
        block(w, b, bps.contains(&bi), h.cache_ttl);
        if let Some(e) = ends.as_deref_mut() {
            e.push(w.buf.len());
        }
    }
    w.raw("]}");
    st.count += 1;
}

/// The end of the message list, the tools (the last with a breakpoint: `tool_bp`) and
/// the extra fields.
pub fn tail(w: &mut Json, opts: &Options<'_>, tool_bp: bool) {
    w.raw("]");
    if !super::native::write_tools(w, opts, Wire::Anthropic) && !opts.tools.is_empty() {
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
                cache_control(w, opts.cache_ttl.as_deref());
            }
            w.raw("}");
        }
        w.raw("]");
    }
    if let Some(extra) = opts.extra {
        w.splice_object(extra);
    }
    w.raw("}");
}

/// One content block, with a breakpoint when `bp`.
pub fn block(w: &mut Json, b: &NBlock<'_>, bp: bool, ttl: Option<&str>) {
    open_block(w, b, Fields::Wire);
    if bp {
        cache_control(w, ttl);
    }
    w.raw("}");
}
