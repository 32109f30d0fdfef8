"""Claude Code session transcripts (``~/.claude/projects/*/<session>.jsonl``), 1.0.x and 2.x.

Each line is one JSON object.  Message lines (``type`` user / assistant) form a tree
through ``uuid`` / ``parentUuid``; this importer maps it onto the DAG:

* the assistant lines of one API message (same ``message.id``; Claude Code writes one
  line per content block) become one assistant node, with the message's ``usage``;
* every ``tool_result`` becomes a tool node whose ``caller`` is the assistant node
  holding its ``tool_use`` (name and input come from the tool_use);
* a user line answering with tool results continues the conversation from that
  assistant node, so the next assistant turn's predecessor is the previous assistant
  (2.x points each result at the line of its own tool_use, 1.0.x chains them; both
  land the same way);
* lines sharing a parent are siblings (an edited prompt, a retried answer): branches;
* Task sub-agent sidechains (``isSidechain``, inline in 1.0.x) become a sub-tree: their
  first message's caller is the Task tool node whose ``prompt`` it carries;
* ``system`` lines with a uuid become system nodes; lines without one (``summary``,
  ``queue-operation``, ``file-history-snapshot``, …) are kept in the session metadata
  under ``extra_lines``;
* a ``compact_boundary`` line becomes a compaction boundary node after its
  ``logicalParentUuid``, and the ``isCompactSummary`` message after it becomes that
  boundary's summary (``_compaction``).

Every line's own fields except ``message`` are kept in the node metadata under
``claude_code`` (``toolUseResult`` under ``tool_use_result`` of the tool node).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec

from ..model import ToolUseBlock
from ._common import (
    ImportedSession,
    SessionBuilder,
    fail,
    parse_time,
    split_tool_results,
    to_blocks,
    tool_result_output,
)
from ._compaction import COMPACTION_KEY, boundary_record, summary_text
from ._json import open_jsonl

__all__ = ["ClaudeCodeImporter"]

TASK_TOOLS = ("Task", "Agent")
#: Line fields whose few values repeat on every line.
_REPEATED = ("type", "userType", "cwd", "sessionId", "version", "gitBranch")
_ABSENT = object()
_MESSAGE_TYPES = ("user", "assistant")


def _prompt(args: Any) -> str | None:
    """The prompt a Task call hands its sub-agent (``None`` if it has none)."""
    prompt = args.get("prompt") if isinstance(args, dict) else None
    return prompt if isinstance(prompt, str) else None


def _line_meta(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("message", "toolUseResult")}


class _Parser:
    def __init__(self, path: str, key: str):
        self.path = path
        self.b = SessionBuilder(f"claude-code:{key}", path, "claude-code")
        self.anchor: dict[str, str] = {}  # line uuid -> node the conversation continues from
        self.by_message: dict[str, str] = {}  # API message id -> assistant node
        # tool_use id -> (assistant node, tool name, its input, line)
        self.tool_uses: dict[str, tuple[str, str, Any, int]] = {}
        self.task_of_sidechain: set[str] = set()
        # Task calls no sidechain has claimed yet, oldest first, and the same by prompt:
        # a sidechain finds its Task in O(1) instead of scanning every tool call so far.
        self.open_tasks: dict[str, None] = {}
        self.tasks_by_prompt: dict[str, list[str]] = {}
        self.extra: list[dict[str, Any]] = []
        self.last_main: str | None = None
        self.session_ids: set[str] = set()
        self.same: dict[str, str] = {}
        self.versions: set[str] = set()

    def entries(self, lines: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, dict[str, Any]]]:
        """The file's lines as JSON objects (``lines`` from ``open_jsonl``)."""
        found = False
        for no, entry in lines:
            if not isinstance(entry, dict):
                raise fail(
                    self.path,
                    no,
                    f"expected a JSON object, got {type(entry).__name__}",
                    "pass a Claude Code .jsonl transcript",
                )
            found = True
            yield no, entry
        if not found:
            raise fail(self.path, None, "the file holds no lines", "pass a non-empty transcript")

    def add(self, role: str, output: Any, no: int, entry: dict[str, Any], **kw: Any) -> str:
        """Add the node of line ``no``; its time is the line's timestamp."""
        when = parse_time(entry.get("timestamp"), path=self.path, line=no)
        return self.b.add(role, output, pos=no, created_at=when, line=no, **kw)

    def parent(self, entry: dict[str, Any], meta: dict[str, Any]) -> str | None:
        pu = entry.get("parentUuid")
        if pu is None:
            return None
        if pu not in self.anchor:
            # A resumed or compacted session may point at a line of another file.
            meta["missing_parent"] = pu
            return None
        return self.anchor[pu]

    def message(self, no: int, entry: dict[str, Any]) -> None:
        # What remains of the line once its message (and a tool result's toolUseResult)
        # is taken out is the node metadata's ``claude_code``: the decoded line itself,
        # not a copy of it.
        msg = entry.pop("message", None)
        result = entry.pop("toolUseResult", _ABSENT)
        uuid = entry.get("uuid")
        if not isinstance(msg, dict) or not isinstance(uuid, str):
            raise fail(
                self.path,
                no,
                f"a {entry.get('type')} line without 'message' or 'uuid'",
                "the line is not a Claude Code message; remove it or fix the file",
            )
        content = msg.get("content", "")
        if entry["type"] == "assistant":
            self.assistant(no, entry, msg, content)
        else:
            self.user(no, entry, content, result)
        if not entry.get("isSidechain"):
            self.last_main = self.anchor.get(uuid)

    def assistant(self, no: int, entry: dict[str, Any], msg: dict[str, Any], content: Any) -> None:
        mid = msg.get("id") or f"line:{entry['uuid']}"
        raw = content if isinstance(content, list) else [content] if content else []
        nid = self.by_message.get(mid)
        if nid is None:
            meta: dict[str, Any] = {
                "claude_code": entry,
                "uuids": [],
                "message_id": msg.get("id"),
            }
            nid = self.add(
                "assistant",
                [],
                no,
                entry,
                local=f"msg:{mid}",
                name=str(msg.get("model") or ""),
                predecessor=self.parent(entry, meta),
                metadata=meta,
            )
            self.by_message[mid] = nid
        fields = self.b.get(nid)
        meta = fields["metadata"]
        blocks = to_blocks(raw, meta, offset=len(fields["output"]))
        fields["output"].extend(blocks)
        meta["uuids"].append(entry["uuid"])
        for key in ("usage", "stop_reason", "stop_sequence"):
            if msg.get(key) is not None:
                meta[key] = msg[key]  # the last line of a message carries the final values
        for item, block in zip(raw, blocks):
            if isinstance(item, dict) and item.get("type") == "tool_use":
                # The converted block's name and input, not the line's dict: the tool
                # node shares them instead of keeping a second copy.
                args: Any
                if isinstance(block, ToolUseBlock):
                    name, args = block.name, block.input
                else:
                    name, args = str(item.get("name", "")), item.get("input")
                self.tool_use(str(item.get("id")), nid, name, args, no)
        self.anchor[entry["uuid"]] = nid

    def tool_use(self, tid: str, nid: str, name: str, args: Any, no: int) -> None:
        known = self.tool_uses.get(tid)
        self.tool_uses[tid] = (nid, name, args, no)
        if name not in TASK_TOOLS or tid in self.task_of_sidechain:
            return
        self.open_tasks.setdefault(tid, None)
        prompt = _prompt(args)
        if prompt is not None and (known is None or _prompt(known[2]) != prompt):
            self.tasks_by_prompt.setdefault(prompt, []).append(tid)

    def is_open_task(self, tid: str) -> bool:
        return tid in self.open_tasks and self.tool_uses[tid][1] in TASK_TOOLS

    def claim_task(self, prompt: str) -> str | None:
        """The latest unclaimed Task call whose prompt is ``prompt``, else the latest
        unclaimed one; claimed entries are dropped lazily as they surface."""
        stack = self.tasks_by_prompt.get(prompt, [])
        while stack and not (
            self.is_open_task(stack[-1]) and _prompt(self.tool_uses[stack[-1]][2]) == prompt
        ):
            stack.pop()
        tid = stack[-1] if stack else None
        while tid is None and self.open_tasks:
            last = next(reversed(self.open_tasks))
            if self.is_open_task(last):
                tid = last
            else:
                del self.open_tasks[last]
        if tid is not None:
            del self.open_tasks[tid]
            self.task_of_sidechain.add(tid)
        return tid

    def user(self, no: int, entry: dict[str, Any], content: Any, result: Any) -> None:
        uuid = entry["uuid"]
        if entry.get("isCompactSummary") and self.compact_summary(no, entry, content):
            return
        meta: dict[str, Any] = {"claude_code": entry}
        if entry.get("isSidechain") and entry.get("parentUuid") is None:
            self.sidechain_root(no, entry, content, meta)
            return
        results, others = split_tool_results(content) if isinstance(content, list) else ([], [])
        answered: str | None = None
        for res in results:
            answered = self.tool_result(no, entry, res, result)
        if answered is not None:
            self.anchor[uuid] = answered
        if others or not results:
            output = to_blocks(others, meta) if isinstance(content, list) else str(content)
            pred = answered if answered is not None else self.parent(entry, meta)
            self.anchor[uuid] = self.add("user", output, no, entry, predecessor=pred, metadata=meta)

    def tool_result(self, no: int, entry: dict[str, Any], res: dict[str, Any], result: Any) -> str:
        tid = str(res.get("tool_use_id"))
        use = self.tool_uses.get(tid)
        if use is None:
            raise fail(
                self.path,
                no,
                f"tool_result for {tid!r} has no tool_use before it",
                "the transcript is incomplete or out of order; import the full file",
            )
        caller, name, args, _ = use
        meta: dict[str, Any] = {
            "tool_use_id": tid,
            "is_error": bool(res.get("is_error", False)),
            "claude_code": entry,
        }
        out = tool_result_output(res, meta)
        if result is not _ABSENT:
            meta["tool_use_result"] = result
        nid = self.b.node_id(f"tool:{tid}")
        if nid in self.b.records:
            raise fail(self.path, no, f"a second tool_result for {tid!r}", "remove the duplicate")
        self.add(
            "tool",
            out,
            no,
            entry,
            local=f"tool:{tid}",
            name=name,
            input=args,
            caller=caller,
            metadata=meta,
        )
        return caller

    def sidechain_root(
        self, no: int, entry: dict[str, Any], content: Any, meta: dict[str, Any]
    ) -> None:
        if isinstance(content, list):
            text = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            output: Any = to_blocks(content, meta)
        else:
            text = output = str(content)
        tid = self.claim_task(text)
        caller = None
        if tid is not None:
            caller = self.b.node_id(f"tool:{tid}")
            meta["task_tool_use_id"] = tid
        else:
            meta["sidechain_unattached"] = True
        self.anchor[entry["uuid"]] = self.add(
            "user", output, no, entry, caller=caller, metadata=meta
        )

    def compact_summary(self, no: int, entry: dict[str, Any], content: Any) -> bool:
        """Make an ``isCompactSummary`` message the summary of the boundary it follows
        (``True``), if it follows one that has none yet."""
        parent = entry.get("parentUuid")
        nid = self.anchor.get(parent) if isinstance(parent, str) else None
        if nid is None or nid not in self.b.records:
            return False
        meta = self.b.get(nid)["metadata"]
        record = meta.get(COMPACTION_KEY)
        if not isinstance(record, dict) or record.get("summary") is not None:
            return False
        record["summary"] = summary_text(content)
        record["source"]["summary_line"] = no
        meta["claude_code_summary"] = entry
        self.anchor[entry["uuid"]] = nid
        return True

    def other(self, no: int, entry: dict[str, Any]) -> None:
        uuid = entry.get("uuid")
        if entry.get("type") == "system" and isinstance(uuid, str):
            meta: dict[str, Any] = {"claude_code": _line_meta(entry)}
            content = entry.get("content", "")
            text = content if isinstance(content, str) else json.dumps(content)
            pred = self.parent(entry, meta)
            record = boundary_record(entry, importer="claude-code", previous=None)
            if record is not None and "logicalParentUuid" in entry:  # continues that line
                pred = self.parent({"parentUuid": entry["logicalParentUuid"]}, meta)
            if record is not None:  # a boundary node: its text is never shown to the model
                meta[COMPACTION_KEY] = {**record, "previous": pred}
            self.anchor[uuid] = self.add(
                "system", "", no, entry, input=text, predecessor=pred, metadata=meta
            )
            if not entry.get("isSidechain"):
                self.last_main = self.anchor[uuid]
            return
        if isinstance(uuid, str):  # an unknown line kind inside the tree: pass through
            pu = entry.get("parentUuid")
            if pu in self.anchor:
                self.anchor[uuid] = self.anchor[pu]
        self.extra.append({"line": no, **entry})

    def finish(self) -> ImportedSession:
        # A Task whose sub-agent ran but whose result was never written still needs its
        # tool node: the sidechain hangs off it.
        for tid in self.task_of_sidechain:
            nid = self.b.node_id(f"tool:{tid}")
            if nid not in self.b.records:
                caller, name, args, line = self.tool_uses[tid]
                self.b.add(
                    "tool",
                    "",
                    pos=line + 0.5,
                    local=f"tool:{tid}",
                    name=name,
                    input=args,
                    caller=caller,
                    metadata={"tool_use_id": tid, "is_error": False, "result_missing": True},
                    created_at=self.b.get(caller)["created_at"],
                    line=line,
                )
        self.b.head = self.last_main
        sessions = sorted(self.session_ids)
        meta = self.b.metadata
        meta["claude_code_session"] = sessions[0] if len(sessions) == 1 else sessions
        if self.versions:
            meta["claude_code_versions"] = sorted(self.versions)
        if self.extra:
            meta["extra_lines"] = self.extra
        return self.b.build()

    def run(self, lines: Iterator[tuple[int, Any]]) -> ImportedSession:
        for no, entry in self.entries(lines):
            for key in _REPEATED:  # one string object for what every line repeats
                value = entry.get(key)
                if isinstance(value, str):
                    entry[key] = self.same.setdefault(value, value)
            if isinstance(entry.get("sessionId"), str):
                self.session_ids.add(entry["sessionId"])
            if "version" in entry:
                self.versions.add(str(entry["version"]))
            kind = entry.get("type")
            if not isinstance(kind, str):
                raise fail(
                    self.path,
                    no,
                    "a line without a 'type' field",
                    "this does not look like a Claude Code transcript; try --format",
                )
            if kind in _MESSAGE_TYPES:
                self.message(no, entry)
            else:
                self.other(no, entry)
        return self.finish()


class ClaudeCodeImporter:
    """Claude Code ``.jsonl`` transcripts (1.0.x and 2.x); one session per file."""

    name = "claude-code"
    description = "Claude Code JSONL transcript (1.0.x / 2.x), sub-agent sidechains included"
    auto = True

    def detect(self, path: str, head: bytes) -> bool:
        """The first line is a JSON object with a ``type`` and a Claude Code id field
        (or is broken JSON in a ``.jsonl`` file, so the parse can name the line)."""
        first = head.lstrip().split(b"\n", 1)[0]
        try:
            entry = msgspec.json.decode(first)
        except (msgspec.DecodeError, RecursionError):
            # A broken first line of a .jsonl file: claim it, so the parse says which
            # line is bad instead of "unknown format".
            return path.endswith(".jsonl") and first.startswith(b"{")
        return (
            isinstance(entry, dict)
            and isinstance(entry.get("type"), str)
            and any(k in entry for k in ("sessionId", "uuid", "leafUuid"))
        )

    def parse(self, path: str) -> list[ImportedSession]:
        """One session with the whole tree of the file."""
        with open_jsonl(path) as (key, lines):
            return [_Parser(path, key).run(lines)]
