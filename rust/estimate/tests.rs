use super::*;

fn est(raws: &[f64]) -> Estimate {
    let mut e = Estimate {
        keys: (0..raws.len() as u128).collect(),
        raws: raws.to_vec(),
        breakpoints: Vec::new(),
        tool_prompt: 0,
        framing: 0.0,
        images: 0,
        content: 0.0,
        prefix: 0,
        tokens: Vec::new(),
        input_tokens: 0,
        unknown_images: 0,
        unknown_extra: 0,
        unknown_documents: 0,
    };
    e.round();
    e
}

#[test]
fn the_running_total_is_rounded_half_to_even() {
    // Python: round(0.5) == 0, round(1.5) == 2, round(2.5) == 2.
    let e = est(&[0.5, 1.0, 1.0]);
    assert_eq!(e.tokens, vec![0, 2, 0]);
    assert_eq!(e.input_tokens, 2);
    let p = e.with_prefix(1);
    assert_eq!(p.tokens, vec![1, 1, 0, 2]); // totals 1, 1.5 → 2, 2.5 → 2, 3.5 → 4
    assert_eq!(p.input_tokens, 4);
    assert_eq!(p.tokens.iter().sum::<u64>(), p.input_tokens);
}

#[test]
fn shared_prefix_counts_this_requests_tokens() {
    let a = est(&[10.0, 20.0, 30.0]);
    let mut b = est(&[10.0, 25.0, 5.0]);
    b.keys[2] = 99;
    assert_eq!(b.shared_prefix(&a), (2, 35));
    assert_eq!(b.with_prefix(7).shared_prefix(&a.with_prefix(3)), (3, 42));
    assert_eq!(b.with_prefix(7).shared_prefix(&a), (0, 0));
}

#[test]
fn pdf_pages_are_counted_as_the_specification_counts_them() {
    // base64 of: /Type /Pages (not a page), /Type /Page, /Type\n/Page/Parent, /Type /Pagex.
    let b64 = "JVBERi0xLjQKMSAwIG9iaiA8PCAvVHlwZSAvUGFnZXMgL0tpZHMgWzIgMCBSIDMgMCBSXSA+PgoyIDAgb2JqIDw8IC9UeXBlIC9QYWdlID4+CjMgMCBvYmogPDwgL1R5cGUKL1BhZ2UvUGFyZW50IDEgMCBSID4+CjQgMCBvYmogPDwgL1R5cGUgL1BhZ2V4ID4+";
    assert_eq!(images::pdf_pages(b64), 2);
    assert_eq!(images::pdf_pages("not base64 at all!"), 0);
}
