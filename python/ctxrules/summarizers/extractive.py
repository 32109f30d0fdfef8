"""The offline, deterministic default summarizer.

It does not paraphrase; it extracts (what counts as an identifier, a constraint, an
error line, a file or a todo is ``ctxrules.summarizers.facts``, the definitions the
quality checker counts by).  Sections, in this order:

- ``Focus``: the user's compaction instructions, when there are some (one line);
- ``Task``: the user messages that open the run (before its first assistant turn),
  verbatim — together at most a quarter of the budget (the task statement itself is
  the pipeline's task anchor, never folded; what opens a run is a later request, a
  slash-command line or a demonstration, whose facts the sections below keep);
- ``User constraints``: sentences of user messages that state a rule (those the task
  holds are left out);
- ``Files touched``: the paths tool calls name in their path arguments;
- ``Tools used``: each tool with its call count;
- ``Errors``: error lines of tool results and user messages, and the first line of
  each failed tool call (``name: line``);
- ``Open todos``: the todos of the latest todo list not completed;
- ``Index (exact identifiers)``: every path, id, hash, URL, date and number the user,
  the assistant and the tool arguments stated, and the exact identifiers of the tool
  results (``facts.exact_identifiers``: paths, symbols, flags, ids, then, in the room
  those leave, numbers and dates — what an agent reuses from a result), grouped by
  kind, each exactly once and left out when a section above already holds it — so an
  id stated once in passing (a reservation code, a commit hash, a price) survives the
  fold;
- ``Outline``: the first line of each assistant message (at most 100 characters).

A previous summary in the run is parsed back into its sections and merged, so facts
survive repeated folding.  The text is cut to the budget (counted with the default
tokenizer) section by section: the outline first, then the tool counts, the index (oldest
identifiers first), the files, the errors, the todos and the constraints (newest
first); the focus and the task are never
cut, except by the final hard cut of an over-long text.  Multi-line values (the task)
continue on lines indented by two spaces, so no text a user or tool wrote can start
a section of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..model import ContextItem
from ..tokenizers import count
from .facts import (
    Todos,
    argument_facts,
    constraints_in,
    error_lines,
    exact_identifiers,
    identifiers_in,
    is_open,
    normalize,
    update_todos,
)

__all__ = ["ExtractiveSummarizer"]

HEADER = "Summary of earlier conversation (extractive)"
INDEX = "Index (exact identifiers)"
SECTIONS = (
    "Task",
    "User constraints",
    "Files touched",
    "Tools used",
    "Errors",
    "Open todos",
    INDEX,
    "Outline",
)
#: Cut first when over budget; the task is never cut section by section.
_CUT_ORDER = (
    "Outline",
    "Tools used",
    INDEX,
    "Files touched",
    "Errors",
    "Open todos",
    "User constraints",
)
#: Index lines, in order, and the identifier kinds each gathers.
_INDEX_LABELS = {
    "path": "paths",
    "file": "paths",
    "id": "ids",
    "uuid": "ids",
    "hash": "ids",
    "url": "urls",
    "date": "dates",
    "number": "numbers",
    "symbol": "symbols",
    "call": "symbols",
    "flag": "ids",
}
_LABEL_ORDER = ("paths", "symbols", "ids", "urls", "dates", "numbers")
_FOCUS = "Focus: "
#: The share of the summary's characters the identifiers only tool outputs showed may
#: take (the newest of them): enough for the paths and names an agent goes back to, not so much
#: that a listing fills every summary to its budget.
OUTPUT_INDEX_SHARE = 0.25
#: …and at most this share of the characters of the run it summarizes (a summary much
#: shorter than its run is what makes a fold pay).
OUTPUT_RUN_SHARE = 0.2
#: …of which the outputs' bare numbers and dates take what the names leave, at most this
#: share of the run's characters (a fold's summary stays short; a compaction's budget is
#: large, so there they fit).
OUTPUT_MINOR_SHARE = 0.02
#: The shortest summary, in characters, whatever the budget.
_MIN_CHARS = 200
_MAX_FOCUS_CHARS = 1000


def _first_line(text: str, limit: int) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _entry(value: str) -> str:
    """A section value as its lines: ``- first`` then ``  continued`` lines."""
    return "- " + value.replace("\n", "\n  ")


def _parse_previous(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.endswith(":") and line[:-1] in SECTIONS:
            current = line[:-1]
            found.setdefault(current, [])
        elif current and line.startswith("- "):
            found[current].append(line[2:])
        elif current and line.startswith("  ") and found[current]:
            found[current][-1] += "\n" + line[2:]
    return found


class _Run:
    """What the items of one run yield, section by section (dicts as ordered sets:
    dedupe in O(1), keep first-seen order)."""

    def __init__(self) -> None:
        self.sec: dict[str, dict[str, None]] = {name: {} for name in SECTIONS}
        self.index: dict[tuple[str, str], None] = {}  # (label, token)
        self.output_index: dict[tuple[str, str], None] = {}  # only in tool outputs
        self.output_minor: dict[tuple[str, str], None] = {}  # their numbers and dates
        self.tools: dict[str, int] = {}
        self.todos: Todos = {}
        self.errors_seen: set[str] = set()

    def add(self, section: str, value: str) -> None:
        if value:
            self.sec[section].setdefault(value, None)

    def identifier(self, kind: str, token: str, *, output: bool = False) -> None:
        """Index a token; one only a tool's output showed (``output``) is cut before
        those the user, the assistant or a tool's arguments stated, and of those its
        numbers and dates before its names."""
        key = (_INDEX_LABELS.get(kind, "ids"), token)
        if output:
            if key not in self.index and key not in self.output_index:
                minor = kind in ("number", "date")
                (self.output_minor if minor else self.output_index).setdefault(key, None)
        else:
            self.output_index.pop(key, None)
            self.output_minor.pop(key, None)
            self.index.setdefault(key, None)

    def error(self, line: str, tool: str = "") -> None:
        if line not in self.errors_seen:
            self.errors_seen.add(line)
            self.add("Errors", f"{tool}: {line}" if tool else line)

    def previous(self, item: ContextItem) -> None:
        """Merge a previous summary's sections."""
        for name, values in _parse_previous(item.rendered).items():
            if name == "Tools used":
                for v in values:
                    tool, _, n = v.rpartition(" ×")
                    if tool and n.isdigit():
                        self.tools[tool] = self.tools.get(tool, 0) + int(n)
            elif name == "Open todos":
                self.todos = {}
                for v in values:
                    status, _, content = v.partition("] ")
                    if status.startswith("[") and content:
                        self.todos[content] = (content, status[1:], item.source_node_id)
            elif name == INDEX:
                for v in values:
                    label, _, tokens = v.partition(": ")
                    for token in tokens.split(", "):
                        if token:
                            self.index.setdefault((label, token), None)
            elif name == "Errors":
                for v in values:
                    self.errors_seen.add(v)
                    self.add(name, v)
            else:
                for v in values:
                    self.add(name, v)

    def read(self, items: Sequence[ContextItem]) -> None:
        opening = True  # user messages before the run's first assistant turn: the task
        for it in items:
            if it.state == "summary":
                self.previous(it)
            elif it.role == "user":
                if opening:
                    self.add("Task", it.rendered.strip())
                for sentence in constraints_in(it.rendered):
                    self.add("User constraints", sentence)
                for kind, token in identifiers_in(it.rendered):
                    self.identifier(kind, token)
                for line in error_lines(it.rendered):
                    self.error(line)
            elif it.role == "tool":
                self.tools[it.name] = self.tools.get(it.name, 0) + 1
                for kind, token in argument_facts(it.tool_input):
                    if kind == "file":
                        self.add("Files touched", token)
                    else:
                        self.identifier(kind, token)
                # What the agent reuses from a result is its exact identifiers: the
                # paths, symbols, flags and numbers it printed (error lines below).
                # Bare numbers and dates (line numbers and timestamps, but also the
                # prices, flight numbers and dates a booking agent quotes next) take
                # only the room the names leave (``index_tokens``).
                # Its error lines are read once, below (not also as identifiers).
                for kind, token in exact_identifiers(it.rendered, errors=False):
                    self.identifier(kind, token, output=True)
                lines = error_lines(it.rendered, failed=it.is_error)
                for n, line in enumerate(lines):
                    self.error(line, it.name if it.is_error and n == 0 else "")
                self.todos = update_todos(self.todos, it.name, it.tool_input, it.source_node_id)
            elif it.role == "assistant":
                opening = False
                for kind, token in identifiers_in(it.rendered):
                    self.identifier(kind, token)
                if it.rendered.strip():
                    self.add("Outline", _first_line(it.rendered, 100))

    def sections(self, limit: int) -> dict[str, list[str]]:
        """The sections as lists, the task cut to its share and the open todos listed."""
        sec = {name: list(values) for name, values in self.sec.items()}
        share = limit // 4  # more would crowd out the index of a long opening message
        task = []
        for value in sec["Task"]:
            if share <= 0:
                break
            task.append(value if len(value) <= share else value[: share - 1] + "…")
            share -= len(task[-1])
        sec["Task"] = task
        # A constraint the task states verbatim is kept there already (and outlives it).
        stated = normalize(" ".join(task))
        sec["User constraints"] = [c for c in sec["User constraints"] if c not in stated]
        sec["Tools used"] = [f"{name} ×{n}" for name, n in sorted(self.tools.items())]
        sec["Open todos"] = [f"[{s}] {text}" for text, s, _ in self.todos.values() if is_open(s)]
        return sec

    def index_tokens(
        self, sec: dict[str, list[str]], room: int, minor_room: int
    ) -> list[tuple[str, str]]:
        """The index, without identifiers a kept section already holds (the cut order
        drops the index before any of them); of the tokens only tool outputs showed,
        the newest that fit in ``room`` characters (their numbers and dates in what is
        left, at most ``minor_room``)."""
        kept = normalize(
            " ".join(
                v
                for name in ("Task", "User constraints", "Files touched", "Errors", "Open todos")
                for v in sec[name]
            )
        )
        tiers: list[list[tuple[str, str]]] = []
        for found in (self.output_index, self.output_minor):
            if found is self.output_minor:
                room = min(room, minor_room)
            tier: list[tuple[str, str]] = []
            for label, token in reversed(list(found)):
                if token in kept:
                    continue
                if room < len(token) + 2:
                    break
                room -= len(token) + 2
                tier.append((label, token))
            tier.reverse()
            tiers.append(tier)
        # Cut oldest first: the outputs' numbers and dates go first, then their names,
        # then any token a message stated.
        stated = [(label, token) for label, token in self.index if token not in kept]
        return tiers[1] + tiers[0] + stated


