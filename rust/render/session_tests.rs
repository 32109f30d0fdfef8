//! Incremental rendering gives the full render's bytes, and reuses what it can prove.

use serde_json::{json, Value};

use super::{render_session, Reuse};
use crate::commit::{decode_commit, decode_items, Items, Shared, State};
use crate::render::input::{parse_options, Options};
use crate::render::{render_request, Wire};

fn commit(items: &[Value]) -> Vec<u8> {
    rmp_serde::to_vec_named(&json!({"id": "c", "items": items})).unwrap()
}

const OPTS: &str = r#"{"model":"m","max_tokens":100,"system":[{"text":"You are terse.","layer":0}],"tools":[{"name":"ls","description":"list","input_schema":{"type":"object"}}]}"#;

/// Render `commits` as one session with `opts[k]` for request k, check every body and
/// breakdown against a full render, and return how many leading bytes each request
/// reused.
fn check(wire: Wire, commits: &[Vec<u8>], opts: &[&str]) -> Vec<usize> {
    let items: Vec<Items> = commits.iter().map(|c| decode_commit(c).unwrap()).collect();
    check_items(wire, commits, &items, opts)
        .iter()
        .map(|r| r.head)
        .collect()
}

/// `check` of prepared items, returning what each request reused.  Equal option texts
/// are parsed once (as the bindings do), so a tail can be reused.
fn check_items(wire: Wire, commits: &[Vec<u8>], items: &[Items], opts: &[&str]) -> Vec<Reuse> {
    let mut texts: Vec<&str> = opts.to_vec();
    texts.dedup();
    let options: Vec<Options<'_>> = texts
        .iter()
        .map(|o| parse_options(o.as_bytes()).unwrap())
        .collect();
    let requests: Vec<(&[Shared], &Options<'_>)> = items
        .iter()
        .zip(opts)
        .map(|(i, o)| {
            (
                i.as_slice(),
                &options[texts.iter().position(|t| t == o).unwrap()],
            )
        })
        .collect();
    let got = render_session(wire, &requests, None);
    assert_eq!(got.len(), commits.len());
    for (k, (r, _)) in got.iter().enumerate() {
        let full = render_request(wire, &commits[k], opts[k].as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&r.body),
            String::from_utf8_lossy(&full.body),
            "{wire:?} request {k}"
        );
        assert_eq!(r.meta, full.meta, "{wire:?} request {k}");
    }
    got.iter().map(|(_, reuse)| *reuse).collect()
}

/// A conversation of `turns` turns, each a question, an answer with a tool call, its
/// result and a closing answer.
fn turns(turns: usize) -> Vec<Value> {
    let mut items = vec![];
    for i in 0..turns {
        items.push(json!({"source_node_id": format!("u{i}"), "role": "user", "rendered": format!("question {i}")}));
        items.push(json!({"source_node_id": format!("a{i}"), "role": "assistant", "rendered": "let me look"}));
        items.push(
            json!({"source_node_id": format!("t{i}"), "role": "tool", "name": "ls",
            "caller": format!("a{i}"), "tool_use_id": format!("c{i}"), "tool_input": "{\"p\":1}",
            "rendered": format!("result {i} \"quoted\"\n")}),
        );
        items.push(json!({"source_node_id": format!("b{i}"), "role": "assistant", "rendered": format!("answer {i}  ")}));
    }
    items
}

/// Every prefix of `items` that ends a request (after a user message or a result).
fn growing(items: &[Value]) -> Vec<Vec<u8>> {
    (1..=items.len())
        .filter(|&k| items[k - 1]["role"] != "assistant" || k == items.len())
        .map(|k| commit(&items[..k]))
        .collect()
}

