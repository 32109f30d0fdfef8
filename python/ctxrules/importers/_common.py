"""Shared pieces of the importers: reading files, building sessions, converting blocks.

An importer builds each session with a ``SessionBuilder``: nodes get ids derived from
the session's import key (so importing the same bytes twice names the same nodes),
records stay editable until ``build()`` (a Claude Code assistant message is spread over
several lines), and ``build()`` orders the nodes so every edge points at an earlier
node while keeping file order wherever the edges allow.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import re
import zlib
from datetime import datetime, timezone
from typing import Any

import msgspec

from ..errors import EmptyTranscriptError, ImportFormatError
from ..model import ContentBlock, Node, TextBlock
from ._defaults import SYNTHETIC_MODELS
from ._yaml_loader import yaml_line

__all__ = [
    "BOM",
    "GZIP_MAGIC",
    "MAX_GUNZIPPED_BYTES",
    "ImportedSession",
    "SessionBuilder",
    "decode_text",
    "empty",
    "fail",
    "file_key",
    "file_key_of",
    "file_size",
    "parse_time",
    "read_bytes",
    "session_id_for",
    "split_tool_results",
    "to_blocks",
    "tool_result_output",
]


class ImportedSession(msgspec.Struct, kw_only=True):
    """One session parsed from a file, not yet stored.

    ``key`` makes re-imports idempotent (a hash of the file's bytes plus the session's
    place in the file, or a transcript's own identity for a format that grows);
    ``nodes`` are in an order where every edge points backwards; ``head`` is the node
    HEAD should point at.  ``origins`` says where in the file a node came from — its
    line (a JSONL line) or its path in the document (``messages[3]``) — so a node
    refused before it is stored can be named by file:line.

    A transcript that grew since it was imported parses into the stored session's
    continuation: ``base`` is that session's id, ``nodes`` only the new ones (their
    edges may name stored nodes), ``metadata`` the whole new metadata and
    ``base_state`` the session's ``import_state`` the parse started from (the write
    checks it is still the stored one).  ``files`` lists every file the session was
    read from (a Claude Code session and its sub-agent transcripts).  ``id_seed``, when
    set, names the session and its nodes instead of ``key`` (an identity that does not
    depend on where the file is, while ``key`` does).
    """

    key: str
    source: str
    format: str
    nodes: list[Node]
    head: str | None
    metadata: dict[str, Any] = {}
    origins: dict[str, int | str] = {}
    base: str | None = None
    base_state: Any = None
    files: list[str] = []
    id_seed: str | None = None


def empty(path: str, message: str, hint: str) -> EmptyTranscriptError:
    """The error of a file that holds no conversation to import (see
    ``errors.EmptyTranscriptError``), in ``fail``'s form."""
    return EmptyTranscriptError(message, where=path, hint=f"{hint}; nothing was imported")


def fail(
    path: str, line: int | None, message: str, hint: str, *, at: str | None = None
) -> ImportFormatError:
    """The error every importer raises: what, where (file:line and JSON path) and what to do.

    For a JSON or YAML document ``at`` (e.g. ``[12].traj[5]``) names the element and
    the line is looked up from it.
    """
    if at and line is None:
        line = document_line(path, at)
    where = f"{path}:{line}" if line else path
    if at:
        where = f"{where} at {at}"
    return ImportFormatError(message, where=where, hint=f"{hint}; nothing was imported")


def document_line(path: str, at: str) -> int | None:
    """The line where the element ``at`` starts in a JSON or YAML file (error path only)."""
    try:
        text = read_bytes(path).decode("utf-8")  # a byte-order mark skipped, gzip read
    except (ImportFormatError, UnicodeDecodeError):
        return None
    line = json_line(text, at)
    if line is None and path.endswith((".yaml", ".yml", ".yaml.gz", ".yml.gz")):
        line = yaml_line(text, at)
    return line


#: The UTF-8 byte-order mark: Windows editors and tools (Notepad, PowerShell, .NET)
#: start UTF-8 files with it.  It is no part of the text; the readers skip it at the
#: start of a file (and only there: anywhere else it is a character like any other).
BOM = b"\xef\xbb\xbf"


#: The first two bytes of a gzip stream (RFC 1952).  A file starting with them is read
#: through gzip whatever its name: LangChain keeps its VCR cassettes as ``.yaml.gz``,
#: and a renamed or suffix-less copy is the same file.
GZIP_MAGIC = b"\x1f\x8b"

