//! Round-trip: a request imported from recorded traffic, rendered for the wire it was
//! recorded on, is written in its recorded form wherever the rules left it as it was.
//!
//! The render options carry the recorded request's native form (`input::Native`): the
//! elements of its conversation list as recorded, its system field and tools, and for
//! each node where its content came from.  After a wire has laid out its plan, each
//! unit (a message as the wire writes it) is checked: when every block of it comes
//! from an unchanged item (`Item::unchanged`) and together they are exactly the
//! members of a run of recorded elements, the unit is written as those elements,
//! byte for byte; otherwise it is written in the canonical form, as without a table.
//! So what a rule changed is written canonically and nothing else differs from the
//! recording.  Untrusted content decides nothing here: roles, pairing and ids come
//! from the neutral messages as always; the recorded bytes only replace a unit whose
//! content they are.

use super::input::{Member, Native, Options};
use super::neutral::{NBlock, Txt};
use super::{Head, Plan, State, Sys, Wire};
use crate::commit::Item;
use crate::json::Json;

/// Which part of a node a block shows: its own content, or (a tool node) its call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Own,
    Call,
}

/// The item and side a block shows, when it is an item's recorded content (`None`: the
/// renderer's own text, a summary, a degraded call, a renamed call id).
fn origin<'c>(b: &NBlock<'c>) -> Option<(Item<'c>, Side)> {
    match b {
        NBlock::Text(Txt::Item(item)) => Some((*item, Side::Own)),
        NBlock::Text(Txt::Block(r))
        | NBlock::Image(r)
        | NBlock::Thinking(r)
        | NBlock::Compaction(r) => Some((r.item, Side::Own)),
        NBlock::ToolUse(c) if c.n == 0 => Some((c.item, Side::Call)),
        NBlock::ToolResult(c) if c.n == 0 => Some((c.item, Side::Own)),
        _ => None,
    }
}

/// The member entry of an item whose `side` is as recorded: an unchanged item, or for
/// a tool call an item whose arguments are still the recorded ones (a rule that capped
/// or aged the result left the call as it was).
fn member<'n>(nat: &'n Native<'_>, item: &Item<'_>, side: Side) -> Option<&'n Member<'n>> {
    if item.attached_from().is_some() {
        return None;
    }
    let m = nat.nodes.get(item.source_node_id().esc)?;
    let as_recorded = item.unchanged()
        || (side == Side::Call
            && m.args
                .as_deref()
                .is_some_and(|a| item.tool_input().raw() == a));
    as_recorded.then_some(m)
}

/// The recorded elements a unit's blocks are exactly the content of, as a range, or
/// `None`.  Redacted thinking names no item: it neither proves nor breaks a match.
pub fn unit_elements(nat: &Native<'_>, blocks: &[NBlock<'_>]) -> Option<Fit> {
    // (item, side, range) of each member seen, once each.
    let mut seen: Vec<(*const u8, Side, (u32, u32))> = Vec::new();
    let mut lo = u32::MAX;
    let mut hi = 0u32;
    let mut skipped = 0usize;
    for b in blocks {
        if matches!(b, NBlock::Redacted(_)) {
            continue;
        }
        let (item, side) = origin(b)?;
        let m = member(nat, &item, side)?;
        if m.skip || (side == Side::Call && m.call_skip) {
            skipped += 1;
            continue;
        }
        let range = match side {
            Side::Own => m.el?,
            Side::Call => m.call?,
        };
        let key = item.source_node_id().esc.as_ptr();
        if !seen.iter().any(|&(k, s, _)| k == key && s == side) {
            seen.push((key, side, range));
        }
        lo = lo.min(range.0);
        hi = hi.max(range.1);
    }
    if skipped > 0 {
        // Not sent at all, or partly: nothing to write, or not as recorded.
        return seen.is_empty().then_some(Fit::Skipped);
    }
    if seen.is_empty() || hi as usize > nat.elements.len() || lo >= hi {
        return None;
    }
    // Every element of the run has all its members here (ranges are contiguous by
    // construction, so counting per element proves the run complete).
    (lo..hi)
        .all(|e| {
            let here = seen
                .iter()
                .filter(|&&(_, _, (a, b))| a <= e && e < b)
                .count();
            nat.members.get(e as usize).copied() == Some(here as u32)
        })
        .then_some(Fit::Elements(lo, hi))
}

