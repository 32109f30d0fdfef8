"""Exact facts of a conversation: identifiers, constraints, error lines, files, todos.

No model.  One definition shared by the offline summarizer, which lifts these facts
into its summary, and by ``ctxrules.quality``, which checks that a compacted request
still holds them: two pattern sets would drift, and a summarizer keeping
"identifiers" the checker does not count (or the reverse) would be measured wrong.

- ``identifiers_in``: file paths and file names, URLs, UUIDs and hashes, ids (a token
  mixing letters and digits, such as ``mia_li_3668`` or ``HAT038``), dates, numbers
  with a unit or currency or of at least three digits.
- ``constraints_in``: sentences outside code blocks that state a rule (must, never,
  don't, only, always, should, avoid, make sure, …), at least three words; one over
  ``MAX_FACT_CHARS`` is kept by its beginning.
- ``error_lines``: ``ValueError: …``, ``error: …``, ``FAILED …`` and the like.
- ``exact_identifiers``: what an agent reuses as exact text — everything
  ``identifiers_in`` finds except numbers under three digits (and a number without its
  unit), plus code symbols (dotted names, snake_case, camelCase, PascalCase, a
  ``name(`` call), CLI flags (``--flag``) and error lines.  The needed-fact measure
  (``ctxrules.quality.needed``) counts these, and the rules that shorten tool output
  (summaries, aged stubs, capped results) keep these.
- ``argument_facts``: the paths a tool call names in its path arguments (``file_path``,
  ``path``, ``filename``, …) and the identifiers in its other short string arguments.
- ``update_todos``: the todo list after a todo tool call (``TodoWrite``'s whole list,
  or ``todo_create`` / ``todo_update`` one item at a time); ``is_open`` tells the
  todos not completed.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .. import _core

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_ERRORS_PER_RESULT",
    "MAX_FACT_CHARS",
    "TODO_TOOLS",
    "Todos",
    "argument_facts",
    "constraints_in",
    "error_lines",
    "exact_identifiers",
    "exact_identifiers_batch",
    "identifiers_in",
    "is_open",
    "normalize",
    "occurs",
    "update_todos",
]

#: A longer constraint sentence or error line is looked for by its first this many characters.
MAX_FACT_CHARS = 300
#: Error lines taken from one tool result at most (a long test log would drown the rest).
MAX_ERRORS_PER_RESULT = 5
#: Tool-argument strings longer than this are content (code, file bodies), not identifiers.
MAX_ARGUMENT_CHARS = 300
#: Tools whose arguments carry the todo list, lower-cased.
TODO_TOOLS = frozenset({"todowrite", "todo_write", "todo_create", "todo_update"})
_DONE = frozenset({"completed", "complete", "done", "cancelled", "canceled"})
#: A todo list: key (the todo's id, else its text) → (text, status, id of the node that
#: set it).
Todos = dict[str, tuple[str, str, str]]


def normalize(text: str) -> str:
    """Whitespace runs as one space, no leading or trailing space."""
    return " ".join(text.split())


_CONSTRAINT = re.compile(
    r"\b(?:must|mustn[’']t|never|don[’']t|do not|only|always|should|shouldn[’']t|avoid|"
    r"make sure|ensure|required?|forbidden|not allowed)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•>]+|\d+[.)])\s+")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_ERROR_LINE = re.compile(
    r"^(?:[\w.]*(?:Error|Exception|Warning)(?::|$)|Traceback \(most recent call last\):|"
    r"FAILED\b|ERROR\b|error(?:\[\w+\])?:|fatal:|panic(?:ked)?\b|E {3})"
)
#: A line ``_ERROR_LINE`` matches holds one of these.
_ERROR_WORDS = (
    "Error",
    "Exception",
    "Warning",
    "Traceback",
    "FAILED",
    "ERROR",
    "error",
    "fatal:",
    "panic",
    "E   ",
)
_UNIT = (
    r"(?:ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|"
    r"[KMGT]i?B|[kKMG]|B|bytes?|%|px|tokens?|chars?|characters?|lines?|files?|items?|"
    r"x|×|USD|EUR|GBP|dollars?)"
)
_URL = r"(?P<url>https?://[^\s<>\"'`)\]]+)"
_UUID = r"(?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
_PATH = (
    r"(?P<path>(?<![\w.:/~-])(?:(?:~|\.{1,2})(?:/[\w.@+-]+)+|/?(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-]))"
)
_FILE = (
    r"(?P<file>(?<![\w.-])[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|rs|ts|tsx|js|jsx|mjs|json|jsonl|toml|"
    r"ya?ml|md|rst|txt|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|bash|cfg|ini|lock|html|css|"
    r"scss|vue|sql|csv|xml|ipynb|traj|log|env)\b)"
)
_DATE = r"(?P<date>\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b)"
_HASH = r"(?P<hash>\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b)"
_ID = r"(?P<id>\b(?=[\w-]*[A-Za-z])(?=[\w-]*\d)[A-Za-z][\w]*(?:-[\w]+)*\b)"
_IDENTIFIER = re.compile(
    "|".join((_URL, _UUID, _PATH, _FILE, _DATE, _HASH, _ID))
    + rf"|(?P<number>(?<![\w.,])[$€£]?\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?(?:\s?{_UNIT}\b)?"
    rf"|(?<![\w.,])[$€£]?\d+(?:\.\d+)?(?:\s?{_UNIT}(?![\w]))?)"
)
_TRAILING = ".,;:!?)]}'\""


def _cap(text: str) -> str:
    return text if len(text) <= MAX_FACT_CHARS else text[:MAX_FACT_CHARS]


def _prose_lines(text: str) -> Iterator[str]:
    """The lines of ``text`` outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def constraints_in(text: str) -> list[str]:
    """The rule-stating sentences of a user text (see the module docstring)."""
    out = []
    for line in _prose_lines(text):
        for sentence in _SENTENCE_END.split(_LIST_MARKER.sub("", line)):
            sentence = normalize(sentence)
            if len(sentence.split()) >= 3 and _CONSTRAINT.search(sentence):
                out.append(_cap(sentence))
    return out


