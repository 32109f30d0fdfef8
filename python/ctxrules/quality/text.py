"""The text of a rendered request: every system and message string the model is sent.

Walks the decoded body of any provider (Anthropic ``system`` / ``messages``, Chat
Completions ``messages``, Responses ``instructions`` / ``input``, Gemini
``systemInstruction`` / ``contents``, or a plugin's shape) and keeps every string value
except the tool declarations and the wire's bookkeeping (model, roles, types, call
ids, signatures).  A string that holds JSON (Chat Completions' tool ``arguments``) is
kept as sent and also read as the data it encodes, so an argument is found as the
model reads it, unescaped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

import msgspec

from .facts import normalize

__all__ = ["SKIPPED_KEYS", "RequestTexts", "request_strings", "request_text"]

#: Keys whose values are not text the model reads as conversation: the tool
#: declarations, and the fields that only route or sign the request.
SKIPPED_KEYS = frozenset(
    {
        "tools",
        "tool_choice",
        "toolConfig",
        "tool_config",
        "model",
        "role",
        "type",
        "id",
        "tool_use_id",
        "tool_call_id",
        "call_id",
        "signature",
        "thoughtSignature",
        "thought_signature",
        "cache_control",
        "name",
        "media_type",
        "mime_type",
        "mimeType",
        "data",
        "encrypted_content",
    }
)


def _decoded(text: str) -> Any:
    if text[:1] in ("{", "[") and text[-1:] in ("}", "]"):
        try:
            return json.loads(text)
        except ValueError:
            return None
    return None


def request_strings(value: Any) -> Iterator[str]:
    """Every string of a decoded request body that the model reads (depth first)."""
    out: list[str] = []
    _collect(value, out)
    return iter(out)


def _collect(value: Any, out: list[str]) -> None:
    """``request_strings`` of ``value`` appended to ``out`` (a walk of plain calls: a
    chain of nested generators costs a resumption per level for every string)."""
    if isinstance(value, str):
        out.append(value)  # as sent (a JSON tool result keeps its numbers)
        inner = _decoded(value)
        if inner is not None:
            _collect(inner, out)  # and as the data it encodes
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in SKIPPED_KEYS:
                _collect(item, out)
    elif isinstance(value, list):
        for item in value:
            _collect(item, out)


#: A body's top-level fields, and a conversation's entries, left undecoded.
_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ENTRIES = msgspec.json.Decoder(list[msgspec.Raw])


def _text(value: Any) -> str:
    out: list[str] = []
    _collect(value, out)
    return normalize(" ".join(out))


def request_text(body: bytes, memo: dict[bytes, str] | None = None) -> str:
    """The whitespace-normalised text of a request body (JSON bytes), strings joined by
    a space: what a fact must appear in to count as kept.

    ``memo`` is for a caller reading many requests of one session (``session_recall``):
    the text of each entry of a top-level list (the messages, contents or input items)
    is kept by the entry's bytes, so an entry the previous request sent as well is not
    decoded again — only the new ones are.  The text is the same with or without it
    (whitespace runs are one space, so the text of the parts joined is the parts'
    texts joined).  ``RequestTexts`` reads a sequence of requests, each from the one
    before."""
    if memo is None or body[:1] != b"{":
        return _text(msgspec.json.decode(body))
    return RequestTexts(memo).text(body)


class _Resume(NamedTuple):
    """A place in the body last read where reading may go on: just after an entry of a
    top-level list (``end``, exclusive), with the number of parts read by then and the
    top-level keys met by then (the list's own included)."""

    end: int
    parts: int
    keys: frozenset[str]


#: The key a body's remainder is read under, as the list it continues: ``{KEY:[null``
#: followed by the bytes after the last entry the previous body shares.
_RESUME_KEY = "\x00ctxrules:resume"
_RESUME = b"{" + msgspec.json.encode(_RESUME_KEY) + b":[null"


class _Unresumable(Exception):
    """The remainder of a body cannot be read on its own: read the body whole."""


class RequestTexts:
    """``request_text`` (with ``memo``) of a sequence of request bodies — a replay's
    requests in order — each read from the one before.

    A session's next request repeats the previous one's bytes up to some message (a
    cache marker moved, a rule rewrote one, or simply the new messages): the longest
    such prefix that ends just after an entry of a top-level list is found (by
    comparing bytes, no decoding), and only the bytes after it are split and read —
    the parts before it are the previous body's.  The text is exactly
    ``request_text(body)``'s: the remainder is read as the JSON object
    ``{KEY:[null`` + remainder, which parses exactly as the rest of the body does
    (same bytes, same parser state); its layout is checked byte for byte (each key,
    each value, each separator at its place, nothing else), so a body written another
    way (whitespace, a key repeated) is read whole, as ``request_text`` reads it.

    ``bytes_split`` counts the bytes handed to the JSON decoder to split (the whole
    body on a first read, the remainder after), ``resumed`` the bodies read from the
    previous one."""

    def __init__(self, memo: dict[bytes, str] | None = None) -> None:
        self.memo: dict[bytes, str] = {} if memo is None else memo
        self.bytes_split = 0
        self.resumed = 0
        self._body = memoryview(b"")
        self._parts: list[str] = []
        self._resumes: list[_Resume] = []

    def text(self, body: bytes) -> str:
        """``request_text(body, memo)``, reading from the previous body where it can."""
        if body[:1] != b"{":
            self._body, self._parts, self._resumes = memoryview(b""), [], []
            return _text(msgspec.json.decode(body))
        parts: list[str] | None = None
        at = self._shared(body)
        if at is not None:
            start = self._resumes[at]
            try:
                parts = self._read(
                    _RESUME + body[start.end :],
                    len(_RESUME) - start.end,
                    self._parts[: start.parts],
                    start.keys,
                    self._resumes[: at + 1],
                    resumed=True,
                )
                self.resumed += 1
            except (_Unresumable, msgspec.DecodeError):
                parts = None
        if parts is None:
            parts = self._read(body, 0, [], frozenset(), [], resumed=False)
        self._body = memoryview(body)
        return " ".join(p for p in parts if p)

    def _shared(self, body: bytes) -> int | None:
        """The last resume place whose bytes before it ``body`` repeats (None: none);
        a body that repeats the bytes up to one repeats them up to every earlier one."""
        resumes, before = self._resumes, self._body
        lo, hi = 0, len(resumes) - 1
        found = None
        while lo <= hi:
            mid = (lo + hi) // 2
            if body.startswith(before[: resumes[mid].end]):
                found, lo = mid, mid + 1
            else:
                hi = mid - 1
        return found

    def _read(
        self,
        doc: bytes,
        shift: int,
        parts: list[str],
        keys: frozenset[str],
        resumes: list[_Resume],
        *,
        resumed: bool,
    ) -> list[str]:
        """Read ``doc`` (the body, or — ``resumed`` — ``{KEY:[null`` + the body's
        remainder; a doc's byte ``q`` is the body's ``q - shift``) after ``parts`` and
        ``keys`` (what the body's bytes before the remainder hold), adding the resume
        places found to ``resumes``; the parts of the whole body (the reader's state is
        now this body's)."""
        fields = _FIELDS.decode(doc)
        self.bytes_split += len(doc)
        memo = self.memo
        seen = set(keys)
        # Whether the layout so far is exactly the decoded keys and values, in order.
        exact = True
        pos = 1
        for n, (key, raw) in enumerate(fields.items()):
            continued = resumed and n == 0  # the previous body's list, read on
            if not continued:
                if key in seen:  # written twice: the dict keeps one of them
                    exact = False
                seen.add(key)
            name = msgspec.json.encode(key) + b":"
            exact = exact and doc.startswith(name, pos)
            pos += len(name)
            data = bytes(raw)
            if continued or (key not in SKIPPED_KEYS and data[:1] == b"["):
                entries = _ENTRIES.decode(data)
                exact = exact and doc.startswith(b"[", pos)
                p = pos + 1
                marked = frozenset(seen)
                for i, entry in enumerate(entries):
                    got = bytes(entry)
                    exact = exact and doc.startswith(got, p)
                    p += len(got)
                    if not (continued and i == 0):  # not the placeholder (``null``)
                        text = memo.get(got)
                        if text is None:
                            text = memo[got] = _text(msgspec.json.decode(got))
                        parts.append(text)
                        if exact:
                            resumes.append(_Resume(p - shift, len(parts), marked))
                    p += 1  # the "," or "]" after it (the list's length checks them)
                exact = exact and len(data) == p - pos and data[-1:] == b"]" if entries else exact
            elif key not in SKIPPED_KEYS:
                parts.append(_text(msgspec.json.decode(data)))
            exact = exact and doc.startswith(data, pos)
            pos += len(data)
            exact = exact and doc[pos : pos + 1] == (b"," if n + 1 < len(fields) else b"}")
            pos += 1
        exact = exact and pos == len(doc)
        if resumed and not exact:
            raise _Unresumable
        self._parts = parts
        self._resumes = resumes if exact else []
        return parts
