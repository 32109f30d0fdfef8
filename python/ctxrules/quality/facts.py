"""The key facts of a stretch of history, extracted from its original nodes (no model).

Five categories, each fact an exact text to look for in the rendered request:

- ``task``: the task statement — the text of the branch's first real instruction,
  the node the pipeline keeps as its task anchor (``ctxrules.commit.anchor``: a
  demonstration or a slash-command line before it is not the task; the command's
  expansion is).  Always checked, folded or not: losing it is the failure compaction
  is most blamed for.
- ``constraints``: the rule-stating sentences of folded user messages.
- ``identifiers``: exact tokens from folded user and assistant text and from the short
  string arguments of folded tool calls, and error lines (from user text, from every
  folded tool result, and the first line of a failed one).
- ``files``: the paths a folded tool call names in its path arguments (``file_path``,
  ``path``, ``filename``, …).
- ``todos``: when a folded node is a todo tool call (``TodoWrite``, ``todo_create``,
  ``todo_update``), the todos whose latest state on the branch is not completed.

Facts are deduplicated within a category (the first node that stated one is named);
every text is whitespace-normalised, as the request text is.  What counts as an
identifier, a constraint or an error line is ``ctxrules.summarizers.facts``: the
definition the offline summarizer keeps them by.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ..commit.anchor import AnchorSkip, task_anchor
from ..model import Node, TextBlock, ToolResultBlock, content_text
from ..summarizers.facts import (
    MAX_FACT_CHARS,
    TODO_TOOLS,
    Todos,
    argument_facts,
    constraints_in,
    error_lines,
    identifiers_in,
    is_open,
    normalize,
    update_todos,
)

__all__ = [
    "CATEGORIES",
    "MAX_FACT_CHARS",
    "Fact",
    "constraints_in",
    "error_lines",
    "extract_facts",
    "identifiers_in",
    "normalize",
    "todo_state",
]

CATEGORIES: tuple[str, ...] = ("task", "constraints", "identifiers", "files", "todos")


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    """One key fact: its category and kind, the exact text, the node that stated it, and
    whether the rendered request holds it."""

    category: str
    kind: str
    text: str
    node_id: str
    found: bool = False


def _text(call: Node) -> str:
    """What a user or assistant node said: its text blocks (no thinking, no tool calls)."""
    out = call.output
    if isinstance(out, str):
        return out
    return "\n".join(b.text for b in out if isinstance(b, TextBlock))


def _tool_output(call: Node) -> tuple[str, bool]:
    """A tool node's result text and whether it failed."""
    failed = bool(call.metadata.get("is_error", False))
    out = call.output
    if not isinstance(out, str):
        failed = failed or any(isinstance(b, ToolResultBlock) and b.is_error for b in out)
    return content_text(out), failed


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


def todo_state(branch: Sequence[Node]) -> Todos:
    """The todo list after every todo call of the branch (todo key → content, status,
    node id): a whole-list tool (``TodoWrite``) replaces it, item tools update one entry."""
    todos: Todos = {}
    for call in branch:
        if call.role == "tool":
            todos = update_todos(todos, call.name, call.input, call.id)
    return todos


def extract_facts(
    folded: Sequence[Node], branch: Sequence[Node], anchor_skip: AnchorSkip | None = None
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
            todo_folded = todo_folded or call.name.lower() in TODO_TOOLS
            for kind, token in argument_facts(call.input):
                if kind == "file":
                    facts.add("files", "file", token, call.id)
                else:
                    facts.add("identifiers", kind, token, call.id)
            text, failed = _tool_output(call)
            for line in error_lines(text, failed=failed):
                facts.add("identifiers", "error", line, call.id)
    if todo_folded:
        for content, status, node_id in todo_state(branch).values():
            if is_open(status):
                facts.add("todos", "todo", content, node_id)
    return facts.items
