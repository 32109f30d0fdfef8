"""The Rust counter against the tiktoken oracle: every corpus text, edge cases, the cache.

The oracle is ``get_tokenizer("tiktoken:<encoding>")``: Python tiktoken built offline
from the ranks in ``_core``.  The ranks themselves are checked against the sha256 that
tiktoken publishes for the official rank files, and the patterns against tiktoken's
own encoding definitions, so the oracle is tiktoken, not a copy of our assumptions.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from tests.corpus import CORPUS, FIRST, entries

from ctxrules import _core
from ctxrules.errors import TokenizerError
from ctxrules.tokenizers import (
    ENCODINGS,
    RustTokenizer,
    _tiktoken,
    cache_stats,
    clean_text,
    clear_cache,
    get_tokenizer,
)


def corpus_files(root: Path) -> list[Path]:
    """The corpus's first files and, of every other (kind, wire) of its MANIFEST, the
    first file, and SOURCES.md (prose and tables): each format and wire counted,
    without counting all 18 MB twice per run."""
    seen = {(e["kind"], str(e["wire"])) for e in entries() if e["path"] in FIRST}
    picked = [root / f for f in FIRST] + [root / "SOURCES.md"]
    for e in entries():
        if (e["kind"], str(e["wire"])) not in seen:
            seen.add((e["kind"], str(e["wire"])))
            picked.append(root / e["path"])
    return picked


def strings_in(value: object) -> Iterator[str]:
    """Every str in a parsed JSON/YAML value (keys too); JSON inside strings as well."""
    if isinstance(value, str):
        yield value
        if value[:1] in "{[":
            try:
                inner = json.loads(value)
            except ValueError:
                return
            yield from strings_in(inner)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings_in(k)
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)


class AnyTagLoader(yaml.SafeLoader):
    """The safe loader reading a value under any local or Python tag (dd-trace's
    ``!!python/object/apply:…istr`` header names, Ruby's ``!binary``) as the plain value."""


def _untagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> object:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)


AnyTagLoader.add_multi_constructor("!", _untagged)
AnyTagLoader.add_multi_constructor("tag:yaml.org,2002:python/", _untagged)


def json_values(line: str) -> Iterator[object]:
    """The JSON values of one line (a real transcript has a line with two glued)."""
    dec, pos = json.JSONDecoder(), 0
    while pos < len(line.rstrip()):
        value, pos = dec.raw_decode(line, pos)
        yield value


def texts_of(path: Path) -> list[str]:
    """The whole file, each line, and each string value (json/jsonl/yaml parsing)."""
    whole = path.read_text(encoding="utf-8")
    texts = [whole, *whole.splitlines(keepends=True)]
    if path.suffix == ".jsonl":
        for line in whole.splitlines():
            for value in json_values(line):
                texts.extend(strings_in(value))
    elif path.suffix in (".json", ".traj"):
        texts.extend(strings_in(json.loads(whole)))
    elif path.suffix in (".yaml", ".yml"):
        texts.extend(strings_in(yaml.load(whole, Loader=AnyTagLoader)))
    return texts


@pytest.fixture(scope="module", params=ENCODINGS)
def pair(request):
    """(ours, oracle) for one encoding."""
    return RustTokenizer(request.param), get_tokenizer(f"tiktoken:{request.param}")


def test_the_corpus_has_every_kind_of_file(corpus):
    suffixes = {p.suffix for p in corpus_files(corpus)}
    assert {".jsonl", ".json", ".traj", ".yaml", ".yml", ".httprr", ".md"} <= suffixes


@pytest.mark.parametrize("name", [str(p.relative_to(CORPUS)) for p in corpus_files(CORPUS)])
def test_every_corpus_text_counts_like_tiktoken(corpus, pair, name):
    ours, oracle = pair
    texts = texts_of(corpus / name)
    assert len(texts) > 2
    expected = [oracle.count(t) for t in texts]
    assert ours.count_batch(texts) == expected
    assert RustTokenizer(ours.encoding, cached=False).count_batch(texts) == expected
    # The single-text path on the largest few (one crossing each).
    for t in sorted(texts, key=len)[-3:]:
        assert ours.count(t) == oracle.count(t)


