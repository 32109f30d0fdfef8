"""Reading JSON for the importers: bounded decoding with errors that name the line.

Every JSON value an importer reads (a whole document or one JSONL line) goes through
``decode_json``: msgspec first (fast, and it refuses lone surrogates, numbers out of
range and nesting deeper than the interpreter's recursion), the stdlib parser only
when msgspec refuses, to say which line is wrong or to repair a cut-off surrogate pair.
Whatever Python's own limits refuse (nesting, integers of thousands of digits, floats
that overflow to ``inf``, ``NaN``) becomes one ``ImportFormatError`` naming file:line.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import re
import stat
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import msgspec

from ..errors import ImportFormatError, TranscriptWarning
from ..limits import MAX_NESTING
from ._common import (
    BOM,
    GZIP_MAGIC,
    ImportedSession,
    decode_text,
    fail,
    file_key_of,
    read_bytes,
)

__all__ = [
    "JsonImporter",
    "JsonlFile",
    "decode_json",
    "detached",
    "forget_json",
    "load_json",
    "loads_strict",
    "open_jsonl",
    "repair_surrogates",
]

_decoder = msgspec.json.Decoder()

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


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is too large for a 64-bit float")
    return value


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses what JSON has no number for: ``NaN``, ``Infinity`` and
    floats overflowing to ``inf`` raise ``ValueError`` (stored, they would turn into
    ``null``)."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)


# One token of JSON text, for the error path only: strings are skipped whole.
_TOKEN = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|[\]}]|NaN|-?Infinity|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?'
)


def _deepest(text: str) -> tuple[int, int]:
    """The deepest nesting in JSON text and the offset where it is first reached."""
    depth = best = at = 0
    for m in _TOKEN.finditer(text):
        c = m.group()[0]
        if c in "[{":
            depth += 1
            if depth > best:
                best, at = depth, m.start()
        elif c in "]}":
            depth -= 1
    return best, at


def _bad_number(text: str) -> tuple[int, str] | None:
    """The first number Python cannot read as JSON reads it, and why."""
    # The digit limit exists since Python 3.11 (and 3.10.7); without one, any length reads.
    digits = getattr(sys, "get_int_max_str_digits", lambda: 0)() or math.inf
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok[0] in '"[]{}':
            continue
        if tok in ("NaN", "Infinity", "-Infinity"):
            return m.start(), f"{tok} is not a JSON number"
        if any(c in tok for c in ".eE"):
            if math.isinf(float(tok)):
                return m.start(), f"the number {tok[:40]} is too large for a 64-bit float"
        elif len(tok.lstrip("-")) > digits:
            return m.start(), (
                f"an integer of {len(tok.lstrip('-')):,} digits (Python reads at most {digits:,})"
            )
    return None


def _line_at(text: str, pos: int, first: int) -> int:
    return first + text.count("\n", 0, pos)


def _too_deep(path: str, text: str, first: int) -> Exception:
    depth, pos = _deepest(text)
    return fail(
        path,
        _line_at(text, pos, first),
        f"JSON nested {depth:,} levels deep; ctxrules reads at most {MAX_NESTING} levels "
        "of lists/objects in a value (limits.MAX_NESTING)",
        "flatten that value or remove it",
    )


_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_AT_BYTE = re.compile(r"^(?:JSON is malformed: )?(.*?)(?: \(byte (\d+)\))?$")


def decode_json(
    path: str, data: bytes | memoryview, *, line: int = 1, cut: bool | None = None
) -> Any:
    """Decode one JSON value of a file; any failure is an ``ImportFormatError``.

    ``line`` is the file line ``data`` starts on (a JSONL line's number).  ``cut`` says
    whether a syntax error means the data was cut off (the last line of a file without
    its newline); ``None`` decides by whether the error is at the very end.  A syntax
    error is located from msgspec's byte offset, so a big file is never decoded to text
    just to say where it is broken.
    """
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError:
        pass  # a number msgspec cannot hold: the stdlib reads it or says why not
    except msgspec.DecodeError as exc:
        # Surrogate halves (msgspec calls them "truncated") and bad UTF-8: the stdlib
        # repairs the first and locates the second; everything else is a syntax error.
        if not _SURROGATE_BYTES.search(data) and "UTF-8" not in str(exc):
            raise _syntax_error(path, bytes(data), str(exc), line, cut) from None
    except RecursionError:
        raise _too_deep(path, decode_text(path, bytes(data), line=line), line) from None
    # Without the final line break, an error at the end is on the last line of text.
    text = decode_text(path, bytes(data), line=line).rstrip("\r\n")
    try:
        return repair_surrogates(loads_strict(text), text)
    except json.JSONDecodeError as exc:
        raise _syntax_error(path, text.encode(), exc.msg, line, cut, exc.pos) from None
    except RecursionError:
        raise _too_deep(path, text, line) from None
    except ValueError as exc:  # an integer past Python's digit limit, inf, NaN
        found = _bad_number(text)
        pos, why = found if found is not None else (0, str(exc))
        raise fail(
            path,
            _line_at(text, pos, line),
            why,
            "write such values as strings, or remove them",
        ) from None


class _CutOff(ImportFormatError):
    """The JSON ends early: its data was cut off."""


def _syntax_error(
    path: str, data: bytes, message: str, line: int, cut: bool | None, pos: int | None = None
) -> Exception:
    m = _AT_BYTE.match(message)
    reason = m.group(1) if m else message
    if pos is None:
        pos = int(m.group(2)) if m and m.group(2) else len(data)
    body = data.rstrip()
    at_end = pos >= len(body) or reason == "Input data was truncated"
    pos = min(pos, len(body))
    lineno = line + body.count(b"\n", 0, pos)
    if cut if cut is not None else at_end:
        err = fail(
            path,
            lineno,
            "the JSON ends early: the file looks truncated",
            "re-copy the complete file" + (" (or drop its last line)" if cut else ""),
        )
        return _CutOff(err.message, where=err.where, hint=err.hint)
    column = pos - (body.rfind(b"\n", 0, pos) + 1) + 1
    for word in (b"NaN", b"Infinity", b"-Infinity"):
        if body.startswith(word, pos):
            reason = f"{word.decode()} is not a JSON number"
    return fail(
        path,
        lineno,
        f"bad JSON: {reason} (column {column})",
        "fix the JSON or pass the right file",
    )


def detached(exc: ImportFormatError) -> ImportFormatError:
    """``exc`` without its traceback and context, whose frames may hold a file's bytes
    (for an error kept after its parse: a cached or a detection error)."""
    exc.__traceback__ = exc.__context__ = exc.__cause__ = None
    return exc


_NONBLANK = re.compile(rb"[^ \t\r\n]")


class JsonlFile:
    """An open JSON Lines file, read one line at a time from a read-only mapping (a
    gzip-compressed file: from its decompressed bytes).

    ``values(until)`` yields ``(line number, value)`` for the lines that start before
    byte ``until`` (all when ``None``) and can be called again to go on where it
    stopped; ``end`` is the byte offset after the last line read.  Each line is decoded
    straight from the mapping, so an import holds the values, never the file's bytes
    or text (a line of 50 MB is not copied before it is decoded); blank lines are
    skipped.  A last line without its newline whose JSON ends early (a live session
    being written) is skipped with a ``TranscriptWarning`` naming file:line, and
    ``end`` stays before it; a broken line anywhere else is an ``ImportFormatError``.
    """

    def __init__(
        self,
        path: str,
        mapped: mmap.mmap | bytes | None,
        *,
        quiet: bool = False,
        glued: bool = False,
    ):
        self.path = path
        self.quiet = quiet
        #: Split a line holding several JSON values written without a newline between
        #: them (a writer's race, found in real Claude Code transcripts) into its values.
        self.glued = glued
        #: The lines that held more than one value.
        self.glued_lines: list[int] = []
        self._mapped = mapped
        self._view = memoryview(mapped) if mapped is not None else None
        self.size = len(mapped) if mapped is not None else 0
        #: Byte offset after the last line read (a leading byte-order mark is skipped).
        self.end = len(BOM) if mapped is not None and mapped[: len(BOM)] == BOM else 0
        #: Where the last value yielded came from: its (start, stop) byte offsets.
        self.span = (0, 0)
        self._no = 0
        self._done = False

    def values(self, until: int | None = None) -> Iterator[tuple[int, Any]]:
        """The values of the lines that start before byte ``until``, with their numbers."""
        mapped, view = self._mapped, self._view
        if mapped is None or view is None:
            return
        limit = self.size if until is None else min(until, self.size)
        while self.end < limit and not self._done:
            pos = self.end
            nl = mapped.find(b"\n", pos)
            stop = self.size if nl < 0 else nl + 1
            self._no += 1
            if _NONBLANK.search(mapped, pos, stop) is None:
                self.end = stop
                continue
            line = view[pos:stop]
            parts: list[Any] | None = None
            # Released before the mapping closes, also when the line is refused: an
            # error's frames may still refer to it.
            try:
                value = decode_json(self.path, line, line=self._no, cut=False if nl >= 0 else None)
            except _CutOff:
                self._done = True
                if self.quiet:
                    return
                warnings.warn(
                    f"{self.path}:{self._no}: the last line is cut off (no newline, its JSON "
                    "ends early, as in a session still being written): skipped; import the "
                    "file again once it is complete",
                    TranscriptWarning,
                    stacklevel=2,
                )
                return
            except ImportFormatError as exc:
                parts = _glued(line) if self.glued else None
                if parts is None:
                    raise detached(exc) from None
                self.glued_lines.append(self._no)
                value = _GLUED
            finally:
                line.release()
            self.end = stop
            self.span = (pos, stop)
            if value is _GLUED:
                for part in parts or ():
                    yield self._no, part
            else:
                yield self._no, value

    def again(self) -> JsonlFile:
        """A second reader of the same file from its start, that warns of nothing (to
        peek at the first lines before the real read)."""
        return JsonlFile(self.path, self._mapped, quiet=True, glued=self.glued)

    def digest(self, start: int = 0, stop: int | None = None) -> str:
        """SHA-256 (hex) of the file's bytes from ``start`` to ``stop`` (the end)."""
        digest = hashlib.sha256()
        if self._view is not None:
            part = self._view[start : self.size if stop is None else stop]
            try:
                digest.update(part)
            finally:
                part.release()
        return digest.hexdigest()

    def close(self) -> None:
        """Release the view of the mapping (before the file closes)."""
        if self._view is not None:
            self._view.release()
            self._view = None


_GLUED = object()


def _glued(line: memoryview) -> list[Any] | None:
    """The values of a line holding two or more JSON objects back to back (``}{``),
    or ``None`` when it is not that (a broken line is reported as such)."""
    try:
        text = bytes(line).decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    dec, pos, out = json.JSONDecoder(), 0, []
    try:
        while pos < len(text):
            value, end = dec.raw_decode(text, pos)
            if not isinstance(value, dict):
                return None
            out.append(value)
            pos = end
    except (ValueError, RecursionError):
        return None
    return out if len(out) > 1 else None


@contextmanager
def open_jsonl(path: str, *, glued: bool = False) -> Iterator[JsonlFile]:
    """Open a JSON Lines file for reading (see ``JsonlFile``; ``glued``: split a line of
    objects written back to back); a pipe or other non-regular file is refused, since an
    import may read it more than once."""
    try:
        fh = open(path, "rb")
    except OSError:
        read_bytes(path, 0)  # raises the precise error
        raise
    with fh:
        if fh.read(len(GZIP_MAGIC)) == GZIP_MAGIC:
            # A compressed transcript is held decompressed (no mapping of gzip).
            yield JsonlFile(path, read_bytes(path), glued=glued)
            return
        fh.seek(0)
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise fail(
                path,
                None,
                "not a regular file (a pipe?): it is read twice",
                "save the transcript to a file and import that",
            )
        if info.st_size == 0:
            yield JsonlFile(path, None, glued=glued)
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            reader = JsonlFile(path, mapped, glued=glued)
            try:
                yield reader
            finally:
                reader.close()


@lru_cache(maxsize=4)
def _load_json_cached(path: str, mtime_ns: int, size: int) -> tuple[Any, ImportFormatError | None]:
    # A failure is cached too: every JSON detector asks about the same file.  Without
    # its traceback, the error does not keep the file's bytes alive in its frames.
    try:
        return decode_json(path, read_bytes(path)), None
    except ImportFormatError as exc:
        return None, detached(exc)


def forget_json() -> None:
    """Drop the decoded documents ``load_json`` keeps for a parse after its detection."""
    _load_json_cached.cache_clear()


def load_json(path: str) -> Any:
    """Parse a JSON file once (detection and parsing share the result)."""
    try:
        st = os.stat(path)
        value, error = _load_json_cached(path, st.st_mtime_ns, st.st_size)
    except OSError:
        value, error = _load_json_cached(path, 0, -1)  # read_bytes names the problem
    if error is not None:
        raise detached(error)
    return value


_TWO_VALUES = re.compile(rb"[}\]][ \t\r]*\n[ \t\r\n]*[{\[]")


class JsonImporter:
    """Base of the importers whose file is one JSON document.

    A subclass sets ``name`` / ``description`` and implements ``claims(data)`` (is this
    decoded document mine?) and ``sessions(path, data, key)``.  Detection and parsing
    share one decode (``load_json``), and every session's import key starts with
    ``"<name>:<hash of the file's bytes>"`` so the same bytes name the same sessions.
    A JSON document is decoded whole, so its import holds the decoded document (a few
    times the file's size in Python objects) while it runs.
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
        """The file starts like JSON and ``claims`` its document.

        A ``.jsonl`` file, or a value ending a line and another starting the next (JSON
        Lines), is never one document: such a file is refused from its name or head,
        without reading it whole.
        """
        if head.lstrip()[:1] not in (b"[", b"{") or path.endswith(".jsonl"):
            return False
        lines = _TWO_VALUES.search(head)
        if lines is not None:
            raise fail(
                path,
                head.count(b"\n", 0, lines.end()) + 1,
                "bad JSON: a second value starts here (JSON Lines, not one document)",
                "pass one JSON document, or a JSONL format with --format",
            )
        return self.claims(load_json(path))

    def parse(self, path: str) -> list[ImportedSession]:
        """Decode the file (once) and build its sessions."""
        key = f"{self.name}:{file_key_of(path)}"
        return self.sessions(path, load_json(path), key)