#[test]
fn a_growing_session_reuses_its_prefix_on_every_wire() {
    let commits = growing(&turns(6));
    let opts = vec![OPTS; commits.len()];
    for wire in Wire::ALL {
        let reuse = check(wire, &commits, &opts);
        assert_eq!(reuse[0], 0);
        // Every later request starts from the one before, and reuses more as the
        // session grows (Anthropic: up to the message before the breakpoints, which
        // move to the new tail, so not always more).
        assert!(reuse[1..].iter().all(|&r| r > 0), "{wire:?} {reuse:?}");
        if wire != Wire::Anthropic {
            assert!(
                reuse.windows(2).skip(1).all(|w| w[1] > w[0]),
                "{wire:?} {reuse:?}"
            );
        }
        assert!(reuse[reuse.len() - 1] > reuse[1] * 4, "{wire:?} {reuse:?}");
    }
}

#[test]
fn anthropic_breakpoints_and_the_trimmed_prefill_are_written_again() {
    // The last message carries a breakpoint and the one two before it too; a final
    // assistant text is trimmed.  None of that may be reused once it is not last.
    let items = turns(4);
    let commits: Vec<Vec<u8>> = (1..=items.len()).map(|k| commit(&items[..k])).collect();
    let opts = vec![OPTS; commits.len()];
    let reuse = check(Wire::Anthropic, &commits, &opts);
    assert!(reuse[1..].iter().all(|&r| r > 0), "{reuse:?}");
    let no_cache = r#"{"model":"m","cache":false}"#;
    check(Wire::Anthropic, &commits, &vec![no_cache; commits.len()]);
}

#[test]
fn a_change_inside_the_conversation_is_written_from_there() {
    let items = turns(5);
    let mut aged = items.clone();
    aged[2]["state"] = json!("aged");
    aged[2]["rendered"] = json!("[aged]");
    let commits = vec![commit(&items), commit(&aged), commit(&items)];
    for wire in Wire::ALL {
        let reuse = check(wire, &commits, &[OPTS; 3]);
        let whole = render_request(wire, &commits[0], OPTS.as_bytes())
            .unwrap()
            .body
            .len();
        assert!(reuse[1] > 0 && reuse[1] < whole / 2, "{wire:?} {reuse:?}");
    }
}

#[test]
fn a_new_head_shares_nothing_but_gemini_keeps_its_contents() {
    // A system item arriving mid-conversation joins the system blocks; another model
    // changes the head too.  Gemini writes both after its contents.
    let items = turns(3);
    let mut with_system = items.clone();
    with_system.push(json!({"source_node_id": "s1", "role": "system", "rendered": "now in /tmp"}));
    with_system.push(json!({"source_node_id": "u9", "role": "user", "rendered": "go"}));
    let other_model = OPTS.replace("\"m\"", "\"m2\"");
    let commits = vec![commit(&items), commit(&with_system), commit(&with_system)];
    let opts = [OPTS, OPTS, other_model.as_str()];
    for wire in Wire::ALL {
        let reuse = check(wire, &commits, &opts);
        if wire == Wire::Gemini {
            assert!(reuse[1] > 0 && reuse[2] > 0, "{reuse:?}");
        } else {
            assert_eq!(reuse[1..], [0, 0], "{wire:?}");
        }
    }
}

#[test]
fn a_compaction_moves_the_start_of_its_vendors_request() {
    let mut items = turns(3);
    let before = commit(&items);
    items.push(json!({"source_node_id": "u8", "role": "user", "rendered": "go on"}));
    items.push(
        json!({"source_node_id": "a8", "role": "assistant", "rendered": "ok",
        "blocks": [
            {"type": "compaction", "content": "SUMMARY", "signature": "sig"},
            {"type": "compaction", "encrypted_content": "ENC", "vendor": "openai"},
            {"type": "text", "text": "ok"}]}),
    );
    items.push(json!({"source_node_id": "u9", "role": "user", "rendered": "next"}));
    let after = commit(&items);
    items.push(json!({"source_node_id": "a9", "role": "assistant", "rendered": "fine"}));
    items.push(json!({"source_node_id": "u10", "role": "user", "rendered": "more"}));
    let later = commit(&items);
    for wire in Wire::ALL {
        let reuse = check(
            wire,
            &[before.clone(), after.clone(), later.clone()],
            &[OPTS; 3],
        );
        // The vendor's request starts at its block: Anthropic's now opens with the
        // placeholder turn (another head), Responses' input list starts again.
        let body =
            String::from_utf8(render_request(wire, &after, OPTS.as_bytes()).unwrap().body).unwrap();
        match wire {
            Wire::Anthropic => assert_eq!(reuse[1], 0),
            Wire::OpenAiResponses => assert_eq!(reuse[1], body.find("\"input\":[").unwrap() + 9),
            _ => assert!(reuse[1] > body.len() / 2, "{wire:?} {reuse:?}"),
        }
        assert!(reuse[2] > body.len() / 2, "{wire:?} {reuse:?}");
    }
}

