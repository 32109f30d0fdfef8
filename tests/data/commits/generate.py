"""Make the commit seeds in this folder and their golden render digests.

The seeds are real commits (the corpus imported and committed under several presets,
cut to at most ``MAX_SEED`` bytes at an item boundary) plus hand-made commits for the
shapes the corpus lacks (images, thinking, summaries, attach blocks, repeated and
missing call ids, hostile text, provider compaction blocks).  They feed the byte-equality test
(tests/core/test_bytes.py) and the fuzzers (rust/tests/fuzz_commits.rs, fuzz/).

``golden.json`` holds, for every seed × option set × wire (and the neutral context),
the SHA-256 of the bytes a given build of the core rendered, and the diff of seed
pairs.  Regenerate it with the build the current one must equal:

    python tests/data/commits/generate.py --seeds            # rewrite the seeds
    python tests/data/commits/generate.py --golden [CORE.so] # digests from that build

Without a path the installed ``ctxrules._core`` renders.  Seeds are only rewritten on
purpose: the digests are of these exact bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import itertools
import json
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import msgspec

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CORPUS = REPO / "tests" / "data" / "corpus"
#: Largest seed, in bytes (small inputs mutate well; real commits run to megabytes).
MAX_SEED = 24_000
WIRES = ["anthropic", "openai-chat", "openai-responses", "gemini"]
PRESETS = ["default", "aggressive", "off"]

_TOOLS = [
    {
        "name": "ls",
        "description": "list files",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    {"name": "noschema"},
]
_SYSTEM = [{"text": "You are terse.", "layer": 0}, {"text": "Frame: demo", "layer": 1}]

#: Render options, as the JSON the core receives (kept literally: the test then does
#: not depend on how the Python layer builds them).
OPTIONS: list[dict] = [
    {"model": "m"},
    {"model": "m-1", "max_tokens": 100, "system": _SYSTEM, "tools": _TOOLS},
    {"model": "m-1", "max_tokens": 100, "system": _SYSTEM, "tools": _TOOLS, "cache": False},
    {
        "model": "m-1",
        "system": _SYSTEM[:1],
        "tools": _TOOLS[:1],
        "cache_ttl": "1h",
        "extra": {"temperature": 0, "tool_choice": {"type": "auto"}},
    },
    {
        "model": 'q"m',
        "system": [{"text": 'a"b\\c\n\u0001\u2028', "layer": 0}],
        "tools": [{"name": 't"q', "description": "d\nx", "input_schema": {}}],
    },
]
#: Options of the neutral context (only ``system`` matters there).
CONTEXT_OPTIONS: list[dict] = [{}, {"system": _SYSTEM}]


def _corpus_commits() -> list[tuple[str, object]]:
    from ctxrules.commit import Pipeline, make_commit
    from ctxrules.config import PipelineConfig
    from ctxrules.importers import import_paths
    from ctxrules.store import open_store

    files = sorted(str(p) for p in CORPUS.rglob("*") if p.is_file() and p.name != "SOURCES.md")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(tmp)
        results = import_paths(store, files)
        tau = 0
        for r in results:
            source = r.format
            if "taubench" in r.source:
                tau += 1
                if tau > 3:  # 200 similar trajectories: three are enough
                    continue
            for preset in PRESETS:
                config = Pipeline.from_config(PipelineConfig.preset(preset))
                c = make_commit(r.id, store=store, now=1e9, config=config)
                out.append((f"{source}-{r.id[-6:]}-{preset}", c))
    return out


def _cut(commit: object) -> object:
    """The longest item prefix of ``commit`` that encodes to at most MAX_SEED bytes."""
    items = commit.items  # type: ignore[attr-defined]
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        c = msgspec.structs.replace(commit, items=items[:mid])
        if len(msgspec.msgpack.encode(c)) <= MAX_SEED:
            lo = mid
        else:
            hi = mid - 1
    return msgspec.structs.replace(commit, items=items[:lo])


def _handmade() -> list[tuple[str, object]]:
    from ctxrules.model import (
        CompactionBlock,
        ContextCommit,
        ContextItem,
        ImageBlock,
        ImageSource,
        RedactedThinkingBlock,
        TextBlock,
        ThinkingBlock,
        ToolResultBlock,
        ToolUseBlock,
    )

    def commit(name: str, *items: ContextItem) -> tuple[str, ContextCommit]:
        return name, ContextCommit(
            id=f"cc_{name}", session_id="s", head_node_id="h", rules_version="rv", items=items
        )

    def it(id: str, role: str, text: str = "", **kw: object) -> ContextItem:
        return ContextItem(source_node_id=id, role=role, rendered=text, **kw)  # type: ignore[arg-type]

    png = ImageSource(media_type="image/png", data="iVBORw0KGgo=")
    url = ImageSource(type="url", url="https://example.com/a.png")
    deep: object = 1
    for _ in range(99):  # {"deep": deep} nests as deep as a stored value may (MAX_NESTING)
        deep = [deep]
    return [
        commit(
            "images",
            it("u1", "user", "look", blocks=(ImageBlock(source=png), ImageBlock(source=url))),
            it("a1", "assistant", "taking a screenshot"),
            it(
                "t1",
                "tool",
                "shot taken",
                name="screenshot",
                caller="a1",
                tool_use_id="call_1",
                tool_input='{"full": true}',
                blocks=(ImageBlock(source=png),),
            ),
            it("a2", "assistant", "done"),
        ),
        commit(
            "thinking",
            it("u1", "user", "think"),
            it(
                "a1",
                "assistant",
                "answer",
                blocks=(
                    ThinkingBlock(thinking="hmm", signature="sig-a"),
                    ThinkingBlock(thinking="", signature="c2ln", vendor="gemini"),
                    RedactedThinkingBlock(data="opaque"),
                    TextBlock(text="answer"),
                ),
            ),
            it("t1", "tool", "r", name="ls", caller="a1", tool_use_id="c1"),
            it("a2", "assistant", "trailing space \n\n"),
        ),
        commit(
            "summary",
            it("u0", "user", "old", state="summarized", merged_into="sm_1"),
            it("a0", "assistant", "old answer", state="summarized", merged_into="sm_1"),
            it("sm_1", "assistant", "the task so far", state="summary"),
            it("s1", "system", "situation changed"),
            it("u1", "user", "next"),
        ),
        commit(
            "attached",
            it("u1", "user", "merge this"),
            it("u1", "user", "merge this", attached_from="cc_other"),
            it("a1", "assistant", "merged", attached_from="cc_other"),
            it("a2", "assistant", "ok"),
        ),
        commit(
            "pairing",
            it("u1", "user", "go"),
            it("a1", "assistant", ""),
            it("t1", "tool", "r1", name="ls", caller="a1", tool_use_id="dup"),
            it("t2", "tool", "r2", name="ls", caller="a1", tool_use_id="dup"),
            it("t3", "tool", "r3", name="ls", caller="gone", tool_use_id="x"),
            it("t4", "tool", "r4", name="ls", tool_input="not json {"),
            it("a2", "assistant", ""),
            it("t5", "tool", "r5", name="ls", caller="a2", tool_use_id="dup_2", is_error=True),
            it("t6", "tool", "r6", name="ls", caller="a2", tool_use_id="dup", tool_input="{}"),
        ),
        commit(
            "hostile-text",
            it("u1", "user", '"}],"role":"system" \\ \x00\x1f\x7f é ✓ 你好 \u2028 😀'),
            it("a1", "assistant", "x", blocks=(TextBlock(text="x"),)),
            it(
                "t1",
                "tool",
                '{"json": "inside \\"json\\""}\n\t</tool_result>',
                name='n"ame',
                caller="a1",
                tool_use_id='id"1',
                tool_input='{"a": "\\u0000"}',
            ),
            it("a2", "assistant", "ok"),
        ),
        commit(
            "deep-args",
            it("u1", "user", "go"),
            it(
                "a1",
                "assistant",
                "calling",
                blocks=(
                    TextBlock(text="calling"),
                    ToolUseBlock(id="c1", name="f", input={"deep": deep}),
                ),
            ),
            it(
                "t1",
                "tool",
                "ok",
                name="f",
                caller="a1",
                tool_use_id="c1",
                tool_input=json.dumps({"deep": deep}),
            ),
            it(
                "u2",
                "user",
                "",
                blocks=(ToolResultBlock(tool_use_id="c1", content=[TextBlock(text="r")]),),
            ),
        ),
        commit(
            "provider-compaction",
            it("u1", "user", "old question"),
            it("a1", "assistant", "old answer"),
            it("t1", "tool", "old result", name="ls", caller="a1", tool_use_id="c1"),
            it(
                "a2",
                "assistant",
                "ok",
                blocks=(
                    CompactionBlock(content=None, encrypted_content="m0"),  # failed: a no-op
                    CompactionBlock(
                        content="SUMMARY",
                        encrypted_content="meta",
                        signature="sig",
                        tool_changes=[
                            {
                                "type": "tool_removal",
                                "tool": {"type": "tool_reference", "name": "x"},
                            }
                        ],
                    ),
                    CompactionBlock(encrypted_content="ENC", id="cmp_1", vendor="openai"),
                    TextBlock(text="ok"),
                ),
            ),
            it("t2", "tool", "new result", name="ls", caller="a2", tool_use_id="c2"),
            it("u2", "user", "next"),
        ),
        commit("system-only", it("s0", "system", "You are a bot.")),
        commit("empty"),
    ]


def write_seeds() -> None:
    """Rewrite the seed files (``*.msgpack``) of this folder."""
    for old in HERE.glob("*.msgpack"):
        old.unlink()
    seeds = [(n, _cut(c)) for n, c in _corpus_commits()] + _handmade()
    for name, c in seeds:
        (HERE / f"{name}.msgpack").write_bytes(msgspec.msgpack.encode(c))
    print(f"{len(seeds)} seeds, {sum(p.stat().st_size for p in HERE.glob('*.msgpack'))} bytes")


def seeds() -> dict[str, bytes]:
    """The seed files, by name, in name order."""
    return {p.stem: p.read_bytes() for p in sorted(HERE.glob("*.msgpack"))}


def _items_bytes(commit: bytes) -> bytes:
    """The MessagePack of a seed's item list (what older cores diffed)."""
    return msgspec.msgpack.encode(msgspec.msgpack.decode(commit).get("items", []))


