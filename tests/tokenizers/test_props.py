"""Hypothesis: the Rust counter equals tiktoken on generated unicode.

The strategies aim at the pre-tokenisation pattern's corners: letter-case runs and
contractions (o200k splits on case), CJK, emoji with modifiers and joiners, combining
marks, digits next to letters, code, JSON, and runs of every kind of whitespace.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxrules.tokenizers import ENCODINGS, RustTokenizer, get_tokenizer

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WHITESPACE = " \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2003\u2028\u2029\u202f\u205f\u3000"
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", "'ſ", "'"]
CJK = "\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7a3"

cjk = st.from_regex(f"[{CJK}]{{1,12}}", fullmatch=True)
emoji = st.sampled_from(
    ["😀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "🧑‍💻", "❤️", "✋🏿", "🏳️‍🌈", "🔥🔥", "\U0001f9d1\u200d"]
)
marks = st.builds(
    lambda base, ms: base + "".join(ms),
    st.sampled_from(["e", "a", "", "ő", "न", " ", "1"]),
    st.lists(
        st.sampled_from(["\u0301", "\u0308", "\u0327", "\u20dd", "\u093f", "\u0e31"]), max_size=4
    ),
)
words = st.from_regex(r"[A-Za-zÀ-ÿǅΣσςЖж]{1,10}", fullmatch=True)
cased = st.builds(
    lambda w, c: w + c,
    st.sampled_from(["HTTPServer", "camelCase", "ALLCAPS", "Mc", "ǅx", "Ab"]),
    st.sampled_from([*CONTRACTIONS, ""]),
)
digits = st.from_regex(r"[0-9٠-٩①½]{1,8}", fullmatch=True)
spaces = st.text(alphabet=WHITESPACE, min_size=1, max_size=8)
punct = st.text(alphabet="!?.,:;/\\\"'{}[]()<>-_+=*&^%$#@`~|", min_size=1, max_size=6)
code = st.sampled_from(
    [
        "def f(x):\n    return x + 1\n",
        'fn main() {\n\tprintln!("{}", 1);\n}\n',
        "  if (a && b) { c++; }  \r\n",
        "SELECT * FROM t WHERE id=42;",
        "// comment\n/* block */\n",
        "x=1;y=2\n\n\n",
    ]
)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
json_text = st.builds(
    lambda v, indent, ascii_: json.dumps(v, indent=indent, ensure_ascii=ascii_),
    json_values,
    st.sampled_from([None, 2, "\t"]),
    st.booleans(),
)
fragment = cjk | emoji | marks | words | cased | digits | spaces | punct | code | json_text
mixed = st.lists(fragment, max_size=12).map("".join)
any_unicode = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)
with_surrogates = st.text(st.characters() | st.characters(categories=["Cs"]), max_size=40)


@pytest.fixture(scope="module", params=ENCODINGS)
def pair(request):
    """(ours uncached, oracle) for one encoding."""
    return (
        RustTokenizer(request.param, cached=False),
        get_tokenizer(f"tiktoken:{request.param}"),
    )


@SETTINGS
@given(text=mixed)
def test_mixed_fragments(pair, text):
    ours, oracle = pair
    assert ours.count(text) == oracle.count(text)


@SETTINGS
@given(text=any_unicode)
def test_any_unicode(pair, text):
    ours, oracle = pair
    assert ours.count(text) == oracle.count(text)


@SETTINGS
@given(text=with_surrogates)
def test_any_code_point_including_lone_surrogates(pair, text):
    ours, oracle = pair
    assert ours.count(text) == oracle.count(text)


@SETTINGS
@given(texts=st.lists(mixed | any_unicode, max_size=20))
def test_batch_equals_oracle(pair, texts):
    ours, oracle = pair
    expected = [oracle.count(t) for t in texts]
    assert ours.count_batch(texts) == expected
    assert RustTokenizer(ours.encoding).count_batch(texts) == expected
