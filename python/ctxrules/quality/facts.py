"""The key facts of a stretch of history, extracted from its original nodes (no model).

Five categories, each fact an exact text to look for in the rendered request:

- ``task``: the task statement — the text of the branch's first real instruction,
  the node the pipeline keeps as its task anchor (``ctxrules.commit.anchor``: a
  demonstration or a slash-command line before it is not the task; the command's
  expansion is).  Always checked, folded or not: losing it is the failure compaction
  is most blamed for.
- ``constraints``: sentences of folded user messages that state a rule (must, never,
  don't, only, always, should, avoid, make sure, …), outside code blocks, at least
  three words; a sentence over ``MAX_FACT_CHARS`` is looked for by its beginning.
- ``identifiers``: exact tokens from folded user and assistant text and from the short
  string arguments of folded tool calls: file paths and file names, URLs, UUIDs and
  hashes, ids (a token mixing letters and digits, such as ``mia_li_3668`` or
  ``HAT038``), dates, numbers with a unit or currency or of at least three digits,
  and error lines (``ValueError: …``, ``error: …``, ``FAILED …``; from user text, from
  every folded tool result, and the first line of a failed one).
- ``files``: the paths a folded tool call names in its path arguments (``file_path``,
  ``path``, ``filename``, …).
- ``todos``: when a folded node is a todo tool call (``TodoWrite``, ``todo_create``,
  ``todo_update``), the todos whose latest state on the branch is not completed.

Facts are deduplicated within a category (the first node that stated one is named);
every text is whitespace-normalised, as the request text is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

from ..commit.anchor import AnchorSkip, task_anchor
from ..model import Call, TextBlock, ToolResultBlock, content_text

__all__ = [
    "CATEGORIES",
    "MAX_FACT_CHARS",
    "Fact",
    "extract_facts",
    "identifiers_in",
    "normalize",
    "todo_state",
]

CATEGORIES: tuple[str, ...] = ("task", "constraints", "identifiers", "files", "todos")
#: A longer constraint sentence or error line is looked for by its first this many characters.
MAX_FACT_CHARS = 300
#: Tool-argument strings longer than this are content (code, file bodies), not identifiers.
MAX_ARGUMENT_CHARS = 300
#: Error lines taken from one tool result at most (a long test log would drown the rest).
MAX_ERRORS_PER_RESULT = 5


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    """One key fact: its category and kind, the exact text, the node that stated it, and
    whether the rendered request holds it."""

    category: str
    kind: str
    text: str
    node_id: str
    found: bool = False


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
_UNIT = (
    r"(?:ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|"
    r"[KMGT]i?B|[kKMG]|B|bytes?|%|px|tokens?|chars?|characters?|lines?|files?|items?|"
    r"x|×|USD|EUR|GBP|dollars?)"
)
_IDENTIFIER = re.compile(
    r"(?P<url>https?://[^\s<>\"'`)\]]+)"
    r"|(?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
    r"|(?P<path>(?<![\w.:/~-])(?:(?:~|\.{1,2})(?:/[\w.@+-]+)+|/?(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-]))"
    r"|(?P<file>(?<![\w.-])[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|rs|ts|tsx|js|jsx|mjs|json|jsonl|toml|"
    r"ya?ml|md|rst|txt|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|bash|cfg|ini|lock|html|css|"
    r"scss|vue|sql|csv|xml|ipynb|traj|log|env)\b)"
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b)"
    r"|(?P<hash>\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b)"
    r"|(?P<id>\b(?=[\w-]*[A-Za-z])(?=[\w-]*\d)[A-Za-z][\w]*(?:-[\w]+)*\b)"
    rf"|(?P<number>(?<![\w.,])[$€£]?\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?(?:\s?{_UNIT}\b)?"
    rf"|(?<![\w.,])[$€£]?\d+(?:\.\d+)?(?:\s?{_UNIT}(?![\w]))?)"
)
_TRAILING = ".,;:!?)]}'\""
_FILE_KEY = re.compile(
    r"^(?:file_?path|filepath|path|paths|file_?name|file|files|notebook_path|target_file|"
    r"dir|directory)$",
    re.IGNORECASE,
)
_TODO_TOOLS = {"todowrite", "todo_write", "todo_create", "todo_update"}
_DONE = {"completed", "complete", "done"}


def _text(call: Call) -> str:
    """What a user or assistant node said: its text blocks (no thinking, no tool calls)."""
    out = call.output
    if isinstance(out, str):
        return out
    return "\n".join(b.text for b in out if isinstance(b, TextBlock))


def _tool_output(call: Call) -> tuple[str, bool]:
    """A tool node's result text and whether it failed."""
    failed = bool(call.metadata.get("is_error", False))
    out = call.output
    if not isinstance(out, str):
        failed = failed or any(isinstance(b, ToolResultBlock) and b.is_error for b in out)
    return content_text(out), failed


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
    out: list[str] = []
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if failed and lines:
        out.append(_cap(normalize(lines[0])))
    for line in lines:
        if len(out) >= MAX_ERRORS_PER_RESULT:
            break
        fact = _cap(normalize(line))
        if len(line) >= 8 and _ERROR_LINE.match(line) and fact not in out:
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


