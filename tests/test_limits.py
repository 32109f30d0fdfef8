"""The write check every store runs (``limits.check_node``): what a later read needs is
refused on the way in — nesting beyond ``MAX_NESTING``, bodies beyond
``MAX_NODE_BYTES``, non-finite times — through the DAG API (append, edit) as through
the importers, and a refused write leaves the store as it was."""

from __future__ import annotations

import math

import pytest

from ctxrules import dag, limits
from ctxrules.errors import ValidationError
from ctxrules.limits import MAX_NESTING, check_metadata, check_node, nesting_path
from ctxrules.model import Node, ToolUseBlock


def nest(depth: int, leaf: object = "leaf", *, lists: bool = False) -> object:
    value = leaf
    for _ in range(depth):
        value = [value] if lists else {"k": value}
    return value


def node(**fields: object) -> Node:
    return Node(id="n1", seq=1, created_at=0.0, role="assistant", **fields)


@pytest.mark.parametrize("lists", [False, True], ids=["maps", "lists"])
def test_free_values_may_nest_max_nesting_levels_and_no_more(lists):
    ok = nest(MAX_NESTING, lists=lists)
    deep = nest(MAX_NESTING + 1, lists=lists)
    for field, value in (("input", ok), ("metadata", {"v": nest(MAX_NESTING - 1)})):
        check_node(node(**{field: value}))
    # In an output, the block list and the block are not counted: a tool call's input
    # may nest as deep as a tool node's input.
    check_node(node(output=[ToolUseBlock(id="t", name="f", input={"v": nest(99)})]))
    for field, value, where in (
        ("input", deep, "input"),
        ("metadata", {"v": nest(MAX_NESTING, lists=lists)}, "metadata.v"),
        ("output", [ToolUseBlock(id="t", name="f", input={"v": deep})], "output[0].input.v"),
    ):
        with pytest.raises(ValidationError, match=r"limits\.MAX_NESTING") as err:
            check_node(node(**{field: value}))
        assert f"at {where}" in str(err.value) and "node 'n1'" in str(err.value)


def test_values_deeper_than_the_encoder_can_walk_are_refused_too():
    with pytest.raises(ValidationError, match=f"more than {MAX_NESTING} levels"):
        check_node(node(input=nest(5000)))


def test_brackets_inside_strings_do_not_count():
    text = "[" * 500 + '\\"{' * 300 + "\\"
    assert check_node(node(input={"code": text}, metadata={"m": [text]}))


def test_the_body_returned_is_the_node_as_json():
    call = node(output="hi", metadata={"a": [1, 2]})
    import msgspec

    assert msgspec.json.decode(check_node(call), type=Node) == call


def test_a_body_over_max_node_bytes_is_refused(monkeypatch):
    monkeypatch.setattr(limits, "MAX_NODE_BYTES", 10_000)
    check_node(node(output="x" * 9_000))
    with pytest.raises(ValidationError, match=r"MiB encoded.*limits.MAX_NODE_BYTES"):
        check_node(node(output="x" * 10_000))


@pytest.mark.parametrize("when", [math.nan, math.inf, -math.inf])
def test_times_must_be_finite(when):
    with pytest.raises(ValidationError, match="finite number of epoch seconds"):
        check_node(Node(id="n1", seq=1, created_at=when, role="user"))


def test_the_dag_api_is_checked_and_a_refusal_writes_nothing(any_store):
    """Both backends run the same check (``store._shared.node_body``)."""
    store = any_store
    sid = dag.create_session(store).id
    first = dag.append(store, sid, "user", "hello")
    before = (store.get_session(sid), store.nodes(sid))
    with pytest.raises(ValidationError, match=r"limits\.MAX_NESTING"):
        dag.append(store, sid, "tool", "ok", input=nest(101), caller=first.id)
    with pytest.raises(ValidationError, match=r"limits\.MAX_NESTING"):
        dag.append(store, sid, "user", "hi", metadata={"deep": nest(990)})
    with pytest.raises(ValidationError, match="finite"):
        dag.append(store, sid, "user", "hi", created_at=math.nan)
    with pytest.raises(ValidationError, match=r"limits\.MAX_NESTING"):
        dag.edit(store, sid, first.id, output=[ToolUseBlock(id="t", name="f", input=nest(150))])
    assert (store.get_session(sid), store.nodes(sid)) == before


def test_session_metadata_has_the_same_bound():
    check_metadata({"request": nest(MAX_NESTING - 1)}, where="f.yaml")
    with pytest.raises(ValidationError, match=r"^f.yaml: metadata nests .* \(at metadata.r"):
        check_metadata({"r": nest(MAX_NESTING)}, where="f.yaml")
    with pytest.raises(ValidationError, match="must be a dict"):
        check_metadata(["x"], where="f.yaml")


def test_nesting_path_names_the_first_spot_too_deep():
    assert nesting_path({"a": [1, {"b": 2}]}, 2) == ".a[1]"
    assert nesting_path({"a": [1, {"b": 2}]}, 3) is None
    long = nesting_path(nest(200), 100)
    assert long is not None and long.startswith(".k.k.k.k.k.k…") and "(100 steps)" in long