#: Most bytes a gzip-compressed file may expand to.  Deflate reaches ~1000:1, so a few
#: megabytes of hostile gzip could otherwise fill the memory; the largest recorded
#: transcripts are a few hundred megabytes.
MAX_GUNZIPPED_BYTES = 1 << 30


def read_bytes(path: str, limit: int = -1) -> bytes:
    """The file's bytes (the first ``limit`` only, if given) after a leading byte-order
    mark (``BOM``); a gzip-compressed file (``GZIP_MAGIC``) is read decompressed.  A
    missing or unreadable file, or a damaged gzip stream, is an ``ImportFormatError``."""
    try:
        with open(path, "rb") as fh:
            if not fh.seekable():
                data = fh.read(limit)
                if data.startswith(GZIP_MAGIC):
                    data = _gunzip(path, io.BytesIO(data), limit, cut=limit >= 0)
                return data[len(BOM) :] if data.startswith(BOM) else data
            if fh.read(len(GZIP_MAGIC)) == GZIP_MAGIC:
                fh.seek(0)
                data = _gunzip(path, fh, limit)
                return data[len(BOM) :] if data.startswith(BOM) else data
            fh.seek(0)
            if fh.read(len(BOM)) != BOM:
                fh.seek(0)
            return fh.read(limit)
    except FileNotFoundError:
        raise fail(path, None, "no such file", "check the path") from None
    except IsADirectoryError:
        raise fail(path, None, "is a directory", "pass the transcript files inside it") from None
    except OSError as exc:
        raise fail(path, None, f"cannot read: {exc.strerror}", "check permissions") from None


def _gunzip(path: str, raw: io.IOBase | Any, limit: int, *, cut: bool = False) -> bytes:
    # ``limit`` bounds the decompressed bytes (a detector's head); ``cut``: ``raw`` is
    # only the start of the file (a pipe's head), so a stream ending early is expected.
    want = MAX_GUNZIPPED_BYTES + 1 if limit < 0 else min(limit, MAX_GUNZIPPED_BYTES + 1)
    try:
        with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            data = gz.read(want)
    except EOFError:
        if cut:
            return _gunzip_start(raw, want)
        raise fail(
            path,
            None,
            "the gzip stream ends early (the file is truncated)",
            "download or copy the file again; `gzip -t FILE` checks it",
        ) from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise fail(
            path,
            None,
            f"damaged gzip stream: {exc}",
            "download or copy the file again; `gzip -t FILE` checks it",
        ) from None
    if len(data) > MAX_GUNZIPPED_BYTES:
        raise fail(
            path,
            None,
            f"the gzip stream expands to more than {MAX_GUNZIPPED_BYTES:,} bytes",
            "decompress it yourself and import the parts",
        )
    return data


def _gunzip_start(raw: Any, want: int) -> bytes:
    # What a cut gzip stream's start decompresses to (wbits 31: a gzip header).
    raw.seek(0)
    try:
        return zlib.decompressobj(31).decompress(raw.read(), want)
    except zlib.error:
        return b""


def file_size(path: str) -> int:
    """The size of the file's content: decompressed for a gzip-compressed file (what
    an import's budget is measured against), else the file's size; 0 if unreadable."""
    try:
        with open(path, "rb") as fh:
            gz = fh.read(len(GZIP_MAGIC)) == GZIP_MAGIC
        return len(read_bytes(path)) if gz else os.path.getsize(path)
    except (OSError, ImportFormatError):
        return 0


def session_id_for(key: str) -> str:
    """The session id an import key gets (stable: the same file names the same session)."""
    return "s_" + hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


def file_key(data: bytes) -> str:
    """Content hash identifying one version of a file (the import key's base)."""
    return hashlib.sha256(data).hexdigest()[:32]


def file_key_of(path: str) -> str:
    """``file_key`` of a file's bytes, read in chunks (the file is never held whole); of
    its decompressed bytes for a gzip-compressed file, so ``x.yaml`` and ``x.yaml.gz``
    are one version of one file."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            gz = fh.read(len(GZIP_MAGIC)) == GZIP_MAGIC
            fh.seek(0)
            if gz:
                digest.update(read_bytes(path))  # read whole anyway by every importer
            else:
                while chunk := fh.read(1 << 20):
                    digest.update(chunk)
    except OSError:
        read_bytes(path, 0)  # raises the precise error
        raise
    return digest.hexdigest()[:32]


def decode_text(path: str, data: bytes, *, line: int = 1) -> str:
    """UTF-8 text of a file (or of its part starting on ``line``), or an error naming the
    line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line += data.count(b"\n", 0, exc.start)
        raise fail(path, line, "not UTF-8 text", "convert the file to UTF-8") from None


