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
* Task sub-agent sidechains (``isSidechain``) become a sub-tree: their first message's
  caller is the Task tool node that started them: the one whose result names their
  ``agentId``, else the one whose ``prompt`` they carry.  1.0.x writes them inline;
  2.x writes each to ``agent-<id>.jsonl`` beside the session file (or in
  ``<session id>/subagents/``), lines carrying the session's ``sessionId``: those
  files are read with the session file, into the same session;
* ``system`` lines with a uuid become system nodes; lines without one (``summary``,
  ``queue-operation``, ``file-history-snapshot``, …) are kept in the session metadata
  under ``extra_lines``;
* a ``compact_boundary`` line becomes a compaction boundary node after its
  ``logicalParentUuid``, and the ``isCompactSummary`` message after it becomes that
  boundary's summary (``_compaction``).

Every line's own fields except ``message`` are kept in the node metadata under
``claude_code`` (``toolUseResult`` under ``tool_use_result`` of the tool node).

A session is the file's: its import key is the file's path and ``sessionId``.  A
transcript that grew since its import is appended to its session (``_growth``): the
new lines become new nodes, and HEAD follows the transcript unless it was moved since.
Lines of one API message split by an import become two assistant nodes, the second
(metadata ``continues``) after the first; a Task result that arrives after its
sub-agent was imported without it becomes a tool node with metadata ``completes``
naming the empty one (``result_missing``) stored before.  A last line cut off while
being written is left for the next import (a ``TranscriptWarning``).  The session
metadata records ``model`` (the first assistant message's) and ``provider``
(``anthropic``); Claude Code records neither its system prompt nor its tool
declarations.
"""

from __future__ import annotations

import json
import os
import re
from contextlib import ExitStack
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from ..errors import ImportFormatError, NotFoundError
from ..model import ToolUseBlock
from ._common import (
    ImportedSession,
    SessionBuilder,
    fail,
    parse_time,
    read_bytes,
    session_id_for,
    split_tool_results,
    to_blocks,
    tool_result_output,
)
from ._compaction import COMPACTION_KEY, boundary_record, summary_text
from ._growth import STATE_KEY, Sessions, Step, check_unchanged, new_state, steps_of
from ._json import JsonlFile, decode_json, open_jsonl

__all__ = ["ClaudeCodeImporter", "is_agent_file"]

TASK_TOOLS = ("Task", "Agent")
#: Line fields whose few values repeat on every line.
_REPEATED = ("type", "userType", "cwd", "sessionId", "version", "gitBranch")
_ABSENT = object()
_MESSAGE_TYPES = ("user", "assistant")
#: The keys a Claude Code line starts with (a cut-off first line is claimed by them).
_FIRST_KEYS = re.compile(rb'^\{\s*"(parentUuid|type|uuid|leafUuid|sessionId|isSidechain)"\s*:')
#: A session id that can name a folder (``<id>/subagents/``) without leaving its parent.
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
#: How Claude Code 2.1 names the transcript of a compaction call (a sub-agent file).
COMPACT_AGENT_PREFIX = "agent-acompact"
#: Where each file's lines sit in the node order: a sub-agent file after the session's.
_FILE_SPAN = 1e9


def is_agent_file(path: str) -> bool:
    """Whether the file is named as Claude Code 2.x names a sub-agent transcript (or, 2.1,
    its ``.meta.json``)."""
    name = os.path.basename(path)
    return name.startswith("agent-") and name.endswith((".jsonl", ".meta.json"))


def read_meta(path: str) -> Any:
    """A sub-agent's ``.meta.json``; one that cannot be read is kept as the reason."""
    try:
        return decode_json(path, read_bytes(path))
    except ImportFormatError as exc:
        return {"unreadable": exc.message}


def _prompt(args: Any) -> str | None:
    """The prompt a Task call hands its sub-agent (``None`` if it has none)."""
    prompt = args.get("prompt") if isinstance(args, dict) else None
    return prompt if isinstance(prompt, str) else None


def _line_meta(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("message", "toolUseResult")}


class _Parser:
    def __init__(self, source: str, key: str, seed: str):
        self.source = source
        self.path = source  # the file being read
        self.base = 0.0  # where the lines of the file being read sit in the node order
        self.agent_file = False  # the file being read is a sub-agent transcript
        self.b = SessionBuilder(key, source, "claude-code", seed=seed)
        self.anchor: dict[str, str] = {}  # line uuid -> node the conversation continues from
        # uuid of a line that is no node (progress, hooks' and the UI's system lines)
        # -> its parentUuid: a line under it continues from where it hangs.
        self.through: dict[str, Any] = {}
        self.agent_meta: dict[str, Any] = {}  # agentId -> its agent-<id>.meta.json
        self.agent_last: dict[str, str] = {}  # sub-agent of progress lines -> last uuid
        self.boundaries: list[tuple[float, str]] = []  # (time, node) of each boundary
        self.compact_file = False  # the file being read is a compaction call's
        self.by_message: dict[str, str] = {}  # API message id -> assistant node
        # tool_use id -> (assistant node, tool name, its input, its place, where it is)
        self.tool_uses: dict[str, tuple[str, str, Any, float, dict[str, Any]]] = {}
        self.task_of_sidechain: set[str] = set()
        self.task_of_agent: dict[str, str] = {}  # agentId a Task result names -> tool_use id
        # Task calls no sidechain has claimed yet, oldest first, and the same by prompt:
        # a sidechain finds its Task in O(1) instead of scanning every tool call so far.
        self.open_tasks: dict[str, None] = {}
        self.tasks_by_prompt: dict[str, list[str]] = {}
        self.extra: list[dict[str, Any]] = []
        self.last_main: str | None = None
        self.last_any: str | None = None
        self.session_ids: set[str] = set()
        self.same: dict[str, str] = {}
        self.versions: set[str] = set()
        self.found = False  # the session file had a line

    def read(self, reader: JsonlFile, until: int | None, index: int) -> None:
        """Read the lines of ``reader`` that start before byte ``until`` (all: ``None``);
        ``index`` is the file's place in the session (0: the session file)."""
        self.path, self.base, self.agent_file = reader.path, index * _FILE_SPAN, index > 0
        self.compact_file = os.path.basename(reader.path).startswith(COMPACT_AGENT_PREFIX)
        for no, entry in reader.values(until):
            if not isinstance(entry, dict):
                raise fail(
                    self.path,
                    no,
                    f"expected a JSON object, got {type(entry).__name__}",
                    "pass a Claude Code .jsonl transcript",
                )
            self.found = self.found or index == 0
            self.line(no, entry)

    def where(self, no: int) -> dict[str, Any]:
        """Where line ``no`` of the file being read is, as ``SessionBuilder.add`` takes it
        (a sub-agent file's line is named by the file, the session file's by number)."""
        if self.agent_file:
            return {"at": f"{os.path.basename(self.path)}:{no}"}
        return {"line": no}

    def add(self, role: str, output: Any, no: int, entry: dict[str, Any], **kw: Any) -> str:
        """Add the node of line ``no``; its time is the line's timestamp."""
        when = parse_time(entry.get("timestamp"), path=self.path, line=no)
        nid = self.b.add(role, output, pos=self.base + no, created_at=when, **self.where(no), **kw)
        self.last_any = nid
        return nid

    def parent(self, entry: dict[str, Any], meta: dict[str, Any]) -> str | None:
        pu = entry.get("parentUuid")
        seen = 0
        while pu in self.through and seen <= len(self.through):  # lines that are no node
            pu, seen = self.through[pu], seen + 1
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
        if not entry.get("isSidechain") and not self.agent_file:
            self.last_main = self.anchor.get(uuid)

    def assistant(self, no: int, entry: dict[str, Any], msg: dict[str, Any], content: Any) -> None:
        mid = msg.get("id") or f"line:{entry['uuid']}"
        raw = content if isinstance(content, list) else [content] if content else []
        nid = self.by_message.get(mid)
        local = f"msg:{mid}"
        meta: dict[str, Any] = {"claude_code": entry, "uuids": [], "message_id": msg.get("id")}
        if nid is not None and nid in self.b.stored:
            # An earlier import stored the message's first lines, and a stored node
            # never changes: the lines it gained since become a node after it.
            meta["continues"] = nid
            local, nid = f"msg:{mid}@{entry['uuid']}", None
        if nid is None:
            nid = self.add(
                "assistant",
                [],
                no,
                entry,
                local=local,
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
        self.tool_uses[tid] = (nid, name, args, self.base + no, self.where(no))
        if name not in TASK_TOOLS or tid in self.task_of_sidechain:
            return
        self.open_tasks.setdefault(tid, None)
        prompt = _prompt(args)
        if prompt is not None and (known is None or _prompt(known[2]) != prompt):
            self.tasks_by_prompt.setdefault(prompt, []).append(tid)

    def is_open_task(self, tid: str) -> bool:
        return tid in self.open_tasks and self.tool_uses[tid][1] in TASK_TOOLS

    def claim_task(self, prompt: str, agent: Any = None) -> str | None:
        """The unclaimed Task call whose result names sub-agent ``agent``, else the
        latest unclaimed one whose prompt is ``prompt``, else the latest unclaimed one;
        claimed entries are dropped lazily as they surface."""
        named = self.task_of_agent.get(agent) if isinstance(agent, str) else None
        if named is not None and self.is_open_task(named):
            del self.open_tasks[named]
            self.task_of_sidechain.add(named)
            return named
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
        caller, name, args = use[:3]
        meta: dict[str, Any] = {
            "tool_use_id": tid,
            "is_error": bool(res.get("is_error", False)),
            "claude_code": entry,
        }
        out = tool_result_output(res, meta)
        if result is not _ABSENT:
            meta["tool_use_result"] = result
            agent = result.get("agentId") if isinstance(result, dict) else None
            if name in TASK_TOOLS and isinstance(agent, str):
                self.task_of_agent[agent] = tid
        local = f"tool:{tid}"
        nid = self.b.node_id(local)
        if nid in self.b.records:
            if not (nid in self.b.stored and self.b.get(nid)["metadata"].get("result_missing")):
                raise fail(
                    self.path, no, f"a second tool_result for {tid!r}", "remove the duplicate"
                )
            # The sub-agent was imported before its result came, under an empty tool
            # node that is stored and stays: the result is a node of its own.
            meta["completes"] = nid
            local = f"tool:{tid}@{entry['uuid']}"
        self.add(
            "tool",
            out,
            no,
            entry,
            local=local,
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
        if self.compact_file:
            # A compaction call: no Task started it.  It made the summary of the first
            # boundary written after it started (named, not an edge: the call is no
            # part of any request of the conversation).
            when = parse_time(entry.get("timestamp"), path=self.path, line=no)
            after = [nid for t, nid in self.boundaries if t >= when]
            meta["compaction_call"] = True
            if after or self.boundaries:
                meta["compaction_boundary"] = (after or [self.boundaries[-1][1]])[0]
            meta["sidechain_unattached"] = True
            self.anchor[entry["uuid"]] = self.add("user", output, no, entry, metadata=meta)
            return
        if entry.get("agentId") in self.agent_meta:
            meta["agent_meta"] = self.agent_meta[entry["agentId"]]
        tid = self.claim_task(text, entry.get("agentId"))
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
        if record["source"].get("parent_absent"):
            # Nothing before the boundary to fold into it: the summary is the context.
            record["summary"] = summary_text(content)
            record["source"]["summary_line"] = no
            return False
        record["summary"] = summary_text(content)
        record["source"]["summary_line"] = no
        meta["claude_code_summary"] = entry
        self.anchor[entry["uuid"]] = nid
        return True

    def other(self, no: int, entry: dict[str, Any]) -> None:
        uuid = entry.get("uuid")
        if entry.get("subtype") == "compact_boundary" and isinstance(uuid, str):
            self.boundary(no, entry, uuid)
            return
        if entry.get("type") == "progress" and self.agent_progress(no, entry):
            return
        if isinstance(uuid, str):  # a line of the tree that is no node: pass through
            self.through[uuid] = entry.get("parentUuid")
        self.extra.append(
            {"line": no, "file": os.path.basename(self.path), **entry}
            if self.agent_file
            else {"line": no, **entry}
        )

    def boundary(self, no: int, entry: dict[str, Any], uuid: str) -> None:
        """A ``compact_boundary`` line: a boundary node after ``logicalParentUuid``.  When
        that line is not in the file the boundary follows the conversation read before
        it (record ``source.logical_parent_absent``); when nothing was (a file that
        starts compacted), nothing is there to fold: the summary message after it stays
        a user node (the compacted context Claude Code sent), and the record says
        ``parent_absent``."""
        meta: dict[str, Any] = {"claude_code": _line_meta(entry)}
        content = entry.get("content", "")
        text = content if isinstance(content, str) else json.dumps(content)
        pred = self.parent(entry, meta)
        record = boundary_record(entry, importer="claude-code", previous=None)
        assert record is not None
        if "logicalParentUuid" in entry:  # continues that line
            pred = self.parent({"parentUuid": entry["logicalParentUuid"]}, meta)
            if pred is None and self.last_main is not None and not entry.get("isSidechain"):
                pred = self.last_main
                record["source"]["logical_parent_absent"] = True
        if pred is None:
            record["source"]["parent_absent"] = True
        # A boundary node: its text is never shown to the model.
        meta[COMPACTION_KEY] = {**record, "previous": pred}
        node = self.add("system", "", no, entry, input=text, predecessor=pred, metadata=meta)
        self.anchor[uuid] = node
        self.boundaries.append((self.b.get(node)["created_at"], node))
        if not entry.get("isSidechain"):
            self.last_main = node

    def agent_progress(self, no: int, entry: dict[str, Any]) -> bool:
        """A sub-agent's message as Claude Code 2.1 mirrors it into the session file
        (``progress`` with ``data.type`` ``agent_progress``): read as the sub-agent's
        own line would be, under the Task call ``parentToolUseID`` names (``True``: the
        line is taken).  The sub-agent's own file, read after, repeats these lines
        under the same uuids: they are read once."""
        data = entry.get("data")
        if not isinstance(data, dict) or data.get("type") != "agent_progress":
            return False
        msg, agent = data.get("message"), data.get("agentId")
        if (
            not isinstance(msg, dict)
            or msg.get("type") not in _MESSAGE_TYPES
            or not isinstance(msg.get("uuid"), str)
            or not isinstance(agent, str)
        ):
            return False
        if msg["uuid"] in self.anchor:
            return True  # mirrored twice
        prev = self.agent_last.get(agent)
        task = entry.get("parentToolUseID")
        if prev is None and isinstance(task, str):
            self.task_of_agent.setdefault(agent, task)
        line = {
            **msg,
            "isSidechain": True,
            "agentId": agent,
            "sessionId": entry.get("sessionId"),
            "parentUuid": prev,
            "progress": {
                **{k: v for k, v in entry.items() if k != "data"},
                "data": {k: v for k, v in data.items() if k != "message"},
            },
        }
        self.agent_last[agent] = msg["uuid"]
        self.message(no, line)
        return True

    def close_step(self) -> None:
        """End one import's reading: a Task whose sub-agent ran but whose result is not
        written (yet) still needs its tool node, for the sidechain to hang off."""
        for tid in sorted(self.task_of_sidechain):
            nid = self.b.node_id(f"tool:{tid}")
            if nid not in self.b.records:
                caller, name, args, pos, where = self.tool_uses[tid]
                self.b.add(
                    "tool",
                    "",
                    pos=pos + 0.5,
                    local=f"tool:{tid}",
                    name=name,
                    input=args,
                    caller=caller,
                    metadata={"tool_use_id": tid, "is_error": False, "result_missing": True},
                    created_at=self.b.get(caller)["created_at"],
                    **where,
                )

    def finish(self) -> ImportedSession:
        if not self.found:
            raise fail(self.source, None, "the file holds no lines", "pass a non-empty transcript")
        self.close_step()
        # A sub-agent transcript read alone has no main line: it is its own conversation.
        self.b.head = self.last_main if self.last_main is not None else self.last_any
        sessions = sorted(self.session_ids)
        meta = self.b.metadata
        meta["claude_code_session"] = sessions[0] if len(sessions) == 1 else sessions
        meta["provider"] = "anthropic"
        if self.versions:
            meta["claude_code_versions"] = sorted(self.versions)
        if self.extra:
            meta["extra_lines"] = self.extra
        return self.b.build()

    def line(self, no: int, entry: dict[str, Any]) -> None:
        """Take in one line of the file being read."""
        for key in _REPEATED:  # one string object for what every line repeats
            value = entry.get(key)
            if isinstance(value, str):
                entry[key] = self.same.setdefault(value, value)
        if isinstance(entry.get("sessionId"), str):
            self.session_ids.add(entry["sessionId"])
        if "version" in entry:
            self.versions.add(str(entry["version"]))
        kind = entry.get("type")
        uuid = entry.get("uuid")
        if self.agent_file and (uuid in self.anchor or uuid in self.through):
            # Read already: a sub-agent's line mirrored into the session file, or the
            # conversation a compaction call's file repeats.
            return
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


def _identity(reader: JsonlFile) -> tuple[str | None, str]:
    """The ``sessionId`` of the first line that has one, and a hash of the first line
    (read by a second reader, before the real read)."""
    peek = reader.again()
    first = ""
    try:
        for _, entry in peek.values():
            first = first or peek.digest(*peek.span)[:32]
            sid = entry.get("sessionId") if isinstance(entry, dict) else None
            if isinstance(sid, str):
                return sid, first
    finally:
        peek.close()
    return None, first


def _taken(store: Sessions, session_id: str) -> bool:
    try:
        store.get_session(session_id)
    except NotFoundError:
        return False
    return True


@lru_cache(maxsize=4096)
def _first_session_id(path: str, mtime_ns: int, size: int) -> str | None:
    # A directory of sessions asks every sibling once per session file: cached by
    # the file's identity, so a changed file is read again.
    try:
        with open_jsonl(path) as reader:
            return _identity(reader)[0]
    except (ImportFormatError, OSError):
        return None  # read (and refused with its reason) when imported on its own


def agent_meta_files(agents: list[str]) -> dict[str, str]:
    """``agent-<id>.meta.json`` beside each sub-agent transcript (Claude Code 2.1 writes
    the sub-agent's type there): agent id -> file."""
    out = {}
    for agent in agents:
        meta = Path(agent[: -len(".jsonl")] + ".meta.json")
        if meta.is_file():
            out[Path(agent).name[len("agent-") : -len(".jsonl")]] = str(meta)
    return out


def agent_files(path: str, session_id: str) -> list[str]:
    """The sub-agent transcripts of the session in ``path``: ``agent-*.jsonl`` files
    beside it or in ``<session id>/subagents/`` whose lines carry its ``sessionId``."""
    folder = Path(path).parent
    found = sorted(folder.glob("agent-*.jsonl"))
    if _SAFE_ID.match(session_id):
        found += sorted((folder / session_id / "subagents").glob("agent-*.jsonl"))
    out = []
    for cand in found:
        try:
            st = cand.stat()
        except OSError:
            continue
        if str(cand) != path and _first_session_id(str(cand), st.st_mtime_ns, st.st_size) == (
            session_id
        ):
            out.append(str(cand))
    return out


class ClaudeCodeImporter:
    """Claude Code ``.jsonl`` transcripts (1.0.x and 2.x); one session per file, its
    sub-agent transcripts included; a grown transcript appends to its session."""

    name = "claude-code"
    description = "Claude Code JSONL transcript (1.0.x / 2.x), sub-agent sidechains included"
    auto = True

    def detect(self, path: str, head: bytes) -> bool:
        """The first line is a JSON object with a ``type`` and a Claude Code id field
        (or is broken JSON starting with a key Claude Code writes first, so the parse
        can name the line)."""
        first = head.lstrip().split(b"\n", 1)[0]
        try:
            entry = msgspec.json.decode(first)
        except (msgspec.DecodeError, RecursionError):
            # A broken (or, past HEAD_BYTES, cut) first line: claim it when it starts
            # like a Claude Code line, so the parse says which line is bad instead of
            # "unknown format"; another JSONL format's long first line is not ours.
            return path.endswith(".jsonl") and _FIRST_KEYS.match(first) is not None
        return (
            isinstance(entry, dict)
            and isinstance(entry.get("type"), str)
            and (
                any(k in entry for k in ("sessionId", "uuid", "leafUuid"))
                # 2.1 starts a file with the snapshot of the files it may edit
                or (entry["type"] == "file-history-snapshot" and "snapshot" in entry)
            )
        )

    def companion(self, path: str) -> bool:
        """A sub-agent transcript: read with its session file when that is imported too."""
        return is_agent_file(path)

    grows = True

    def parse(self, path: str, *, store: Sessions | None = None) -> list[ImportedSession]:
        """One session with the whole tree of the file and of its sub-agent files.

        The import key is the file's path and ``sessionId``; the session and node ids
        come from the ``sessionId`` and the first line, so they do not depend on where
        the file is (unless a copy elsewhere took them).  With ``store`` (read only) a
        transcript imported there before is read as its continuation: the session's
        new nodes only (``ImportedSession.base``).
        """
        with ExitStack() as stack:
            main = stack.enter_context(open_jsonl(path, glued=True))
            sid, first = _identity(main)
            key = f"claude-code:{path}" + (f"#{sid}" if sid is not None else "")
            seed = f"claude-code:{sid or ''}:{first}"
            info = store.find_session(key) if store is not None else None
            if info is not None and info.id != session_id_for(seed):
                seed = key  # it was imported when a copy elsewhere had these ids
            elif info is None and store is not None and _taken(store, session_id_for(seed)):
                seed = key  # a copy elsewhere has them
            agents = [] if sid is None or is_agent_file(path) else agent_files(path, sid)
            readers = {path: main}
            for agent in agents:
                readers[agent] = stack.enter_context(open_jsonl(agent, glued=True))
            state = info.metadata.get(STATE_KEY) if info is not None else None
            p = _Parser(path, key, seed)
            metas = agent_meta_files(agents)
            for agent_id, meta_file in metas.items():
                p.agent_meta[agent_id] = read_meta(meta_file)
            order = [path]
            if state is not None:
                check_unchanged(state, readers, path)
                for earlier in steps_of(state, path):
                    self._read(p, earlier, readers, order)
                    p.close_step()
                    p.b.mark_stored()
            order += [a for a in agents if a not in order]
            self._read(p, [(f, -1) for f in order], readers, order)
            session = p.finish()
            glued = {
                os.path.basename(f) if f != path else "": r.glued_lines
                for f, r in readers.items()
                if r.glued_lines
            }
            if glued:  # lines holding two objects written back to back, read as two
                session.metadata["glued_lines"] = glued.get("") if list(glued) == [""] else glued
            session.metadata[STATE_KEY] = new_state(
                state, [(f, readers[f].end) for f in order], readers, session.head, path
            )
            session.files = order + list(metas.values())
            if info is not None:
                session.base, session.base_state = info.id, state
            return [session]

    @staticmethod
    def _read(p: _Parser, step: Step, readers: dict[str, JsonlFile], order: list[str]) -> None:
        # Files are read in the order they first appeared; a negative end: to the end.
        for file, end in step:
            if file not in order:
                order.append(file)
            p.read(readers[file], None if end < 0 else end, order.index(file))
