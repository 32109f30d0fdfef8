"""The core renders the same bytes as the build before its item cache, on every path.

``tests/data/commits/golden.json`` holds SHA-256 digests of what the core rendered from
the seed commits beside it (52 commits × 5 option sets × 4 wires, plus the neutral
context) and the diffs of seed pairs, made by the build *before* items were prepared
once and cached (see that folder's ``generate.py``).  This build must give the same
bytes from commit bytes and from item tuples, cold and from the cache, one by one and
in a batch.  A deliberate change of the rendered bytes regenerates the digests with
``python tests/data/commits/generate.py --golden``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import msgspec
import pytest

from ctxrules import _core
from ctxrules.commit import diff_commits
from ctxrules.model import ContextCommit

DATA = Path(__file__).parents[1] / "data" / "commits"
GOLDEN = json.loads((DATA / "golden.json").read_text())
SEEDS = {p.stem: p.read_bytes() for p in sorted(DATA.glob("*.msgpack"))}
WIRES = ["anthropic", "openai-chat", "openai-responses", "gemini"]


def _digest(body: bytes, meta: bytes, estimate: object = None) -> str:
    assert estimate is None  # none asked for (no estimate frame)
    return hashlib.sha256(body + b"\0" + meta).hexdigest()


def test_golden_covers_every_seed():
    assert set(GOLDEN["render"]) == set(SEEDS)
    assert len(SEEDS) >= 50


@pytest.mark.parametrize("path", ["bytes", "items"])
def test_same_bytes_as_before_cold_and_cached(path):
    _core.item_cache_clear()
    for round_ in ("cold", "cached"):
        for name, data in SEEDS.items():
            commit = data if path == "bytes" else msgspec.msgpack.decode(data, type=ContextCommit)
            arg = commit if path == "bytes" else commit.items
            want = GOLDEN["render"][name]
            for k, opts in enumerate(GOLDEN["options"]):
                for wire in WIRES:
                    got = _digest(*_core.render_request(wire, arg, opts.encode()))
                    assert got == want[f"{k}/{wire}"], f"{round_} {name} options {k} {wire}"
            for k, opts in enumerate(GOLDEN["context_options"]):
                ctx = _core.render_context(arg, opts.encode())
                assert hashlib.sha256(ctx).hexdigest() == want[f"{k}/context"], f"{name} {k}"
    stats = _core.item_cache_stats()
    assert stats["hits"] + stats["object_hits"] > 0  # the second round came from the cache


@pytest.mark.parametrize("threads", [None, 1, 2])
def test_same_bytes_in_a_batch(threads):
    names = list(SEEDS)
    # Half the commits as bytes, half as item tuples, in one crossing.
    commits = [
        SEEDS[n] if i % 2 else msgspec.msgpack.decode(SEEDS[n], type=ContextCommit).items
        for i, n in enumerate(names)
    ]
    jobs = [
        (wire, i, opts.encode())
        for i in range(len(names))
        for opts in GOLDEN["options"]
        for wire in WIRES
    ]
    results = _core.render_batch(commits, jobs, threads)
    assert len(results) == len(jobs)
    for (wire, i, opts), res in zip(jobs, results):
        assert not isinstance(res, str), res
        k = GOLDEN["options"].index(opts.decode())
        assert _digest(*res) == GOLDEN["render"][names[i]][f"{k}/{wire}"]


def _plain(x: object) -> object:
    """Tuples as lists, as JSON holds them."""
    return json.loads(json.dumps(x))


def test_diffs_same_as_before():
    assert len(GOLDEN["diff"]) == len(SEEDS) - 1
    for pair, want in GOLDEN["diff"].items():
        a, b = pair.split(" ")
        assert _plain(_core.diff_items(SEEDS[a], SEEDS[b])) == want, pair
        ca = msgspec.msgpack.decode(SEEDS[a], type=ContextCommit)
        cb = msgspec.msgpack.decode(SEEDS[b], type=ContextCommit)
        d = diff_commits(ca, cb)
        got = [d.added, d.removed, d.changed, d.rewritten, d.prefix_items, d.prefix_tokens]
        assert _plain(got) == want, pair
