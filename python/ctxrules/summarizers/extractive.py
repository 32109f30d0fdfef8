"""The offline, deterministic default summarizer.

It does not paraphrase; it extracts.  Sections, in this order: the task (first user
message of the run), user constraints (user sentences that say must / never / don't /
always / only / should …), files touched (paths in tool arguments and outputs), tools
used with counts, errors (failed tool calls), open todos (the last todo list seen, items
not completed) and a short outline of what the assistant said.  A previous summary in
the run is parsed back into its sections and merged, so facts survive repeated folding.
The text is cut to the budget section by section (about 4 characters per token), the
task and constraints last.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..model import ContextItem

__all__ = ["ExtractiveSummarizer"]

HEADER = "Summary of earlier conversation (extractive)"
SECTIONS = (
    "Task",
    "User constraints",
    "Files touched",
    "Tools used",
    "Errors",
    "Open todos",
    "Outline",
)
_CONSTRAINT = re.compile(
    r"\b(must|mustn't|never|don't|do not|always|only|should|shouldn't|avoid|make sure|"
    r"required?|without|instead)\b",
    re.IGNORECASE,
)
_PATH = re.compile(
    r"(?<![\w/.-])((?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w{1,8}|[\w-]+\.(?:py|rs|ts|"
    r"tsx|js|jsx|json|toml|yaml|yml|md|txt|go|java|c|h|cpp|sh|cfg|ini|lock))\b"
)
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_TODO_TOOLS = {"todowrite", "todo_create", "todo_update", "todo_list"}


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _parse_previous(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.endswith(":") and line[:-1] in SECTIONS:
            current = line[:-1]
            found.setdefault(current, [])
        elif current and line.startswith("- "):
            found[current].append(line[2:])
    return found


def _todos(tool_input: str) -> list[str] | None:
    try:
        data = json.loads(tool_input)
    except (ValueError, TypeError):
        return None
    todos = data.get("todos") if isinstance(data, dict) else None
    if not isinstance(todos, list):
        return None
    open_items = []
    for t in todos:
        if isinstance(t, dict) and t.get("status") != "completed":
            open_items.append(f"[{t.get('status', 'pending')}] {t.get('content', '')}".strip())
    return open_items


class ExtractiveSummarizer:
    """Deterministic extractive summary: same items and budget → same text."""

    name = "extractive"

    def summarize(self, items: Sequence[ContextItem], *, budget: int) -> str:
        """The summary of ``items`` in about ``budget`` tokens (see the module docstring)."""
        # dicts as ordered sets: dedupe in O(1), keep first-seen order.
        sec: dict[str, dict[str, None]] = {name: {} for name in SECTIONS}
        tools: dict[str, int] = {}
        todos: list[str] | None = None

        def add(section: str, value: str) -> None:
            if value:
                sec[section].setdefault(value, None)

        for it in items:
            if it.state == "summary":
                for name, values in _parse_previous(it.rendered).items():
                    if name == "Tools used":
                        for v in values:
                            tool, _, n = v.rpartition(" ×")
                            if tool and n.isdigit():
                                tools[tool] = tools.get(tool, 0) + int(n)
                    elif name == "Open todos":
                        todos = values
                    else:
                        for v in values:
                            add(name, v)
            elif it.role == "user":
                if not sec["Task"]:
                    add("Task", _first_line(it.rendered, 400))
                for sentence in _SENTENCE.split(it.rendered):
                    if _CONSTRAINT.search(sentence):
                        add("User constraints", _first_line(sentence, 200))
            elif it.role == "tool":
                tools[it.name] = tools.get(it.name, 0) + 1
                for m in _PATH.finditer(it.tool_input):
                    add("Files touched", m.group(1))
                if it.state == "full":
                    for m in _PATH.finditer(it.rendered[:4000]):
                        add("Files touched", m.group(1))
                if it.is_error:
                    add("Errors", f"{it.name}: {_first_line(it.rendered, 200)}")
                if it.name.lower() in _TODO_TOOLS:
                    found = _todos(it.tool_input)
                    if found is not None:
                        todos = found
            elif it.role == "assistant" and it.rendered.strip():
                add("Outline", _first_line(it.rendered))
        sec["Tools used"] = dict.fromkeys(f"{name} ×{n}" for name, n in sorted(tools.items()))
        sec["Open todos"] = dict.fromkeys(todos or [])
        return self._render({k: list(v) for k, v in sec.items()}, budget)

    @staticmethod
    def _render(sec: dict[str, list[str]], budget: int) -> str:
        limit = max(200, budget * 4)
        size = len(ExtractiveSummarizer._join(sec))
        # Cut the least important sections first when over budget (lengths tracked, so
        # this stays linear however many facts a long run yields).
        for name in (
            "Outline",
            "Tools used",
            "Files touched",
            "Errors",
            "Open todos",
            "User constraints",
        ):
            values = sec[name]
            while values and size > limit:
                gone = values.pop(0 if name == "Outline" else -1)
                size -= len(gone) + 3  # "\n- " + value
                if not values:
                    size -= len(name) + 2  # "\n" + "name:"
        text = ExtractiveSummarizer._join(sec)
        return text if len(text) <= limit else text[: limit - 1] + "…"

    @staticmethod
    def _join(sec: dict[str, list[str]]) -> str:
        lines = [HEADER]
        for name in SECTIONS:
            if sec[name]:
                lines.append(f"{name}:")
                lines.extend(f"- {v}" for v in sec[name])
        return "\n".join(lines)
