"""The core's item caches: never a stale answer, bounded, and what they rely on.

Items of a ``ContextItem`` tuple are found again by identity (the core holds a reference,
so an address cannot be reused), which is only right while every value the core reads
from an item can never change: the first test pins that contract on the model.  Items
given as bytes are found by their exact bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from ctxrules import _core
from ctxrules.model import ContextCommit, ContextItem
from ctxrules.render import render, render_batch

DATA = Path(__file__).parents[1] / "data" / "commits"
SEEDS = {p.stem: p.read_bytes() for p in DATA.glob("*.msgpack")}
WIRES = ["anthropic", "openai-chat", "openai-responses", "gemini"]

#: The fields the core reads: of an item, of each kind of block it keeps, of an image.
READ: dict[str, set[str]] = {
    "ContextItem": {
        "source_node_id",
        "role",
        "state",
        "rendered",
        "tokens",
        "name",
        "caller",
        "tool_use_id",
        "tool_input",
        "is_error",
        "attached_from",
        "blocks",
    },
    "text": {"text"},
    "image": {"source"},
    "thinking": {"thinking", "signature", "vendor"},
    "redacted_thinking": {"data"},
    "ImageSource": {"type", "media_type", "data", "url"},
}


def _immutable(t: msgspec.inspect.Type) -> bool:
    i = msgspec.inspect
    if isinstance(t, (i.StrType, i.IntType, i.BoolType, i.FloatType, i.LiteralType, i.NoneType)):
        return True
    if isinstance(t, i.UnionType):
        return all(_immutable(x) for x in t.types)
    if isinstance(t, i.VarTupleType):
        return _immutable(t.item_type)
    if isinstance(t, i.StructType):
        read = READ.get(t.tag or t.cls.__name__, set())  # tool blocks: nothing is read
        frozen = t.cls.__struct_config__.frozen
        return frozen and all(_immutable(f.type) for f in t.fields if f.name in read)
    return False  # dicts, lists, Any: could change under the cache


def test_everything_the_core_reads_from_an_item_is_immutable():
    info = msgspec.inspect.type_info(ContextItem)
    assert isinstance(info, msgspec.inspect.StructType)
    assert {f.name for f in info.fields} >= READ["ContextItem"]
    assert _immutable(info)


def _commit(items: tuple[ContextItem, ...]) -> ContextCommit:
    return ContextCommit(id="c", session_id="s", head_node_id="h", rules_version="r", items=items)


def _seed(name: str) -> ContextCommit:
    return msgspec.msgpack.decode(SEEDS[name], type=ContextCommit)


def test_a_changed_item_is_rendered_from_its_new_content():
    base = _seed("images")
    for wire in WIRES:
        render(base, wire)  # every item now known by identity
    changed = list(base.items)
    changed[2] = msgspec.structs.replace(changed[2], rendered="a different result", state="aged")
    child = _commit(tuple(changed))
    before = _core.item_cache_stats()["object_hits"]
    for wire in WIRES:
        warm = render(child, wire).body
        assert warm == render(msgspec.msgpack.encode(child), wire).body
        assert b"a different result" in warm
    assert _core.item_cache_stats()["object_hits"] > before  # the unchanged ones were reused


def test_equal_bytes_are_found_by_content():
    _core.item_cache_clear()
    data = SEEDS["pairing"]
    first = render(data, "gemini").body
    assert _core.item_cache_stats()["misses"] > 0
    hits = _core.item_cache_stats()["hits"]
    # The same content in a different bytes object is found by its bytes.
    assert render(bytes(bytearray(data)), "gemini").body == first
    assert _core.item_cache_stats()["hits"] > hits


def test_objects_that_are_not_context_items_are_never_kept():
    _core.item_cache_clear()
    items = ({"source_node_id": "u", "role": "user", "rendered": "hi"},)
    out = _core.render_request("anthropic", items, b"")
    assert b'"hi"' in out[0]
    assert _core.item_cache_stats()["objects"] == 0

    class Sub(ContextItem, frozen=True):
        pass

    sub = (Sub(source_node_id="u", role="user", rendered="sub"),)
    assert b'"sub"' in _core.render_request("anthropic", sub, b"")[0]
    assert _core.item_cache_stats()["objects"] == 0


@pytest.fixture
def capacity():
    """Set the caches' bound for one test, then put the default back."""
    default = _core.item_cache_stats()["capacity"]
    yield _core.set_item_cache_capacity
    _core.set_item_cache_capacity(default)
    _core.item_cache_clear()


def test_the_caches_stay_within_their_bound(capacity):
    capacity(20_000)
    _core.item_cache_clear()
    for name, data in sorted(SEEDS.items()):
        commit = msgspec.msgpack.decode(data, type=ContextCommit)
        for arg in (data, commit.items):
            want = _core.render_request("openai-chat", data, b"")
            assert _core.render_request("openai-chat", arg, b"") == want, name
            s = _core.item_cache_stats()
            assert s["bytes"] <= 20_000 and s["object_bytes"] <= 20_000, (name, s)
    capacity(0)
    _core.item_cache_clear()
    data = SEEDS["hostile-text"]
    assert _core.render_request("gemini", data, b"") == _core.render_request("gemini", data, b"")
    assert _core.item_cache_stats()["items"] == 0


def test_render_batch_equals_one_by_one():
    names = sorted(SEEDS)[:12]
    commits = [_seed(n) for n in names]
    distinct = [
        {"model": f"m{i}", "system": f"system {i}", "max_tokens": 50 + i} for i in range(12)
    ]
    # Equal values in other mappings (prepared once), interleaved with other values.
    repeated = [{"model": f"m{i % 3}", "system": f"system {i % 2}"} for i in range(12)]
    for threads, per_commit in ((None, distinct), (1, distinct), (3, distinct), (2, repeated)):
        out = render_batch(commits, WIRES, options=per_commit, threads=threads)
        for i, row in enumerate(out):
            for j, got in enumerate(row):
                want = render(commits[i], WIRES[j], **per_commit[i])
                assert (got.body, got.meta, got.endpoint, got.model) == (
                    want.body,
                    want.meta,
                    want.endpoint,
                    want.model,
                ), (names[i], WIRES[j], threads)
    assert render_batch([], WIRES) == []
    shared = render_batch([SEEDS["summary"]], ["anthropic"], options={"system": "S"})[0][0]
    assert json.loads(shared.body)["system"][0]["text"] == "S"


def test_cache_controls_of_the_render_module(capacity):
    from ctxrules.errors import RenderError
    from ctxrules.render import cache_stats, clear_cache, set_cache_capacity

    render(_seed("summary"), "anthropic")
    assert cache_stats()["objects"] > 0
    clear_cache()
    assert cache_stats()["objects"] == cache_stats()["items"] == 0
    set_cache_capacity(1 << 20)
    assert cache_stats()["capacity"] == 1 << 20
    for bad in (-1, 1.5, True):
        with pytest.raises(RenderError, match="capacity"):
            set_cache_capacity(bad)  # type: ignore[arg-type]
