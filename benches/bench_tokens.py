"""Token counting throughput: the Rust counter against tiktoken, on the same texts, same run.

Groups (one per encoding), each compared inside the group by pytest-benchmark's table:
- ``mixed-<enc>``: a 4 MB text mixed from the corpus, in ~4 KB chunks: tiktoken's
  ``len(encode_ordinary(chunk))`` per chunk, ours uncached per chunk (one core), ours as
  one uncached batch (rayon, both cores, GIL released);
- ``adversarial-<enc>``: 1 MB of one repeated character, ours and tiktoken;
- ``recount-<enc>``: the same chunks again as a cached batch (all hits) against the
  uncached batch;
- ``unicode-<enc>``: 300,000 random characters (CJK, Latin, Cyrillic, spaces, emoji),
  ours and tiktoken: nearly every piece is new, so this measures the BPE itself.

Every benchmark asserts its counts equal tiktoken's, so a fast wrong answer fails.
``make bench`` runs them for real; under ``make test`` they run once as tests.
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import pytest
from tests.corpus import FIRST

from ctxrules.tokenizers import ENCODINGS, RustTokenizer, cache_stats, clear_cache, get_tokenizer

MB = 1_000_000
CHUNK = 4096


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@functools.cache
def mixed_text(corpus: Path) -> str:
    """~4 MB: the corpus's message strings and raw lines (JSON, YAML, code), shuffled."""
    pieces: list[str] = []
    for path in sorted([corpus / f for f in FIRST] + [corpus / "SOURCES.md"]):
        raw = path.read_text(encoding="utf-8")
        pieces.extend(raw.splitlines(keepends=True))
        if path.suffix in (".json", ".traj"):
            pieces.extend(_strings(json.loads(raw)))
        elif path.suffix == ".jsonl":
            pieces.extend(
                s for line in raw.splitlines() if line for s in _strings(json.loads(line))
            )
    random.Random(7).shuffle(pieces)
    out, size = [], 0
    for p in pieces:
        out.append(p)
        size += len(p.encode())
        if size >= 4 * MB:
            break
    text = "\n".join(out)
    return text.encode()[: 4 * MB].decode("utf-8", "ignore")


@functools.cache
def chunks_of(corpus: Path) -> list[str]:
    text = mixed_text(corpus)
    return [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]


ADVERSARIAL = "a" * MB


@functools.cache
def random_unicode() -> str:
    """300,000 characters: 30 % CJK, 30 % a-z, 10 % Cyrillic, 15 % space, 15 % emoji."""
    rnd = random.Random(1)
    ranges = [(0x4E00, 0x9FFF)] * 6 + [(0x61, 0x7A)] * 6 + [(0x430, 0x44F)] * 2
    ranges += [(0x20, 0x20)] * 3 + [(0x1F600, 0x1F64F)] * 3
    return "".join(chr(rnd.randint(*rnd.choice(ranges))) for _ in range(300_000))


@functools.cache
def oracle(encoding: str):  # type: ignore[no-untyped-def]
    """The tiktoken ``Encoding`` (built offline from our ranks)."""
    return get_tokenizer(f"tiktoken:{encoding}").tiktoken_encoding


@functools.cache
def expected_chunks(corpus: Path, encoding: str) -> list[int]:
    enc = oracle(encoding)
    return [len(enc.encode_ordinary(c)) for c in chunks_of(corpus)]


@functools.cache
def expected_adversarial(encoding: str) -> int:
    return len(oracle(encoding).encode_ordinary(ADVERSARIAL))


@functools.cache
def uncached(encoding: str) -> RustTokenizer:
    """The Rust counter with its content cache off: every call tokenises."""
    return RustTokenizer(encoding, cached=False)


def megabytes(texts: list[str]) -> float:
    return sum(len(t.encode()) for t in texts) / MB


pytestmark = pytest.mark.parametrize("encoding", ENCODINGS)


def test_mixed_tiktoken(benchmark, corpus, encoding):
    chunks, enc = chunks_of(corpus), oracle(encoding)
    benchmark.group = f"mixed-{encoding}"
    benchmark.extra_info["MB"] = megabytes(chunks)
    counts = benchmark(lambda: [len(enc.encode_ordinary(c)) for c in chunks])
    assert counts == expected_chunks(corpus, encoding)


def test_mixed_ours_one_core(benchmark, corpus, encoding):
    chunks = chunks_of(corpus)
    benchmark.group = f"mixed-{encoding}"
    benchmark.extra_info["MB"] = megabytes(chunks)
    count = uncached(encoding).count
    counts = benchmark(lambda: [count(c) for c in chunks])
    assert counts == expected_chunks(corpus, encoding)


def test_mixed_ours_batch_two_cores(benchmark, corpus, encoding):
    chunks = chunks_of(corpus)
    benchmark.group = f"mixed-{encoding}"
    benchmark.extra_info["MB"] = megabytes(chunks)
    counts = benchmark(lambda: uncached(encoding).count_batch(chunks))
    assert counts == expected_chunks(corpus, encoding)


def test_adversarial_tiktoken(benchmark, encoding):
    enc = oracle(encoding)
    benchmark.group = f"adversarial-{encoding}"
    n = benchmark(lambda: len(enc.encode_ordinary(ADVERSARIAL)))
    assert n == expected_adversarial(encoding)


def test_adversarial_ours(benchmark, encoding):
    benchmark.group = f"adversarial-{encoding}"
    n = benchmark(lambda: uncached(encoding).count(ADVERSARIAL))
    assert n == expected_adversarial(encoding)


def test_recount_uncached_batch(benchmark, corpus, encoding):
    chunks = chunks_of(corpus)
    benchmark.group = f"recount-{encoding}"
    counts = benchmark(lambda: uncached(encoding).count_batch(chunks))
    assert counts == expected_chunks(corpus, encoding)


def test_recount_cached_batch(benchmark, corpus, encoding):
    chunks = chunks_of(corpus)
    benchmark.group = f"recount-{encoding}"
    clear_cache()
    get_tokenizer(encoding).count_batch(chunks)  # fill the cache
    hits_before = cache_stats().hits
    counts = benchmark(lambda: get_tokenizer(encoding).count_batch(chunks))
    assert counts == expected_chunks(corpus, encoding)
    # Every timed call was answered from the cache.
    assert cache_stats().hits - hits_before >= len(chunks)
    assert cache_stats().misses == len(chunks)


def test_unicode_tiktoken(benchmark, encoding):
    text, enc = random_unicode(), oracle(encoding)
    benchmark.group = f"unicode-{encoding}"
    benchmark.extra_info["MB"] = len(text.encode()) / MB
    assert benchmark(lambda: len(enc.encode_ordinary(text))) == uncached(encoding).count(text)


def test_unicode_ours(benchmark, encoding):
    text, enc = random_unicode(), oracle(encoding)
    benchmark.group = f"unicode-{encoding}"
    benchmark.extra_info["MB"] = len(text.encode()) / MB
    n = benchmark(lambda: uncached(encoding).count(text))
    assert n == len(enc.encode_ordinary(text))