class ExtractiveSummarizer:
    """Deterministic extractive summary: same items, budget and instructions → same text."""

    name = "extractive"
    #: It reads any amount of input.
    max_input_tokens: int | None = None
    #: It finishes on its own, in about a millisecond a turn: ``run_summarizer`` calls it
    #: in-line rather than on a thread of its own (timed all the same).
    bounded = True

    def summarize(
        self, items: Sequence[ContextItem], *, budget: int, instructions: str = ""
    ) -> str:
        """The summary of ``items`` in about ``budget`` tokens (see the module docstring);
        ``instructions`` lead it as a ``Focus:`` line."""

        limit = max(_MIN_CHARS, budget * 4)
        run = _Run()
        run.read(items)
        sec = run.sections(limit)
        run_chars = sum(len(it.rendered) for it in items)
        index = run.index_tokens(
            sec,
            min(int(limit * OUTPUT_INDEX_SHARE), int(run_chars * OUTPUT_RUN_SHARE)),
            int(run_chars * OUTPUT_MINOR_SHARE),
        )
        focus = normalize(instructions)[:_MAX_FOCUS_CHARS]
        text = _render(sec, index, focus, limit)
        # 4 characters a token holds for prose, not for identifiers (a line of ids and
        # paths runs nearer 2): count, and cut further in proportion until it fits.
        # Cutting is greedy in a fixed order, so going on from the cut lists gives the
        # text a smaller limit would have given.
        tokens = count(text)
        while tokens > budget and len(text) > _MIN_CHARS:
            limit = max(_MIN_CHARS, min(len(text) - 1, len(text) * budget * 95 // (100 * tokens)))
            text = _render(sec, index, focus, limit)
            tokens = count(text)
        return text


def _index_lines(index: Sequence[tuple[str, str]]) -> Iterator[str]:
    grouped: dict[str, list[str]] = {label: [] for label in _LABEL_ORDER}
    for label, token in index:
        grouped.setdefault(label, []).append(token)
    for label, tokens in grouped.items():
        if tokens:
            yield f"- {label}: {', '.join(tokens)}"


def _join(sec: dict[str, list[str]], index: Sequence[tuple[str, str]], focus: str) -> str:
    lines = [HEADER]
    if focus:
        lines.append(_FOCUS + focus)
    for name in SECTIONS:
        body = list(_index_lines(index)) if name == INDEX else [_entry(v) for v in sec[name]]
        if body:
            lines.append(f"{name}:")
            lines.extend(body)
    return "\n".join(lines)


def _render(sec: dict[str, list[str]], index: list[tuple[str, str]], focus: str, limit: int) -> str:
    size = len(_join(sec, index, focus))
    # Cut the least important sections first when over budget (lengths tracked, so this
    # stays linear however many facts a long run yields): the oldest outline lines and
    # identifiers (the work moved on), the newest of the other facts (what was said
    # first, e.g. a constraint, holds throughout).
    for name in _CUT_ORDER:
        if size <= limit:
            break
        if name == INDEX:
            per_label: dict[str, int] = {}
            for label, _ in index:
                per_label[label] = per_label.get(label, 0) + 1
            gone = 0
            while gone < len(index) and size > limit:
                label, token = index[gone]
                gone += 1
                per_label[label] -= 1
                if per_label[label]:
                    size -= len(token) + 2  # ", " + token
                else:
                    size -= len(label) + len(token) + 5  # "\n- " + label + ": " + token
                if gone == len(index):
                    size -= len(INDEX) + 2  # "\n" + "name:"
            del index[:gone]
            continue
        values = sec[name]
        while values and size > limit:
            size -= len(_entry(values.pop(0 if name == "Outline" else -1))) + 1  # "\n" + entry
            if not values:
                size -= len(name) + 2  # "\n" + "name:"
    text = _join(sec, index, focus)
    return text if len(text) <= limit else text[: limit - 1] + "…"