def parse_time(value: Any, *, path: str, line: int | None = None, at: str | None = None) -> float:
    """Epoch seconds from an ISO-8601 string or a number; 0.0 when absent or unreadable.

    A number that is not finite (``NaN``, ``inf``, ``1e999``) or too large for a float
    (``10**400``) is an ``ImportFormatError`` naming ``path``:``line`` (or ``at``): a
    time ctxrules cannot compare with another is refused, not stored.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
        if not math.isfinite(seconds):
            shown = (
                repr(value)
                if isinstance(value, float)  # str() of a huge int hits Python's digit limit
                else f"10**{int(abs(value).bit_length() * math.log10(2))} (an integer)"
            )
            raise fail(
                path,
                line,
                f"the timestamp {shown} is not a finite number of epoch seconds",
                "fix the timestamp or remove it",
                at=at,
            )
        return seconds
    if isinstance(value, str) and value:
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=timezone.utc)
            return dt.timestamp()
        except (ValueError, OverflowError):
            return 0.0
    return 0.0


def to_blocks(raw: list[Any], meta: dict[str, Any], *, offset: int = 0) -> list[ContentBlock]:
    """Convert provider block dicts into model blocks.

    A block the model has no type for (``document``, ``server_tool_use``, …) becomes a
    text block holding its JSON, and is recorded in ``meta["converted_blocks"]`` (its
    index in the node's output — ``offset`` plus its place in ``raw`` — its type and
    the original) so nothing is dropped.
    """
    blocks: list[ContentBlock] = []
    for i, item in enumerate(raw):
        if isinstance(item, str):
            blocks.append(TextBlock(text=item))
            continue
        try:
            blocks.append(msgspec.convert(item, ContentBlock))
        except (msgspec.ValidationError, TypeError):
            text = json.dumps(item, ensure_ascii=False, sort_keys=True)
            blocks.append(TextBlock(text=text))
            kind = item.get("type", "?") if isinstance(item, dict) else type(item).__name__
            meta.setdefault("converted_blocks", []).append(
                {"index": offset + i, "type": kind, "original": item}
            )
    return blocks


def split_tool_results(content: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """A user turn's blocks as ``(tool_result blocks, every other block)``."""
    results: list[dict[str, Any]] = []
    others: list[Any] = []
    for blk in content:
        if isinstance(blk, dict) and blk.get("type") == "tool_result":
            results.append(blk)
        else:
            others.append(blk)
    return results, others


def tool_result_output(res: dict[str, Any], meta: dict[str, Any]) -> Any:
    """The content of a ``tool_result`` block as a tool node's ``output``.

    Text stays text, a block list is converted (see ``to_blocks``), a missing content
    is ``""`` and any other value is kept as its JSON text.
    """
    out = res.get("content", "")
    if isinstance(out, list):
        return to_blocks(out, meta)
    if out is None:
        return ""
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)


class _Record:
    """A node under construction (mutable until ``SessionBuilder.build``)."""

    __slots__ = ("fields", "origin", "pos")

    def __init__(self, pos: float, fields: dict[str, Any], origin: int | str | None):
        self.pos = pos
        self.fields = fields
        self.origin = origin