def error_lines(text: str, *, failed: bool = False) -> list[str]:
    """Error lines of a text (at most ``MAX_ERRORS_PER_RESULT``); with ``failed``, the
    first non-empty line too."""
    if not failed and not any(word in text for word in _ERROR_WORDS):
        return []  # no line can match: most tool output, and the check is cheap
    out: list[str] = []
    lines = [s for line in text.splitlines() if (s := line.strip())]
    if failed and lines:
        out.append(_cap(normalize(lines[0])))
    for line in lines:
        if len(out) >= MAX_ERRORS_PER_RESULT:
            break
        if len(line) >= 8 and _ERROR_LINE.match(line):
            fact = _cap(normalize(line))
            if fact not in out:
                out.append(fact)
    return out


def identifiers_in(text: str) -> list[tuple[str, str]]:
    """``(kind, token)`` for every identifier in ``text``, in order (see the module
    docstring); a number counts only with a unit or currency or three digits."""
    out: list[tuple[str, str]] = []
    for m in _IDENTIFIER.finditer(text):
        kind = m.lastgroup or ""
        token = m.group().rstrip(_TRAILING) if kind in ("url", "path") else m.group()
        if kind == "path" and token.count("/") == 1 and not token.startswith(("/", "~", ".")):
            # "and/or", "I/O", "client/server": a single inner slash is a path only when
            # the last part has an extension.
            if "." not in token.rsplit("/", 1)[1]:
                continue
        if kind == "id" and len(token) < 4:
            continue
        if kind == "number":
            digits = sum(c.isdigit() for c in token)
            if digits < 3 and not re.search(r"[$€£]|\D$", token):
                continue
        out.append((kind, normalize(token)))
    return out


_FILE_KEY = re.compile(
    r"^(?:file_?path|filepath|path|paths|file_?name|file|files|notebook_path|target_file|"
    r"dir|directory)$",
    re.IGNORECASE,
)


def _arguments(value: Any) -> Any:
    """A tool input as data (a JSON string argument is decoded)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every ``(key, string)`` in a tool input, depth first."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v, key)


def argument_facts(tool_input: Any) -> Iterator[tuple[str, str]]:
    """``("file", path)`` for each path argument of a tool call and ``(kind, token)`` for
    each identifier in its other string arguments of at most ``MAX_ARGUMENT_CHARS``;
    ``tool_input`` is the arguments as data or as a JSON string."""
    for key, value in _strings(_arguments(tool_input)):
        if _FILE_KEY.match(key):
            if value.strip() and "\n" not in value and len(value) <= 400:
                yield "file", value
        elif len(value) <= MAX_ARGUMENT_CHARS:
            yield from identifiers_in(value)


def is_open(status: str) -> bool:
    """Whether a todo with this status still has to be done."""
    return status.lower() not in _DONE


def update_todos(todos: Todos, name: str, tool_input: Any, node_id: str) -> Todos:
    """The todo list after the tool call ``name(tool_input)`` made by node ``node_id``:
    ``todos`` itself, updated, or a new list when the call wrote the whole list (or
    ``todos`` unchanged when the call is no todo call)."""
    if name.lower() not in TODO_TOOLS:
        return todos
    args = _arguments(tool_input)
    if not isinstance(args, Mapping):
        return todos
    listed = args.get("todos")
    if isinstance(listed, list):  # TodoWrite: the whole list, replacing the last one
        new: Todos = {}
        for t in listed:
            if isinstance(t, Mapping) and isinstance(t.get("content"), str):
                key = str(t.get("id") or t["content"])
                new[key] = (t["content"], str(t.get("status", "pending")), node_id)
        return new
    content = args.get("content") or args.get("title")
    key = str(args.get("id") or content or "")
    if not key:
        return todos
    old = todos.get(key)
    text = content if isinstance(content, str) else (old[0] if old else "")
    status = str(args.get("status") or (old[1] if old else "pending"))
    if text:
        todos[key] = (text, status, node_id)
    return todos


# -- exact identifiers: what an agent reuses -------------------------------------------
#
# The scan is the Rust core's (``_core.identifier_spans``; rust/identifiers.rs): a
# regular expression of twelve alternatives with look-arounds cost milliseconds per
# kilobyte here, and every aged tool result is scanned.  The expression it replaces is
# kept as the tests' reference (tests/summarizers/test_identifier_scan.py).

#: The kinds of ``_core.identifier_spans``, by number (``Kind`` in rust/identifiers.rs).
_KINDS = ("url", "uuid", "path", "file", "date", "hash", "flag", "symbol", "call", "id", "number")


class _Classes(dict[int, str]):
    """``str.translate`` table to a class string: ASCII stays, every other character
    becomes its class under ``re`` (``\\w`` but not ``\\d``, ``\\d``, ``\\s``, other), by
    Python's own Unicode tables, so the core reads ``\\w``, ``\\d`` and ``\\s`` as ``re``
    did; one character each, so offsets are the text's."""

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        if code < 0x80:
            out = ch
        elif ch.isdecimal():
            out = "\x81"
        elif ch.isalnum():
            out = "\x80"
        elif ch.isspace():
            out = "\x82"
        else:
            out = "\x83"
        self[code] = out
        return out