#[test]
fn gemini_merged_contents_and_signatures() {
    // A model turn of signatures only is dropped, which puts two user turns side by
    // side: one content.  The next request adds to the merged content.
    let items = [
        json!({"source_node_id": "u1", "role": "user", "rendered": "hi"}),
        json!({"source_node_id": "a1", "role": "assistant", "rendered": "",
            "blocks": [{"type": "thinking", "thinking": "", "signature": "S1", "vendor": "gemini"}]}),
        json!({"source_node_id": "u2", "role": "user", "rendered": "again"}),
        json!({"source_node_id": "a2", "role": "assistant", "rendered": "yes",
            "blocks": [{"type": "thinking", "thinking": "", "signature": "S2", "vendor": "gemini"},
                       {"type": "text", "text": "yes"}]}),
        json!({"source_node_id": "u3", "role": "user", "rendered": "and"}),
    ];
    let commits: Vec<Vec<u8>> = (1..=items.len()).map(|k| commit(&items[..k])).collect();
    let reuse = check(Wire::Gemini, &commits, &vec![OPTS; commits.len()]);
    assert!(reuse[3] > 0 && reuse[4] > reuse[3], "{reuse:?}");
}

#[test]
fn items_prepared_apart_are_the_same_only_by_their_bytes() {
    let commits = growing(&turns(3));
    let opts = vec![OPTS; commits.len()];
    // Decoded from bytes, each commit's items carry their bytes: equal ones are proven
    // the same even when prepared apart (the content cache cleared between them).
    let apart: Vec<Items> = commits
        .iter()
        .map(|c| {
            crate::commit::cache::clear();
            decode_commit(c).unwrap()
        })
        .collect();
    let reuse = check_items(Wire::OpenAiChat, &commits, &apart, &opts);
    assert!(reuse[1..].iter().all(|r| r.head > 0), "{reuse:?}");
    // A bare item list keeps no bytes (the bindings find such items by identity):
    // items prepared apart prove nothing, so only the head and the first question
    // (a text block, equal as a string) are reused, never the first tool call.
    let bare: Vec<Items> = commits
        .iter()
        .map(|c| {
            let v: Value = rmp_serde::from_slice(c).unwrap();
            decode_items(&rmp_serde::to_vec_named(&v["items"]).unwrap(), |k| {
                format!("items[{k}]")
            })
            .unwrap()
        })
        .collect();
    let reuse: Vec<usize> = check_items(Wire::OpenAiChat, &commits, &bare, &opts)
        .iter()
        .map(|r| r.head)
        .collect();
    let first = render_request(Wire::OpenAiChat, &commits[1], OPTS.as_bytes()).unwrap();
    let question = String::from_utf8(first.body)
        .unwrap()
        .find(",{\"role\":\"assistant\"")
        .unwrap();
    assert!(reuse[1..].iter().all(|&r| r == question), "{reuse:?}");
}

#[test]
fn an_empty_session_and_repeated_requests() {
    let empty = commit(&[]);
    let one = commit(&turns(1));
    let commits = vec![empty.clone(), one.clone(), one.clone(), empty];
    for wire in Wire::ALL {
        let reuse = check(wire, &commits, &[OPTS; 4]);
        let whole = render_request(wire, &one, OPTS.as_bytes())
            .unwrap()
            .body
            .len();
        // The same request again reuses every message (only the tail is written).
        assert!(reuse[2] > whole / 2, "{wire:?} {reuse:?}");
    }
}