class SessionBuilder:
    """Collects the nodes of one imported session and orders them."""

    def __init__(self, key: str, source: str, fmt: str, *, seed: str | None = None):
        self.key = key
        self.seed = seed
        self.source = source
        self.format = fmt
        self.metadata: dict[str, Any] = {}
        self.head: str | None = None
        self.records: dict[str, _Record] = {}
        #: Nodes an earlier import of the same transcript stored already.
        self.stored: set[str] = set()
        self._count = 0

    def node_id(self, local: str) -> str:
        """The id of the node known locally as ``local`` (stable for the same key)."""
        base = self.seed or self.key
        return "n_" + hashlib.blake2b(f"{base}|{local}".encode(), digest_size=12).hexdigest()

    def add(
        self,
        role: str,
        output: Any = "",
        *,
        pos: float,
        local: str | None = None,
        name: str = "",
        input: Any = None,
        predecessor: str | None = None,
        caller: str | None = None,
        metadata: dict[str, Any] | None = None,
        created_at: float = 0.0,
        line: int | None = None,
        at: str | None = None,
    ) -> str:
        """Add a node; returns its id.  ``pos`` orders it (file line or index); ``line``
        (a JSONL line) or ``at`` (a path in the document) says where it came from."""
        self._count += 1
        nid = self.node_id(local if local is not None else f"auto:{self._count}")
        self.records[nid] = _Record(
            pos,
            {
                "id": nid,
                "seq": 0,
                "created_at": created_at,
                "role": role,
                "name": name,
                "input": input,
                "output": output,
                "predecessor": predecessor,
                "caller": caller,
                "metadata": metadata or {},
            },
            line or at,
        )
        return nid

    def get(self, nid: str) -> dict[str, Any]:
        """The editable fields of a node added earlier."""
        return self.records[nid].fields

    def first_model(self) -> str:
        """The model of the first assistant node that names one (in file order), ``""``
        if none does; a model Claude Code writes on messages it made itself is no model."""

        named = [
            r
            for r in self.records.values()
            if r.fields["role"] == "assistant"
            and r.fields["name"]
            and r.fields["name"] not in SYNTHETIC_MODELS
        ]
        return str(min(named, key=lambda r: r.pos).fields["name"]) if named else ""

    def mark_stored(self) -> None:
        """Note that every node added so far is stored already (an earlier import of a
        transcript that grew since); ``build`` leaves them out."""
        self.stored.update(self.records)

    def build(self) -> ImportedSession:
        """Freeze the records into ``Node``s, parents before children, else by ``pos``
        (the nodes ``mark_stored`` noted are left out).

        The session metadata gains ``model`` (``first_model``, unless the importer set
        one) and ``recorded_at``: the earliest time a node has, when the file records
        times (the session's "created" when it is listed).
        """
        meta = self.metadata
        if "model" not in meta and (model := self.first_model()):
            meta["model"] = model
        times = [t for r in self.records.values() if (t := r.fields["created_at"]) > 0]
        if times and "recorded_at" not in meta:
            meta["recorded_at"] = min(times)
        order: list[str] = []
        done: set[str] = set()
        by_pos = sorted(self.records, key=lambda nid: self.records[nid].pos)
        for start in by_pos:
            stack = [start]
            on_stack = {start}  # a set beside the stack: membership stays O(1)
            while stack:  # iterative DFS: emit a node after the nodes its edges name
                nid = stack[-1]
                if nid in done:
                    stack.pop()
                    continue
                f = self.records[nid].fields
                deps = [
                    d
                    for d in (f["predecessor"], f["caller"])
                    if d is not None and d not in done and d in self.records and d not in on_stack
                ]
                if deps:
                    stack.extend(deps)
                    on_stack.update(deps)
                    continue
                stack.pop()
                done.add(nid)
                order.append(nid)
        stored = self.stored
        nodes = [Node(**self.records[n].fields) for n in order if n not in stored]
        return ImportedSession(
            key=self.key,
            source=self.source,
            format=self.format,
            nodes=nodes,
            head=self.head,
            metadata=self.metadata,
            origins={
                nid: r.origin
                for nid, r in self.records.items()
                if r.origin is not None and nid not in stored
            },
            id_seed=self.seed,
        )


_PATH_STEP = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(\d+)\]")
_WS = re.compile(r"[ \t\n\r]*")


def json_line(text: str, at: str) -> int | None:
    """The line where the element ``at`` (``key[3].other``) starts in a JSON file's text.

    Only used on the error path, so it simply hops over sibling values with the stdlib
    decoder; ``None`` if the text is not such JSON.
    """
    dec = json.JSONDecoder()

    def ws(i: int) -> int:
        m = _WS.match(text, i)
        return m.end() if m else i

    pos = ws(0)
    try:
        for step in _PATH_STEP.finditer(at):
            key, index = step.group(1), step.group(2)
            if key is not None and text.startswith("{", pos):
                pos = ws(pos + 1)
                while not text.startswith("}", pos):
                    name, end = dec.raw_decode(text, pos)
                    pos = ws(ws(end) + 1)  # past the colon
                    if name == key:
                        break
                    pos = ws(dec.raw_decode(text, pos)[1])
                    pos = ws(pos + 1) if text.startswith(",", pos) else pos
                else:
                    return None
            elif index is not None and text.startswith("[", pos):
                pos = ws(pos + 1)
                for _ in range(int(index)):
                    pos = ws(dec.raw_decode(text, pos)[1])
                    pos = ws(pos + 1) if text.startswith(",", pos) else pos
            else:
                return None  # not JSON of that shape (a YAML cassette, say)
    except (ValueError, IndexError, RecursionError):
        return None
    return text.count("\n", 0, pos) + 1


# A value closing at the end of a line and one opening on the next: outside a string
# that is two values, and a JSON string cannot hold a raw newline.