_CLASSES = _Classes()


#: ASCII characters a class string's error handler translates after each non-ASCII run.
_CLASS_LOOKAHEAD = 256


def _classes_of_run(exc: UnicodeError) -> tuple[bytes, int]:
    # The ASCII encoder hands over each run it cannot encode: the run and what follows
    # it, up to _CLASS_LOOKAHEAD characters, are translated here (ASCII stays ASCII),
    # so text with rare non-ASCII characters is encoded at C speed and text dense
    # with them costs one call per _CLASS_LOOKAHEAD characters, not one per run.
    assert isinstance(exc, UnicodeEncodeError)
    end = min(len(exc.object), exc.end + _CLASS_LOOKAHEAD)
    return exc.object[exc.start : end].translate(_CLASSES).encode("latin-1"), end


codecs.register_error("ctxrules.identifier_classes", _classes_of_run)


def _class_string(text: str) -> bytes:
    """``text`` with every character mapped by ``_CLASSES``, as one byte each.  (A
    ``translate`` of the whole text looks every character up in Python's table once
    one is not ASCII: 25 ms for a 300 KB result with one dash.)"""
    return text.encode("ascii", "ctxrules.identifier_classes")


def exact_identifiers_batch(
    texts: Sequence[str], *, errors: bool = True
) -> list[list[tuple[str, str]]]:
    """``exact_identifiers`` of each text, in one call of the core (``errors``: as
    ``exact_identifiers`` takes it)."""
    found = _core.identifier_spans([_class_string(t) for t in texts])
    out = []
    for text, spans in zip(texts, found):
        ids: dict[str, str] = {}
        for i in range(0, len(spans), 3):
            ids.setdefault(text[spans[i + 1] : spans[i + 2]], _KINDS[spans[i]])
        for line in error_lines(text) if errors else ():
            ids.setdefault(line, "error")
        out.append([(kind, token) for token, kind in ids.items()])
    return out


def exact_identifiers(text: str, *, errors: bool = True) -> list[tuple[str, str]]:
    """``(kind, token)`` for every exact identifier of ``text``, first-seen order, each
    once (see the module docstring): kinds ``url``, ``uuid``, ``path``, ``file``,
    ``date``, ``hash``, ``flag``, ``symbol`` (a dotted name, or snake / camel / Pascal
    case; a dotted name's symbol parts too), ``call`` (``name(``), ``id``, ``number``
    (three digits or more) and ``error`` (an error line).  ``errors=False``: without
    the error lines (for a caller that reads them with ``error_lines`` anyway; the
    other kinds are the same list)."""
    return exact_identifiers_batch([text], errors=errors)[0]


def occurs(token: str, text: str) -> int:
    """Where ``token`` first occurs in ``text`` as a whole token (not inside a longer
    word: a letter, digit or underscore on either side of an end that is one does not
    count), or -1."""
    start = text.find(token)
    if start < 0:
        return -1
    head_word = token[:1].isalnum() or token[:1] == "_"
    tail_word = token[-1:].isalnum() or token[-1:] == "_"
    n = len(token)
    while start >= 0:
        before = text[start - 1 : start] if start else ""
        after = text[start + n : start + n + 1]
        if not (head_word and before and (before.isalnum() or before == "_")) and not (
            tail_word and after and (after.isalnum() or after == "_")
        ):
            return start
        start = text.find(token, start + 1)
    return -1
