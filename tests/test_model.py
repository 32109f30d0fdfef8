"""The data model: exact JSON round-trip, clear validation errors, immutability."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxrules.errors import ValidationError
from ctxrules.model import (
    CacheControl,
    Context,
    ContextCommit,
    ContextItem,
    ImageBlock,
    ImageSource,
    Message,
    Node,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    decode,
    encode,
)

text = st.text(max_size=40)
cache = st.none() | st.builds(CacheControl, ttl=st.sampled_from([None, "5m", "1h"]))
json_scalar = st.none() | st.booleans() | st.integers() | text
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
image = st.builds(
    ImageBlock,
    source=st.builds(ImageSource, media_type=st.just("image/png"), data=text),
    cache_control=cache,
)
blocks = st.one_of(
    st.builds(TextBlock, text=text, cache_control=cache),
    image,
    st.builds(ThinkingBlock, thinking=text, signature=text),
    st.builds(RedactedThinkingBlock, data=text),
    st.builds(ToolUseBlock, id=text, name=text, input=st.dictionaries(text, json_value)),
    st.builds(
        ToolResultBlock,
        tool_use_id=text,
        content=text | st.lists(st.builds(TextBlock, text=text) | image, max_size=2),
        is_error=st.booleans(),
    ),
)
calls = st.builds(
    Node,
    id=st.text(min_size=1, max_size=10),
    seq=st.integers(0, 10**9),
    created_at=st.floats(0, 2e9),
    role=st.sampled_from(["user", "assistant", "tool", "system"]),
    name=text,
    input=json_value,
    output=text | st.lists(blocks, max_size=4),
    predecessor=st.none() | text,
    reads=st.lists(text, max_size=2).map(tuple),
    metadata=st.dictionaries(text, json_value, max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(calls)
def test_call_json_round_trip_is_exact(call):
    data = encode(call)
    assert decode(data, Node) == call
    assert encode(decode(data, Node)) == data


@settings(max_examples=50, deadline=None)
@given(st.lists(blocks, max_size=5))
def test_context_round_trip(content):
    ctx = Context(
        system=(TextBlock("sys", cache_control=CacheControl()),),
        messages=(Message("user", tuple(content)),),
        tools=(ToolSpec("ls", "list files"),),
    )
    assert decode(encode(ctx), Context) == ctx


def test_blocks_use_the_vendor_type_tag():
    data = json.loads(encode([ToolUseBlock(id="t1", name="ls", input={"p": "."})]))
    assert data == [{"type": "tool_use", "id": "t1", "name": "ls", "input": {"p": "."}}]


def test_commit_round_trip():
    item = ContextItem(source_node_id="n1", role="tool", state="aged", tokens=5, caller="a1")
    commit = ContextCommit(
        id="c1", session_id="s", head_node_id="n1", rules_version="r1", items=(item,)
    )
    assert decode(encode(commit), ContextCommit) == commit


def test_both_edges_are_rejected_with_the_node_named():
    with pytest.raises(ValidationError, match=r"node x: .*both 'predecessor' and 'caller'"):
        Node(id="x", seq=1, created_at=0, role="tool", predecessor="a", caller="b")
    raw = b'{"id":"x","seq":1,"created_at":0,"role":"tool","predecessor":"a","caller":"b"}'
    with pytest.raises(ValidationError, match="both"):
        decode(raw, Node)


@pytest.mark.parametrize(
    "raw,field",
    [
        (b'{"id":"x","seq":1,"created_at":0,"role":"robot"}', "$.role"),
        (b'{"id":"x","seq":"1","created_at":0,"role":"user"}', "$.seq"),
        (b'{"id":"x","seq":1,"created_at":0,"role":"user","output":[{"type":"video"}]}', "output"),
        (b'{"seq":1,"created_at":0,"role":"user"}', "id"),
    ],
)
def test_validation_errors_name_the_field(raw, field):
    with pytest.raises(ValidationError) as info:
        decode(raw, Node, where="file.json:3")
    assert field in str(info.value)
    assert str(info.value).startswith("file.json:3: ")


def test_invalid_json_is_a_validation_error():
    with pytest.raises(ValidationError, match="invalid JSON"):
        decode(b"{not json", Node)


def test_nodes_and_commits_are_frozen():
    call = Node(id="x", seq=1, created_at=0, role="user", output="hi")
    with pytest.raises(AttributeError):
        call.output = "changed"  # type: ignore[misc]
    item = ContextItem(source_node_id="x", role="user")
    with pytest.raises(AttributeError):
        item.state = "aged"  # type: ignore[misc]
    assert msgspec.structs.replace(item, state="aged").state == "aged"