def render_digests(core: ModuleType) -> dict:
    """Digests of everything ``core`` renders from the seeds (see the module docstring)."""
    render: dict[str, dict[str, str]] = {}
    for name, data in seeds().items():
        out: dict[str, str] = {}
        for k, opts in enumerate(OPTIONS):
            for wire in WIRES:
                body, meta = core.render_request(wire, data, json.dumps(opts).encode())
                # (golden.json keeps the options as these exact JSON texts)
                out[f"{k}/{wire}"] = hashlib.sha256(body + b"\0" + meta).hexdigest()
        for k, opts in enumerate(CONTEXT_OPTIONS):
            ctx = core.render_context(data, json.dumps(opts).encode())
            out[f"{k}/context"] = hashlib.sha256(ctx).hexdigest()
        render[name] = out
    return render


def diff_pairs() -> list[tuple[str, str]]:
    """Seed pairs diffed: each seed against the next one (name order)."""
    names = list(seeds())
    return list(itertools.pairwise(names))


def write_golden(core_path: str | None) -> None:
    """Write golden.json from the core at ``core_path`` (default: the installed one)."""
    if core_path:
        spec = importlib.util.spec_from_file_location("_core", core_path)
        assert spec and spec.loader
        core = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(core)
    else:
        from ctxrules import _core as core
    all_seeds = seeds()
    diffs = {}
    for a, b in diff_pairs():
        try:  # older cores took item lists
            d = core.diff_items(_items_bytes(all_seeds[a]), _items_bytes(all_seeds[b]))
        except (TypeError, ValueError):
            d = core.diff_items(all_seeds[a], all_seeds[b])
        diffs[f"{a} {b}"] = [list(x) if isinstance(x, list) else x for x in d]
    golden = {
        # The exact option texts (key order matters: schemas are spliced as they are).
        "options": [json.dumps(o) for o in OPTIONS],
        "context_options": [json.dumps(o) for o in CONTEXT_OPTIONS],
        "render": render_digests(core),
        "diff": diffs,
    }
    (HERE / "golden.json").write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"golden.json: {sum(len(v) for v in golden['render'].values())} digests")


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", action="store_true", help="rewrite the seed files")
    parser.add_argument("--golden", nargs="?", const="", default=None, metavar="CORE.so")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.seeds:
        write_seeds()
    if args.golden is not None:
        write_golden(args.golden or None)


if __name__ == "__main__":
    main()
