"""Gzip-compressed files (LangChain keeps its VCR cassettes as ``.yaml.gz``): read
decompressed, found by their magic bytes whatever their name; a damaged stream is a
typed error naming the file."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from ctxrules.errors import ImportFormatError
from ctxrules.importers import detect_formats, import_paths
from ctxrules.store import open_store

CASSETTE = "vcr-cassettes-yaml/gemini/test_google_instructions_only_with_tool_calls.yaml"
FILES = [
    (CASSETTE, "cassette-all"),
    ("httprr/anthropic/langchaingo__TestClient_CreateMessageStream.httprr", None),
    ("openai-chat-json/taubench_gpt-4o-airline.json", None),
    ("claude-code-jsonl/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl", None),
]


def imported(store_dir, path, fmt):
    """Every session of one import as (format, metadata, nodes), in file order."""
    store = open_store(store_dir)
    try:
        results = import_paths(store, [str(path)], **({"format": fmt} if fmt else {}))
        return [
            (r.format, r.id, store.get_session(r.id).metadata, store.nodes(r.id)) for r in results
        ]
    finally:
        store.close()


def gzipped(src, dst):
    dst.write_bytes(gzip.compress(src.read_bytes()))
    return dst


@pytest.mark.parametrize(("name", "fmt"), FILES)
def test_a_gzip_file_imports_as_its_content(corpus, tmp_path, name, fmt):
    plain = tmp_path / (corpus / name).name
    plain.write_bytes((corpus / name).read_bytes())
    packed = gzipped(plain, tmp_path / (plain.name + ".gz"))
    assert packed.read_bytes()[:2] == b"\x1f\x8b"
    want = imported(tmp_path / "a", plain, fmt)
    got = imported(tmp_path / "b", packed, fmt)
    assert want and len(got) == len(want)
    for (f1, id1, m1, n1), (f2, id2, m2, n2) in zip(want, got):
        # the metadata says where the session was read from (a growing transcript's)
        m2 = json.loads(json.dumps(m2).replace(str(packed), str(plain)))
        assert (f2, m2, n2) == (f1, m1, n1)
        # one content, one identity: the compressed copy names the same session
        assert id2 == id1


def test_gzip_is_found_by_its_bytes_not_its_name(corpus, tmp_path):
    plain = corpus / CASSETTE
    hidden = gzipped(plain, tmp_path / "recording.yaml")  # gzip under a plain name
    assert detect_formats(str(hidden)) == detect_formats(str(plain)) == ["cassette"]
    assert [m["usage"] for _, _, m, _ in imported(tmp_path / "s", hidden, None)] == [
        m["usage"] for _, _, m, _ in imported(tmp_path / "t", plain, None)
    ]


def damaged(data: bytes) -> dict[str, bytes]:
    """Three ways a gzip file is broken: cut short, a wrong checksum, a bad deflate block."""
    crc = bytearray(data)
    crc[-8] ^= 0xFF  # the CRC-32 in the trailer
    block = bytearray(data)
    block[10] = 0xFF  # the first deflate block's header: a reserved block type
    return {"truncated": data[: len(data) // 2], "crc": bytes(crc), "block": bytes(block)}


@pytest.mark.parametrize("kind", ["truncated", "crc", "block"])
def test_a_damaged_gzip_stream_is_a_typed_error(corpus, store, snapshot, tmp_path, kind):
    data = gzip.compress((corpus / CASSETTE).read_bytes())
    path = tmp_path / "broken.bin"
    path.write_bytes(damaged(data)[kind])
    before = snapshot(store)
    with pytest.raises(ImportFormatError) as err:
        import_paths(store, [str(path)], format="cassette")
    msg = str(err.value)
    assert str(path) in msg and "gzip stream" in msg and "nothing was imported" in msg
    assert snapshot(store) == before


def test_a_gzip_bomb_is_refused(tmp_path, monkeypatch):
    from ctxrules.importers import _common

    monkeypatch.setattr(_common, "MAX_GUNZIPPED_BYTES", 1 << 20)
    path = tmp_path / "bomb.yaml.gz"
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    path.write_bytes(z.compress(b"interactions: []\n" + b" " * (2 << 20)) + z.flush())
    with pytest.raises(ImportFormatError, match="expands to more than"):
        import_paths(open_store(tmp_path / "s"), [str(path)], format="cassette")
