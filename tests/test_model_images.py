"""Image blocks: a source whose URL, data or media type is not a string is a
``ValidationError`` where it is made (constructed or decoded), not a crash later in a
renderer."""

from __future__ import annotations

import pytest

from ctxrules.errors import ValidationError
from ctxrules.model import ImageBlock, ImageSource, Node, decode, encode


@pytest.mark.parametrize(
    "fields,named",
    [
        ({"type": "url", "url": 5}, "'url'"),
        ({"type": "url", "url": {"href": "http://x"}}, "'url'"),
        ({"data": ["aGk="]}, "'data'"),
        ({"data": b"aGk="}, "'data'"),
        ({"media_type": None, "data": "aGk="}, "'media_type'"),
        ({"type": "ftp", "url": "ftp://x"}, "'base64' or 'url'"),
    ],
)
def test_construction_refuses_non_string_fields(fields, named):
    with pytest.raises(ValidationError, match=named):
        ImageSource(**fields)


def test_decoding_refuses_them_with_the_field_path():
    raw = (
        b'{"id":"x","seq":1,"created_at":0,"role":"user","output":'
        b'[{"type":"image","source":{"type":"url","url":5}}]}'
    )
    with pytest.raises(ValidationError, match=r"output\[0\]\.source\.url"):
        decode(raw, Node)


def test_well_formed_sources_round_trip():
    for src in (
        ImageSource(type="url", url="https://x/y.png"),
        ImageSource(media_type="image/png", data="aGk="),
    ):
        call = Node(id="x", seq=1, created_at=0, role="user", output=[ImageBlock(source=src)])
        assert decode(encode(call), Node) == call