#[test]
fn the_tail_is_reused_while_its_options_and_inputs_stay() {
    let items = turns(3);
    let mut commits = growing(&items);
    // A leading system item joins L0: Anthropic's tools lose their breakpoint (it goes
    // to the system block), Gemini's system instruction changes; the tails of the
    // others stay.
    let mut with_system =
        vec![json!({"source_node_id": "s0", "role": "system", "rendered": "rules"})];
    with_system.extend(items.iter().cloned());
    commits.push(commit(&with_system));
    commits.push(commit(&with_system));
    let no_system = r#"{"model":"m","tools":[{"name":"ls","input_schema":{"type":"object"}}]}"#;
    let mut opts = vec![no_system; commits.len()];
    let other = no_system.replace("\"m\"", "\"m\" ");
    opts.push(&other); // the same options in another text: not proven the same
    commits.push(commit(&with_system));
    let last = commits.len() - 1;
    for wire in Wire::ALL {
        let items: Vec<Items> = commits.iter().map(|c| decode_commit(c).unwrap()).collect();
        let reuse = check_items(wire, &commits, &items, &opts);
        assert!(reuse[0].tail.is_none());
        assert!(
            reuse[1..last - 2].iter().all(|r| r.tail.is_some()),
            "{wire:?} {reuse:?}"
        );
        let changed = matches!(wire, Wire::Anthropic | Wire::Gemini);
        assert_eq!(
            reuse[last - 2].tail.is_none(),
            changed,
            "{wire:?} {reuse:?}"
        );
        assert!(reuse[last - 1].tail.is_some(), "{wire:?} {reuse:?}");
        assert!(reuse[last].tail.is_none(), "{wire:?} {reuse:?}");
    }
}

/// A frame for Anthropic's estimate (no tools, no images).
fn anthropic_frame() -> crate::estimate::Frame {
    crate::estimate::Frame::parse(
        br#"{"wire":"anthropic-messages","encoding":"o200k_base","calibration":1.1,
        "structured_calibration":1.3,"framing":{"tool_block":3.5,"message":2.5,
        "request":4.0,"line_break":0.5},"images":{"kind":"none"}}"#,
    )
    .unwrap()
}

#[test]
fn a_long_message_that_grows_at_its_end_is_written_and_estimated_from_there() {
    // One assistant message of forty blocks (neighbours of one role merge), then the
    // user's turn; each request adds a block at the end of the long message and a
    // new user turn, so the long message changes every time.
    let mut items = vec![json!({"source_node_id": "u0", "role": "user", "rendered": "task"})];
    for i in 0..40 {
        items.push(
            json!({"source_node_id": format!("s{i}"), "role": "assistant",
            "rendered": format!("summary {i}: read module {i}\nand found nothing")}),
        );
    }
    let mut commits = vec![];
    for k in 0..4 {
        let mut c = items.clone();
        for i in 40..40 + k {
            c.push(
                json!({"source_node_id": format!("s{i}"), "role": "assistant",
                "rendered": format!("summary {i}: read module {i}\nand found nothing")}),
            );
        }
        c.push(json!({"source_node_id": format!("q{k}"), "role": "user", "rendered": format!("go on {k}")}));
        commits.push(commit(&c));
    }
    let frame = anthropic_frame();
    for opts in [OPTS, r#"{"model":"m","cache":false}"#] {
        let items: Vec<Items> = commits.iter().map(|c| decode_commit(c).unwrap()).collect();
        let options = parse_options(opts.as_bytes()).unwrap();
        let requests: Vec<(&[Shared], &Options<'_>)> =
            items.iter().map(|i| (i.as_slice(), &options)).collect();
        let got = render_session(Wire::Anthropic, &requests, Some(&frame));
        for (k, (r, reuse)) in got.iter().enumerate() {
            let full = crate::render::write_request_estimated(
                Wire::Anthropic,
                &items[k],
                opts.as_bytes(),
                Vec::new(),
                Some(&frame),
            )
            .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&r.body),
                String::from_utf8_lossy(&full.body),
                "request {k}"
            );
            assert_eq!(r.meta, full.meta, "request {k}");
            assert_eq!(r.estimate, full.estimate, "request {k}");
            if k > 0 {
                // Everything up to the long message's new block is copied.
                let body = String::from_utf8(full.body).unwrap();
                let new = body.find(&format!("summary {}:", 39 + k)).unwrap();
                assert!(
                    reuse.head > new - 40 && reuse.head < new,
                    "{k}: {reuse:?} {new}"
                );
            }
        }
    }
}