/// How a unit is written from the recording (`unit_elements`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// As the recorded elements `[a, b)`.
    Elements(u32, u32),
    /// Not at all: the request did not send it (`Member::skip`).
    Skipped,
}

/// Write recorded elements `range` as list entries.
pub fn write_elements(w: &mut Json, nat: &Native<'_>, range: (u32, u32), st: &mut State) {
    for e in range.0..range.1 {
        w.sep(&mut st.first);
        w.raw(nat.elements[e as usize].get());
        st.count += 1;
    }
}

/// Set each unit's `native` range where it is written as recorded; `from` is the
/// first element after those the head writes.  Recorded elements that hold no member
/// (an empty message, a turn that showed nothing) go with the unit written as
/// recorded after them (or before them, at the end), so the recorded list stays whole
/// where the units around them are; then a conversation written as recorded from its
/// first element needs no opening placeholder.
pub fn mark_units<'a>(plan: &mut Plan<'a>, nat: &'a Native<'a>, from: u32) {
    let empty = |a: u32, b: u32| (a..b).all(|e| nat.members.get(e as usize) == Some(&0));
    let end = nat.elements.len() as u32;
    let mut next = Some(from);
    for i in 0..plan.units.len() {
        let (_, blocks, _) = plan.unit(i);
        let mut range = match unit_elements(nat, blocks) {
            Some(Fit::Elements(a, b)) => Some((a, b)),
            // Written as nothing, where the recorded list is still to begin.
            Some(Fit::Skipped) => next.map(|n| (n, n)),
            None if is_placeholder(blocks)
                && plan.units.len() == 1
                && from < end
                && empty(from, end) =>
            {
                // Nothing to say but the renderer's opening: the recording's (empty)
                // elements instead, when they are all there is.
                Some((from, end))
            }
            None => None,
        };
        if let (Some((a, b)), Some(n)) = (range, next) {
            if n < a && empty(n, a) {
                range = Some((n, b));
            }
        }
        next = range.map(|r| r.1);
        plan.units[i].native = range;
    }
    if let Some(last) = plan.units.last_mut() {
        if let Some((a, b)) = last.native {
            if b < end && empty(b, end) {
                last.native = Some((a, end));
            }
        }
    }
    if plan
        .units
        .first()
        .and_then(|u| u.native)
        .is_some_and(|(a, _)| a == from)
    {
        plan.head.opening = false;
    }
    // Responses: an input recorded as one string is written as that string.
    if let Some(text) = nat.input_text {
        let mut written = plan.units.iter().map(|u| u.native);
        let whole = written.clone().all(|r| r.is_some())
            && written
                .by_ref()
                .flatten()
                .filter(|(a, b)| a < b)
                .eq([(0, 1)]);
        if whole && from == 0 && end == 1 {
            plan.head.input_text = Some(text.get());
        }
    }
}

/// Whether a unit is only the renderer's own opening text (`super::OPENING_PLACEHOLDER`).
fn is_placeholder(blocks: &[NBlock<'_>]) -> bool {
    matches!(blocks, [NBlock::Text(Txt::Own(t))] if t == super::OPENING_PLACEHOLDER)
}

/// How the system blocks are written in their recorded form, if they are: as the
/// recorded system field (`field`: its key and value), or as recorded list elements
/// leading the conversation (`elements`: Chat's system messages, Responses' system
/// items).  Held as the recorded text, so two heads that are equal write the same bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NativeSys<'a> {
    pub field: Option<(&'a str, &'a str)>,
    pub elements: Vec<&'a str>,
}