def test_ranks_are_the_official_files():
    """sha256 of the ranks in tiktoken's file format equals the hash tiktoken pins."""
    published = {
        "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    }
    for enc, sha in published.items():
        ranks = _core.encoding_ranks(enc)
        data = b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(ranks))
        assert hashlib.sha256(data).hexdigest() == sha, enc


def test_patterns_and_specials_are_tiktokens(monkeypatch):
    """Our offline definitions equal tiktoken's own, with its rank download stubbed out."""
    from tiktoken_ext import openai_public

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
    for enc in ENCODINGS:
        published = getattr(openai_public, enc)()
        assert _tiktoken._SPECS[enc] == (published["pat_str"], published["special_tokens"])


@pytest.mark.parametrize(
    "text",
    [
        "a\ud800b",
        "\udfff",
        "\ud83d\ude00 is a pair spelt as two code points",
        "end\ud800",
        "\ud800\ud800\ud800 \udc00x",
        "ok",
    ],
)
def test_lone_surrogates_count_like_tiktoken(pair, text):
    ours, oracle = pair
    assert ours.count(text) == oracle.count(text)
    assert ours.count_batch(["plain", text, ""]) == [
        oracle.count("plain"),
        oracle.count(text),
        0,
    ]


def test_clean_text_replaces_only_lone_surrogates():
    assert clean_text("a\ud800b") == "a\ufffdb"
    assert clean_text("\ud83d\ude00") == "\U0001f600"
    text = "valid ✓"
    assert clean_text(text) is text


def test_empty(pair):
    ours, oracle = pair
    assert ours.count("") == oracle.count("") == 0
    assert ours.count_batch([]) == []
    assert ours.count_batch([""]) == [0]


def test_ten_megabytes(corpus, pair):
    ours, oracle = pair
    base = "".join(p.read_text(encoding="utf-8") for p in corpus_files(corpus))
    text = (base * (10_000_000 // len(base.encode()) + 1))[:10_000_000]
    assert len(text.encode()) >= 10_000_000
    assert RustTokenizer(ours.encoding, cached=False).count(text) == oracle.count(text)


@pytest.mark.parametrize("char", ["a", " ", "\n", "1", "日", "😀", "\u0301", "."])
def test_one_repeated_character(pair, char):
    ours, oracle = pair
    for n in (1, 2, 3, 4, 1000, 20_000):
        assert ours.count(char * n) == oracle.count(char * n), n
    # A megabyte counts (linear time is the benchmark's business).
    megabyte = char * (1_000_000 // len(char.encode()))
    n = ours.count(megabyte)
    assert 0 < n <= len(megabyte.encode())
    assert ours.count_batch([megabyte, megabyte]) == [n, n]


def test_recount_is_served_from_the_cache():
    tok = RustTokenizer("o200k_base")
    text = "a text that is counted once and then looked up by its hash"
    clear_cache()
    assert cache_stats()[:3] == (0, 0, 0)
    n = tok.count(text)
    assert cache_stats()[:3] == (1, 0, 1)  # entries, hits, misses
    assert tok.count(text) == n
    assert cache_stats()[:3] == (1, 1, 1)
    # A batch of the seen text and a new one twice: one hit, two misses.
    assert tok.count_batch([text, "new", "new"])[0] == n
    stats = cache_stats()
    assert (stats.entries, stats.hits, stats.misses) == (2, 2, 3)
    assert tok.count_batch(["new"]) == [tok.count("new")]
    assert cache_stats().misses == 3
    # Uncached counting neither reads nor fills the cache.
    RustTokenizer("o200k_base", cached=False).count_batch(["unseen", text])
    assert cache_stats()[:3] == (2, 4, 3)
    # The other encoding is a separate entry, not a hit.
    RustTokenizer("cl100k_base").count(text)
    assert cache_stats().entries == 3
    clear_cache()
    assert cache_stats()[:3] == (0, 0, 0)
    assert cache_stats().capacity >= 100_000


def test_bad_input_is_a_tokenizer_error():
    tok = RustTokenizer("o200k_base")
    with pytest.raises(TokenizerError, match=r"texts\[1\].*bytes"):
        tok.count_batch(["ok", b"bytes"])  # type: ignore[list-item]
    with pytest.raises(TokenizerError, match="int"):
        tok.count(3)  # type: ignore[arg-type]
    with pytest.raises(TokenizerError, match="unknown encoding"):
        RustTokenizer("gpt2")
