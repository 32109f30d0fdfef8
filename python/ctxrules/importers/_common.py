"""Shared pieces of the importers: reading files, building sessions, converting blocks.

An importer builds each session with a ``SessionBuilder``: nodes get ids derived from
the session's import key (so importing the same bytes twice names the same nodes),
records stay editable until ``build()`` (a Claude Code assistant message is spread over
several lines), and ``build()`` orders the nodes so every edge points at an earlier
node while keeping file order wherever the edges allow.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import datetime
from functools import lru_cache
from typing import Any

import msgspec

from ..errors import ImportFormatError
from ..model import Call, ContentBlock, TextBlock

__all__ = [
    "ImportedSession",
    "JsonImporter",
    "SessionBuilder",
    "fail",
    "file_key",
    "load_json",
    "parse_time",
    "read_bytes",
    "split_tool_results",
    "to_blocks",
    "tool_result_output",
]


class ImportedSession(msgspec.Struct, kw_only=True):
    """One session parsed from a file, not yet stored.

    ``key`` makes re-imports idempotent (a hash of the file's bytes plus the session's
    place in the file); ``nodes`` are in an order where every edge points backwards;
    ``head`` is the node HEAD should point at.
    """

    key: str
    source: str
    format: str
    nodes: list[Call]
    head: str | None
    metadata: dict[str, Any] = {}


def fail(
    path: str, line: int | None, message: str, hint: str, *, at: str | None = None
) -> ImportFormatError:
    """The error every importer raises: what, where (file:line and JSON path) and what to do.

    For a JSON document ``at`` (e.g. ``[12].traj[5]``) names the element and the line
    is looked up from it.
    """
    if at and line is None:
        line = json_line(path, at)
    where = f"{path}:{line}" if line else path
    if at:
        where = f"{where} at {at}"
    return ImportFormatError(message, where=where, hint=f"{hint}; nothing was imported")


_PATH_STEP = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(\d+)\]")
_WS = re.compile(r"[ \t\n\r]*")


def json_line(path: str, at: str) -> int | None:
    """The line where the element ``at`` (``key[3].other``) starts in a JSON file.

    Only used on the error path, so it simply re-reads the file and hops over sibling
    values with the stdlib decoder; ``None`` if the file is not such JSON.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError):
        return None
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
    except (json.JSONDecodeError, IndexError):
        return None
    return text.count("\n", 0, pos) + 1


def read_bytes(path: str, limit: int = -1) -> bytes:
    """The file's bytes (the first ``limit`` only, if given); a missing or unreadable
    file is an ``ImportFormatError``."""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except FileNotFoundError:
        raise fail(path, None, "no such file", "check the path") from None
    except IsADirectoryError:
        raise fail(path, None, "is a directory", "pass the transcript files inside it") from None
    except OSError as exc:
        raise fail(path, None, f"cannot read: {exc.strerror}", "check permissions") from None


def file_key(data: bytes) -> str:
    """Content hash identifying one version of a file (the import key's base)."""
    return hashlib.sha256(data).hexdigest()[:32]