/// The recorded form of the system blocks: every block an unchanged item's, the
/// field's items all of the recorded system nodes, and list elements a run from the
/// first (a system message later in the list stood elsewhere: canonical then).
pub fn system<'a>(nat: &'a Native<'a>, sys: &[Sys<'_>]) -> Option<NativeSys<'a>> {
    if sys.is_empty() {
        // A system field recorded empty (`"system": []`): no node holds it, and it was
        // sent.
        return match &nat.system {
            Some(f) if nat.system_nodes == 0 => Some(NativeSys {
                field: Some((&*f.key, f.value.get())),
                elements: Vec::new(),
            }),
            _ => None,
        };
    }
    let mut field = 0u32;
    let mut hi = 0u32;
    let mut listed = 0u32;
    let mut skipped = 0usize;
    for s in sys {
        let Txt::Item(item) = &s.text else {
            return None;
        };
        let m = member(nat, item, Side::Own)?;
        if m.skip {
            skipped += 1;
        } else if m.sys {
            field += 1;
        } else {
            let (a, b) = m.el?;
            if a != hi || b as usize > nat.elements.len() {
                return None;
            }
            hi = b;
            listed += 1;
        }
    }
    if skipped > 0 {
        // Instructions of the chain a request continued: not sent again.
        return (skipped == sys.len()).then(NativeSys::default);
    }
    if field > 0 && (nat.system.is_none() || field != nat.system_nodes) {
        return None;
    }
    // Field blocks come first (L0), list elements after them.
    if field > 0 && listed > 0 && sys.iter().position(|s| !is_field(nat, s)) != Some(field as usize)
    {
        return None;
    }
    let field = match (&nat.system, field > 0) {
        (Some(f), true) => Some((&*f.key, f.value.get())),
        _ => None,
    };
    let elements = nat.elements[..(hi as usize).min(nat.elements.len())]
        .iter()
        .map(|e| e.get())
        .collect();
    Some(NativeSys { field, elements })
}

fn is_field(nat: &Native<'_>, s: &Sys<'_>) -> bool {
    match &s.text {
        Txt::Item(item) => member(nat, item, Side::Own).is_some_and(|m| m.sys),
        _ => false,
    }
}

/// Anthropic's breakpoints as the recording placed them: the system blocks whose
/// recorded blocks carried one, and per unit the offsets of the last block of each
/// member whose recorded blocks did.
pub fn recorded_breakpoints(
    nat: &Native<'_>,
    sys: &[Sys<'_>],
    plan: Option<&Plan<'_>>,
) -> (Vec<usize>, Vec<(usize, usize)>) {
    let sys_bps = sys
        .iter()
        .enumerate()
        .filter(|(_, s)| match &s.text {
            Txt::Item(item) => nat
                .nodes
                .get(item.source_node_id().esc)
                .is_some_and(|m| m.bp),
            _ => false,
        })
        .map(|(i, _)| i)
        .collect();
    let mut msg_bps = Vec::new();
    let Some(plan) = plan else {
        return (sys_bps, msg_bps);
    };
    for u in 0..plan.units.len() {
        let (_, blocks, _) = plan.unit(u);
        for (bi, b) in blocks.iter().enumerate() {
            let Some((item, side)) = origin(b) else {
                continue;
            };
            let Some(m) = nat.nodes.get(item.source_node_id().esc) else {
                continue;
            };
            let marked = match side {
                Side::Own => m.bp,
                Side::Call => m.call_bp,
            };
            // The member's last block in the unit.
            let last = blocks[bi + 1..]
                .iter()
                .all(|o| origin(o).is_none_or(|(i, s)| !(i.same(&item) && s == side)));
            if marked && last && b.cacheable() {
                msg_bps.push((u, bi));
            }
        }
    }
    (sys_bps, msg_bps)
}

/// Write `,"key":value` of the system field as recorded, when the head says it goes
/// out so (`NativeSys::field`); returns whether it did.
pub fn write_system_field(w: &mut Json, h: &Head<'_>) -> bool {
    let Some((key, value)) = h.native_sys.as_ref().and_then(|n| n.field) else {
        return false;
    };
    w.raw(",");
    w.str(key);
    w.raw(":");
    w.raw(value);
    true
}

/// Write `,"tools":…` as recorded, when the options replay a recording of `wire` that
/// carries its tools; returns whether it did.
pub fn write_tools(w: &mut Json, opts: &Options<'_>, wire: Wire) -> bool {
    let Some(tools) = opts.native_for(wire.name()).and_then(|n| n.tools) else {
        return false;
    };
    w.raw(",\"tools\":");
    w.raw(tools.get());
    true
}