#[test]
fn a_breakpoint_that_moves_inside_a_shared_message_stops_the_copy_before_it() {
    // The breakpoint two messages before the end lands on the long message's last
    // block in one request and not in the next: the blocks before it are copied, the
    // block itself is written again (with or without its marker).
    let mut items = vec![json!({"source_node_id": "u0", "role": "user", "rendered": "task"})];
    for i in 0..10 {
        items.push(json!({"source_node_id": format!("s{i}"), "role": "assistant", "rendered": format!("part {i}")}));
    }
    let mut later = items.clone();
    items.push(json!({"source_node_id": "u1", "role": "user", "rendered": "one"}));
    items.push(json!({"source_node_id": "a1", "role": "assistant", "rendered": "ok"}));
    items.push(json!({"source_node_id": "u2", "role": "user", "rendered": "two"}));
    later.push(json!({"source_node_id": "s10", "role": "assistant", "rendered": "part 10"}));
    later.push(json!({"source_node_id": "u3", "role": "user", "rendered": "three"}));
    let commits = vec![commit(&items), commit(&later), commit(&items)];
    let reuse = check(Wire::Anthropic, &commits, &[OPTS; 3]);
    assert!(reuse[1] > 0 && reuse[2] > 0, "{reuse:?}");
}

/// A session folded run by run, as the summarize rule folds it: the turns before the
/// newest two become `summarized` and a summary item is appended after the previous
/// summaries every few requests.
fn folded_session(requests: usize) -> Vec<Vec<u8>> {
    let all = turns(requests + 2);
    let mut out = Vec::new();
    for r in 1..=requests {
        let shown_from = 4 * r.saturating_sub(2);
        let mut items: Vec<Value> = Vec::new();
        for (k, it) in all[..4 * r].iter().enumerate() {
            let mut it = it.clone();
            if k < shown_from {
                it["state"] = "summarized".into();
            }
            items.push(it);
            // A summary after every second folded turn.
            if k < shown_from && k % 8 == 7 {
                items.push(
                    json!({"source_node_id": format!("sm_{k}"), "role": "assistant",
                    "state": "summary", "rendered": format!("summary up to {k}")}),
                );
            }
        }
        out.push(commit(&items));
    }
    out
}

#[test]
fn a_folded_item_is_known_by_its_handle_on_both_decoding_paths() {
    let mut folded = 0;
    for c in folded_session(6) {
        let by_commit = decode_commit(&c).unwrap();
        let v: Value = rmp_serde::from_slice(&c).unwrap();
        let bare = rmp_serde::to_vec_named(&v["items"]).unwrap();
        let by_items = decode_items(&bare, |k| format!("items[{k}]")).unwrap();
        for items in [&by_commit, &by_items] {
            for s in items.iter() {
                assert_eq!(s.folded(), s.get().state() == State::Summarized);
            }
        }
        folded += by_commit.iter().filter(|s| s.folded()).count();
    }
    assert!(folded > 0);
}

#[test]
fn a_session_folded_run_by_run_renders_the_full_bytes_on_every_wire() {
    let commits = folded_session(8);
    let opts = vec![OPTS; commits.len()];
    for wire in Wire::ALL {
        // `check` compares every body and breakdown with a full render; in a debug
        // build `neutral::build` also checks each skipped handle's state.
        let reuse = check(wire, &commits, &opts);
        assert_eq!(reuse.len(), commits.len());
    }
}
