"""Cache prediction by each vendor's rules, on hand-built requests.

Expected figures come from the rules themselves (minimum cacheable length, TTL, the
20-block look-back, OpenAI's 1,024 + 128-token steps), not from running the code.
"""

from __future__ import annotations

import pytest

from ctxrules.model import ContextCommit, ContextItem
from ctxrules.providers import get_provider, resolve_model
from ctxrules.providers.cache import predict_anthropic, predict_prefix
from ctxrules.providers.estimate import PromptEstimate, Segment
from ctxrules.render import explain


def est(*segments: tuple[str, int, str | None]) -> PromptEstimate:
    segs = tuple(Segment(key, tokens, bp) for key, tokens, bp in segments)
    return PromptEstimate(input_tokens=sum(s.tokens for s in segs), segments=segs, rules={})


# A previous request: system (1,500 tokens, breakpoint) + one message block (600).
PREV = est(("sys", 1500, "5m"), ("m1", 600, "5m"))
# This request: the same two, then one new block of 300 with the last breakpoint.
CUR = est(("sys", 1500, "5m"), ("m1", 600, None), ("m2", 300, "5m"))


def test_anthropic_reads_what_the_previous_request_wrote():
    p = predict_anthropic(PREV, CUR, elapsed=60.0, min_tokens=1024)
    # The previous request wrote prefixes of 1,500 and 2,100; the longest shared one is
    # 2,100 (m1's end, 1 block before this request's breakpoint); the rest is written.
    assert (p.read_tokens, p.write_tokens, p.shared_tokens) == (2100, 300, 2100)
    assert p.warm is True and p.ttl_seconds == 300.0


def test_anthropic_minimum_cacheable_length():
    # Opus 4.5's minimum is 4,096: no breakpoint's prefix (1,500 / 2,100 / 2,400) reaches it.
    p = predict_anthropic(PREV, CUR, elapsed=60.0, min_tokens=4096)
    assert (p.read_tokens, p.write_tokens) == (0, 0)
    assert "minimum" in p.reason
    # At 2,048 (Haiku 3.5) the system prefix alone is too short, but m1's end is not.
    p = predict_anthropic(None, CUR, elapsed=None, min_tokens=2048)
    assert (p.read_tokens, p.write_tokens) == (0, 2400)


@pytest.mark.parametrize(
    "ttl,elapsed,warm",
    [("5m", 299.0, True), ("5m", 301.0, False), ("1h", 3000.0, True), ("1h", 3601.0, False)],
)
def test_anthropic_ttl(ttl, elapsed, warm):
    prev = est(("sys", 1500, ttl), ("m1", 600, ttl))
    cur = est(("sys", 1500, ttl), ("m1", 600, None), ("m2", 300, ttl))
    p = predict_anthropic(prev, cur, elapsed=elapsed, min_tokens=1024)
    assert p.warm is warm
    # Warm: read 2,100 and write 300; expired: nothing read, all 2,400 written again.
    assert (p.read_tokens, p.write_tokens) == ((2100, 300) if warm else (0, 2400))


def test_anthropic_looks_back_at_most_20_blocks():
    prev = est(("sys", 2000, "5m"))
    head = [("sys", 2000, None)]  # the same block, without its breakpoint this time
    blocks = [(f"b{i}", 10, None) for i in range(21)]
    # Breakpoint 20 blocks after the cached one: found.
    near = est(*head, *blocks[:19], ("end", 10, "5m"))
    assert predict_anthropic(prev, near, elapsed=1.0, min_tokens=1024).read_tokens == 2000
    # 21 blocks after: beyond the look-back, nothing read.
    far = est(*head, *blocks[:20], ("end", 10, "5m"))
    p = predict_anthropic(prev, far, elapsed=1.0, min_tokens=1024)
    assert p.read_tokens == 0 and p.write_tokens == 2000 + 20 * 10 + 10


def test_anthropic_without_breakpoints_caches_nothing():
    a = est(("sys", 5000, None))
    p = predict_anthropic(a, a, elapsed=1.0, min_tokens=1024)
    assert (p.read_tokens, p.write_tokens, p.shared_tokens) == (0, 0, 5000)


@pytest.mark.parametrize(
    "shared,read",
    [
        (1023, 0),  # under 1,024: nothing cached
        (1024, 1024),
        (1151, 1024),  # 127 past the minimum: still the first step
        (1152, 1152),
        (1500, 1408),  # 1,024 + 3 x 128
        (5000, 4992),  # 1,024 + 31 x 128
    ],
)
def test_openai_caches_in_128_token_steps(shared, read):
    prev = est(("p", shared, None), ("old", 50, None))
    cur = est(("p", shared, None), ("new", 80, None))
    p = predict_prefix(prev, cur, elapsed=10.0, min_tokens=1024, step=128)
    assert (p.read_tokens, p.write_tokens) == (read, 0)