class _Facts:
    """Facts in first-seen order, deduplicated per category."""

    def __init__(self) -> None:
        self.items: list[Fact] = []
        self._seen: set[tuple[str, str]] = set()

    def add(self, category: str, kind: str, text: str, node_id: str) -> None:
        text = normalize(text)
        if text and (category, text) not in self._seen:
            self._seen.add((category, text))
            self.items.append(Fact(category=category, kind=kind, text=text, node_id=node_id))


def todo_state(branch: Sequence[Call]) -> dict[str, tuple[str, str, str]]:
    """Todo key → (content, status, node id) after every todo call of the branch: a
    whole-list tool (``TodoWrite``) replaces the list, item tools update one entry."""
    todos: dict[str, tuple[str, str, str]] = {}
    for call in branch:
        if call.role != "tool" or call.name.lower() not in _TODO_TOOLS:
            continue
        args = _arguments(call.input)
        if not isinstance(args, Mapping):
            continue
        listed = args.get("todos")
        if isinstance(listed, list):  # TodoWrite: the whole list, replacing the last one
            todos = {}
            for t in listed:
                if isinstance(t, Mapping) and isinstance(t.get("content"), str):
                    key = str(t.get("id") or t["content"])
                    todos[key] = (t["content"], str(t.get("status", "pending")), call.id)
            continue
        content = args.get("content") or args.get("title")
        key = str(args.get("id") or content or "")
        if not key:
            continue
        old = todos.get(key)
        text = content if isinstance(content, str) else (old[0] if old else "")
        status = str(args.get("status") or (old[1] if old else "pending"))
        if text:
            todos[key] = (text, status, call.id)
    return todos


def extract_facts(
    folded: Sequence[Call], branch: Sequence[Call], anchor_skip: AnchorSkip | None = None
) -> list[Fact]:
    """The facts to look for: the task statement of ``branch`` (its task anchor under
    ``anchor_skip``, default every built-in skip kind) and the facts of the ``folded``
    nodes (see the module docstring); every ``found`` is ``False``."""
    facts = _Facts()
    task = task_anchor(branch, anchor_skip)
    if task is not None:
        facts.add("task", "task", _text(task), task.id)
    todo_folded = False
    for call in folded:
        if call.role == "user":
            text = _text(call)
            for sentence in constraints_in(text):
                facts.add("constraints", "constraint", sentence, call.id)
            for kind, token in identifiers_in(text):
                facts.add("identifiers", kind, token, call.id)
            for line in error_lines(text):
                facts.add("identifiers", "error", line, call.id)
        elif call.role == "assistant":
            for kind, token in identifiers_in(_text(call)):
                facts.add("identifiers", kind, token, call.id)
        elif call.role == "tool":
            todo_folded = todo_folded or call.name.lower() in _TODO_TOOLS
            for key, value in _strings(_arguments(call.input)):
                if _FILE_KEY.match(key):
                    if value.strip() and "\n" not in value and len(value) <= 400:
                        facts.add("files", "file", value, call.id)
                elif len(value) <= MAX_ARGUMENT_CHARS:
                    for kind, token in identifiers_in(value):
                        facts.add("identifiers", kind, token, call.id)
            text, failed = _tool_output(call)
            for line in error_lines(text, failed=failed):
                facts.add("identifiers", "error", line, call.id)
    if todo_folded:
        for content, status, node_id in todo_state(branch).values():
            if status.lower() not in _DONE:
                facts.add("todos", "todo", content, node_id)
    return facts.items
