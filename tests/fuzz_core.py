"""Mutation fuzzing of the core through the Python API, over the seed commits.

Each round takes a seed commit (``tests/data/commits``), mutates it — as bytes (bit
flips, MessagePack markers, markers declaring their largest length, deep nesting,
splices, cuts) or as data
(items dropped, copied, swapped, fields set to odd values) — and runs every entry point
that reads it: ``render`` for each wire, ``render_context``, ``render_batch`` and, when
msgspec can still decode it into a ``ContextCommit``, the same calls on the object (the
item-tuple path) and ``diff_commits``.  It checks that only typed ``ctxrules`` errors
come out, that every body is JSON, and that the object and the bytes give the same
body whenever both render.

    python tests/fuzz_core.py --commits 20000 [--seed N]

runs in child processes of ``--chunk`` rounds (a crash of the core is reported with
the chunk that reproduces it, not lost with the run).  ``make fuzz`` runs it;
tests/core/test_fuzz.py runs a bounded version under ``make test``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

SEED_DIR = Path(__file__).parent / "data" / "commits"
WIRES = ["anthropic", "openai-chat", "openai-responses", "gemini"]
#: MessagePack markers: containers, strings, lengths, nil, booleans, invalid 0xc1.
MARKERS = bytes.fromhex("007f80818f90919fa0bfc0c1c2c3c4c6c9cfd3d9dbdddfff")
#: A marker with the largest length it can declare (arrays, maps, strings, bin, ext).
BOMBS = [bytes.fromhex(h) for h in ("ddffffffff", "dcffff", "dfffffffff", "deffff", "dbffffffff")]
BOMBS += [bytes.fromhex(h) for h in ("c6ffffffff", "c9ffffffff01", "9f", "8f")]
TEXTS = ["", " \n\t ", '"}],"role":"system"', "\\", "\x00\x1f\x7f", "é✓你好\u2028😀"]
TEXTS += ['{"a":[1,{"b":null}]}', '{"cut', "call_1", "a1", "[tool x; result]"]


def seeds() -> list[bytes]:
    """The seed commits, in name order."""
    return [p.read_bytes() for p in sorted(SEED_DIR.glob("*.msgpack"))]


def mutate_bytes(rng: random.Random, data: bytearray, pool: list[bytes]) -> None:
    """Change ``data`` in place a few times, as bytes."""
    for _ in range(1 + rng.randrange(4)):
        n = len(data)
        at = rng.randrange(n + 1)
        op = rng.randrange(10)
        if op == 0 and n:
            data[min(at, n - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            data[min(at, n - 1)] = rng.choice(MARKERS)
        elif op == 2 and n > 4:
            at = min(at, n - 4)
            data[at : at + 4] = rng.choice([b"\xff\xff\xff\xff", rng.randbytes(4)])
        elif op == 9:
            # A container or string marker (a byte that looks like one) made to declare
            # its largest length: what trusts a declared length meets its limit.
            marks = [i for i in range(n) if 0x80 <= data[i] <= 0xBF or 0xD9 <= data[i] <= 0xDF]
            if marks:
                i = rng.choice(marks)
                data[i : i + 1] = rng.choice(BOMBS)
        elif op == 3:
            other = rng.choice(pool)
            a = rng.randrange(len(other) + 1)
            data[at:at] = other[a : a + rng.randrange(256)]
        elif op == 4 and n:
            del data[at : at + rng.randrange(64)]
        elif op == 5:
            del data[at:]
        elif op == 6:
            deep = 1 + rng.randrange(100_000 if rng.random() < 0.1 else 400)
            data[at:at] = rng.choice([b"\x91", b"\x81\xa1k"]) * deep
        elif op == 7 and n:
            data[at:at] = data[at : at + rng.randrange(512)]
        else:
            data.append(rng.randrange(256))


def _odd_value(rng: random.Random, key: str) -> Any:
    if key == "role":
        return rng.choice(["user", "assistant", "tool", "system", "nobody"])
    if key == "state":
        return rng.choice(["full", "aged", "cleared", "summarized", "summary", "odd"])
    if key == "tokens":
        return rng.choice([0, 1, 2**63, -1, 2**64 - 1])
    if key == "is_error":
        return rng.random() < 0.5
    if key in ("caller", "tool_use_id", "attached_from") and rng.random() < 0.25:
        return None
    return rng.choice(TEXTS)


#: Block fields a data mutation sets (a compaction block's above all, which other blocks
#: use for other things).
BLOCK_KEYS = ["type", "content", "encrypted_content", "signature", "tool_changes", "id"]
BLOCK_KEYS += ["vendor", "text"]


def _odd_block_value(rng: random.Random) -> Any:
    return rng.choice(
        [None, [{"type": "tool_removal"}, 1], 2**63, "compaction", "openai", "[1]", "[", *TEXTS]
    )


def mutate_items(rng: random.Random, commit: dict[str, Any]) -> None:
    """Change a decoded commit in place a few times, as data."""
    items = commit.get("items")
    if not isinstance(items, list):
        return
    keys = ["role", "state", "rendered", "name", "caller", "tool_use_id", "tool_input"]
    keys += ["is_error", "tokens", "attached_from"]
    for _ in range(1 + rng.randrange(6)):
        if not items:
            return
        i = rng.randrange(len(items))
        op = rng.randrange(6)
        blocks = items[i].get("blocks") if isinstance(items[i], dict) else None
        if op == 5 and isinstance(blocks, list) and blocks:
            block = rng.choice(blocks)
            if isinstance(block, dict):
                block[rng.choice(BLOCK_KEYS)] = _odd_block_value(rng)
        elif op == 0:
            del items[i]
        elif op == 1:
            items.insert(rng.randrange(len(items) + 1), dict(items[i]))
        elif op == 2:
            j = rng.randrange(len(items))
            items[i], items[j] = items[j], items[i]
        elif isinstance(items[i], dict):
            key = rng.choice(keys)
            items[i][key] = _odd_value(rng, key)


def mutant(rng: random.Random, pool: list[bytes]) -> bytes:
    """One mutated commit."""
    seed = rng.choice(pool)
    if rng.random() < 0.5:
        commit = msgspec.msgpack.decode(seed)
        mutate_items(rng, commit)
        data = bytearray(msgspec.msgpack.encode(commit))
        if rng.random() < 1 / 16:
            mutate_bytes(rng, data, pool)
        return bytes(data)
    data = bytearray(seed)
    mutate_bytes(rng, data, pool)
    return bytes(data)


class Finding(AssertionError):
    """An entry point broke its contract on an input."""


def check(data: bytes) -> tuple[int, int]:
    """Run every entry point on ``data``; (bodies rendered, typed errors).  Raises
    ``Finding`` for anything else."""
    from ctxrules.commit import diff_commits
    from ctxrules.errors import CtxrulesError
    from ctxrules.model import ContextCommit
    from ctxrules.render import render, render_batch, render_context

    ok = err = 0

    def call(what: str, fn: Callable[[], Any]) -> Any:
        nonlocal ok, err
        try:
            out = fn()
        except CtxrulesError:
            err += 1
            return None
        except Exception as exc:
            raise Finding(f"{what}: {type(exc).__name__}: {exc}") from exc
        ok += 1
        return out

    by_bytes = {w: call(f"render bytes {w}", lambda w=w: render(data, w)) for w in WIRES}
    for w, r in by_bytes.items():
        if r is not None:
            try:
                json.loads(r.body)
            except ValueError as exc:
                raise Finding(f"render bytes {w}: the body is not JSON ({exc})") from exc
    call("render_context bytes", lambda: render_context(data))
    try:
        commit: ContextCommit | None = msgspec.msgpack.decode(data, type=ContextCommit)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, CtxrulesError):
        # The model's own checks (a struct's __post_init__) refuse with a typed error too.
        commit = None
    batch = call(
        "render_batch",
        lambda: render_batch([data] + ([commit] if commit else []), WIRES, errors="return"),
    )
    for w, got in zip(WIRES, batch[0] if batch else []):
        want = by_bytes[w]
        same = (want is None and isinstance(got, CtxrulesError)) or (
            want is not None and not isinstance(got, CtxrulesError) and got.body == want.body
        )
        if not same:
            raise Finding(f"render_batch {w} differs from render")
    if commit is not None:
        for w in WIRES:
            r = call(f"render object {w}", lambda w=w: render(commit, w))
            if r is not None and by_bytes[w] is not None and r.body != by_bytes[w].body:
                raise Finding(f"render {w}: the item tuple and the bytes render differently")
        call("render_context object", lambda: render_context(commit))
        call("diff_commits", lambda: diff_commits(commit, commit))
    return ok, err


def run(seed: int, start: int, count: int) -> dict[str, int]:
    """Rounds ``start .. start + count`` of the sequence of ``seed``; the tallies."""
    pool = seeds()
    ok = err = 0
    for k in range(start, start + count):
        data = mutant(random.Random(f"{seed}:{k}"), pool)
        try:
            a, b = check(data)
        except Finding as exc:
            raise Finding(f"round {k} (seed {seed}): {exc}; input {data.hex()[:400]}…") from exc
        ok, err = ok + a, err + b
    return {"commits": count, "bodies": ok, "errors": err}


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=2_000)
    parser.add_argument("--child", nargs=2, type=int, metavar=("START", "COUNT"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(args.seed, *args.child)))
        return
    t0 = time.monotonic()
    total = {"commits": 0, "bodies": 0, "errors": 0}
    for start in range(0, args.commits, args.chunk):
        count = min(args.chunk, args.commits - start)
        cmd = [
            sys.executable,
            __file__,
            "--seed",
            str(args.seed),
            "--child",
            str(start),
            str(count),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(
                f"fuzz: rounds {start}..{start + count} failed (exit {proc.returncode}); "
                f"reproduce: {' '.join(cmd)}\n{proc.stderr[-3000:]}"
            )
        for k, v in json.loads(proc.stdout.splitlines()[-1]).items():
            total[k] += v
    print(
        f"fuzz (Python API): {total['commits']} mutated commits in {time.monotonic() - t0:.0f} s, "
        f"{total['bodies']} calls answered, {total['errors']} typed errors, nothing else"
    )


if __name__ == "__main__":
    main()