def test_openai_cache_expires_and_needs_a_previous_request():
    prev = est(("p", 3000, None))
    cur = est(("p", 3000, None), ("new", 10, None))
    assert predict_prefix(prev, cur, elapsed=301.0, min_tokens=1024, step=128).read_tokens == 0
    assert predict_prefix(None, cur, elapsed=None, min_tokens=1024, step=128).read_tokens == 0


def _big_commit(cid: str, *texts: str) -> ContextCommit:
    items = tuple(
        ContextItem(source_node_id=f"n{i}", role="user" if i % 2 == 0 else "assistant", rendered=t)
        for i, t in enumerate(texts)
    )
    return ContextCommit(
        id=cid, session_id="s", head_node_id=f"n{len(texts) - 1}", rules_version="rv", items=items
    )


def test_explain_follows_each_providers_rules():
    """One conversation, two requests a minute apart, four providers: the figures differ
    as each vendor's rules say (Anthropic writes at its breakpoints; OpenAI reads in
    steps and bills no writes; a plugin provider without rules predicts nothing)."""
    words = " ".join(f"word{i}" for i in range(3000))  # several thousand tokens
    prev = _big_commit("c1", words, "ok", "next question")
    cur = _big_commit("c2", words, "ok", "next question", "answer", "and one more")
    out = {
        p: explain(cur, p, previous=prev, elapsed_seconds=60.0)
        for p in ("anthropic", "openai-chat", "openai-responses", "gemini")
    }
    a = out["anthropic"]
    assert a["cache"]["rule"] == "anthropic-breakpoints"
    assert a["cache_read_tokens"] > 0 and a["cache_write_tokens"] > 0
    assert a["cache_read_tokens"] + a["cache_write_tokens"] <= a["input_tokens"]
    for p in ("openai-chat", "openai-responses"):
        o = out[p]
        assert o["cache"]["rule"] == "openai-automatic-prefix"
        assert o["cache_write_tokens"] == 0
        assert o["cache_read_tokens"] >= 1024 and (o["cache_read_tokens"] - 1024) % 128 == 0
    g = out["gemini"]
    assert g["cache"]["rule"] == "gemini-implicit" and g["cache_write_tokens"] == 0
    # An hour later every cache has expired.
    late = {p: explain(cur, p, previous=prev, elapsed_seconds=3600.0) for p in out}
    assert all(x["cache_read_tokens"] == 0 and x["cache"]["warm"] is False for x in late.values())
    # With Opus 4.5's 4,096-token minimum a short prompt is not cached at all.
    short = _big_commit("c3", "a short question")
    ex = explain(short, "anthropic", "claude-opus-4-5")
    assert resolve_model("anthropic:claude-opus-4-5").cache_min_tokens == 4096
    assert (ex["cache_read_tokens"], ex["cache_write_tokens"]) == (0, 0)
    assert "minimum" in ex["cache"]["reason"]


def test_a_provider_without_cache_rules_predicts_nothing():
    from ctxrules.providers import Provider

    class Plain(Provider):
        name = "plain"

    profile = resolve_model("anthropic:claude-sonnet-4-5")
    p = Plain().predict_cache(None, est(("a", 5000, "5m")), elapsed=None, profile=profile)
    assert (p.read_tokens, p.write_tokens, p.rule) == (0, 0, "none")
    # The built-ins name their vendor's rule.
    rules = {n: get_provider(n).cache_rule for n in ("anthropic", "openai-chat", "gemini")}
    assert rules == {
        "anthropic": "anthropic-breakpoints",
        "openai-chat": "openai-automatic-prefix",
        "gemini": "gemini-implicit",
    }


def test_a_model_switch_reads_nothing_from_the_cache():
    """The previous request went to another model: its cache is not this model's
    (the issue's 32,498 predicted reads where the provider read 0)."""
    words = " ".join(f"word{i}" for i in range(3000))
    prev = _big_commit("c1", words, "ok", "next question")
    cur = _big_commit("c2", words, "ok", "next question", "answer", "and one more")
    same = explain(cur, "anthropic", "claude-haiku-4-5", previous=prev, elapsed_seconds=60.0)
    switched = explain(
        cur,
        "anthropic",
        "claude-haiku-4-5",
        previous=prev,
        previous_model="claude-opus-4-6",
        elapsed_seconds=60.0,
    )
    assert same["cache_read_tokens"] > 0
    assert switched["cache_read_tokens"] == 0
    assert switched["cache_write_tokens"] == same["cache_read_tokens"] + same["cache_write_tokens"]
    assert "model switch" in switched["cache"]["reason"]