def decode_text(path: str, data: bytes) -> str:
    """UTF-8 text of a file, or an error naming the line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise fail(path, line, "not UTF-8 text", "convert the file to UTF-8") from None


# JSON may escape half of a surrogate pair ("\\ud83d" from a cut-off emoji): Python
# decodes it into a str that cannot be written as UTF-8.  Such halves are replaced by
# U+FFFD at import, the one change an importer makes to content, because no store
# (nor any provider) can hold them.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def repair_surrogates(value: Any, raw: str) -> Any:
    """``value`` with lone surrogates replaced by U+FFFD (a no-op unless ``raw`` escapes one)."""
    if not _SURROGATE_ESCAPE.search(raw):
        return value
    return _repair(value)


def _repair(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_repair(v) for v in value]
    if isinstance(value, dict):
        return {_repair(k): _repair(v) for k, v in value.items()}
    return value


@lru_cache(maxsize=4)
def _load_json_cached(path: str, mtime_ns: int, size: int) -> Any:
    data = read_bytes(path)
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        pass
    text = decode_text(path, data)
    try:  # the stdlib parser says which line is wrong
        return repair_surrogates(json.loads(text), text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()):
            raise fail(
                path,
                exc.lineno,
                "the JSON ends early: the file looks truncated",
                "re-copy the complete file",
            ) from None
        raise fail(
            path,
            exc.lineno,
            f"bad JSON: {exc.msg} (column {exc.colno})",
            "fix the JSON or pass the right file",
        ) from None


def load_json(path: str) -> Any:
    """Parse a JSON file once (detection and parsing share the result)."""
    try:
        st = os.stat(path)
    except OSError:
        return _load_json_cached(path, 0, -1)  # read_bytes raises the precise error
    return _load_json_cached(path, st.st_mtime_ns, st.st_size)


class JsonImporter:
    """Base of the importers whose file is one JSON document.

    A subclass sets ``name`` / ``description`` and implements ``claims(data)`` (is this
    decoded document mine?) and ``sessions(path, data, key)``.  Detection and parsing
    share one decode (``load_json``), and every session's import key starts with
    ``"<name>:<hash of the file's bytes>"`` so the same bytes name the same sessions.
    """

    name: str
    description: str
    auto = True

    def claims(self, data: Any) -> bool:
        """Whether the decoded document is of this format."""
        raise NotImplementedError

    def sessions(self, path: str, data: Any, key: str) -> list[ImportedSession]:
        """The sessions of the decoded document; ``ImportFormatError`` if it is not one."""
        raise NotImplementedError

    def detect(self, path: str, head: bytes) -> bool:
        """The file starts like JSON and ``claims`` its document."""
        return head.lstrip()[:1] in (b"[", b"{") and self.claims(load_json(path))

    def parse(self, path: str) -> list[ImportedSession]:
        """Decode the file (once) and build its sessions."""
        key = f"{self.name}:{file_key(read_bytes(path))}"
        return self.sessions(path, load_json(path), key)


def parse_time(value: Any) -> float:
    """Epoch seconds from an ISO-8601 string or a number; 0.0 when absent or unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value:
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return 0.0
        if dt.tzinfo is None:
            from datetime import timezone

            dt = dt.replace(tzinfo=timezone.utc)
        return dt.timestamp()
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

    __slots__ = ("fields", "pos")

    def __init__(self, pos: float, fields: dict[str, Any]):
        self.pos = pos
        self.fields = fields


class SessionBuilder:
    """Collects the nodes of one imported session and orders them."""

    def __init__(self, key: str, source: str, fmt: str):
        self.key = key
        self.source = source
        self.format = fmt
        self.metadata: dict[str, Any] = {}
        self.head: str | None = None
        self.records: dict[str, _Record] = {}
        self._count = 0

    def node_id(self, local: str) -> str:
        """The id of the node known locally as ``local`` (stable for the same key)."""
        return "n_" + hashlib.blake2b(f"{self.key}|{local}".encode(), digest_size=12).hexdigest()

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
    ) -> str:
        """Add a node; returns its id.  ``pos`` orders it (file line or index)."""
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
        )
        return nid

    def get(self, nid: str) -> dict[str, Any]:
        """The editable fields of a node added earlier."""
        return self.records[nid].fields

    def build(self) -> ImportedSession:
        """Freeze the records into ``Call``s, parents before children, else by ``pos``."""
        order: list[str] = []
        done: set[str] = set()
        by_pos = sorted(self.records, key=lambda nid: self.records[nid].pos)
        for start in by_pos:
            stack = [start]
            while stack:  # iterative DFS: emit a node after the nodes its edges name
                nid = stack[-1]
                if nid in done:
                    stack.pop()
                    continue
                f = self.records[nid].fields
                deps = [
                    d
                    for d in (f["predecessor"], f["caller"])
                    if d is not None and d not in done and d in self.records and d not in stack
                ]
                if deps:
                    stack.extend(deps)
                    continue
                stack.pop()
                done.add(nid)
                order.append(nid)
        nodes = [Call(**self.records[n].fields) for n in order]
        return ImportedSession(
            key=self.key,
            source=self.source,
            format=self.format,
            nodes=nodes,
            head=self.head,
            metadata=self.metadata,
        )
