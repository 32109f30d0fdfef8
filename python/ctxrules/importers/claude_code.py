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
  under ``extra_lines``.

Every line's own fields except ``message`` are kept in the node metadata under
``claude_code`` (``toolUseResult`` under ``tool_use_result`` of the tool node).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from ._common import (
    ImportedSession,
    SessionBuilder,
    decode_text,
    fail,
    file_key,
    parse_time,
    read_bytes,
    repair_surrogates,
    split_tool_results,
    to_blocks,
    tool_result_output,
)

__all__ = ["ClaudeCodeImporter"]

TASK_TOOLS = ("Task", "Agent")
_MESSAGE_TYPES = ("user", "assistant")


def _line_meta(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("message", "toolUseResult")}


class _Parser:
    def __init__(self, path: str, data: bytes):
        self.path = path
        self.text = decode_text(path, data)
        self.b = SessionBuilder(f"claude-code:{file_key(data)}", path, "claude-code")
        self.anchor: dict[str, str] = {}  # line uuid -> node the conversation continues from
        self.by_message: dict[str, str] = {}  # API message id -> assistant node
        self.tool_uses: dict[str, tuple[str, dict[str, Any], int]] = {}  # id -> (node, block, line)
        self.tool_nodes: dict[str, str] = {}  # tool_use_id -> tool node
        self.task_of_sidechain: set[str] = set()
        self.extra: list[dict[str, Any]] = []
        self.last_main: str | None = None
        self._entries: list[tuple[int, dict[str, Any]]] = []

    def entries(self) -> list[tuple[int, dict[str, Any]]]:
        lines = self.text.split("\n")
        out = []
        for no, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                entry = repair_surrogates(json.loads(raw), raw)
            except json.JSONDecodeError as exc:
                last = all(not rest.strip() for rest in lines[no:])
                if last and not self.text.endswith("\n"):
                    raise fail(
                        self.path,
                        no,
                        "the last line is cut off: the file looks truncated",
                        "re-copy the complete transcript (or drop its last line)",
                    ) from None
                raise fail(
                    self.path,
                    no,
                    f"bad JSON: {exc.msg} (column {exc.colno})",
                    "fix or remove that line",
                ) from None
            if not isinstance(entry, dict):
                raise fail(
                    self.path,
                    no,
                    f"expected a JSON object, got {type(entry).__name__}",
                    "pass a Claude Code .jsonl transcript",
                )
            out.append((no, entry))
        if not out:
            raise fail(self.path, None, "the file holds no lines", "pass a non-empty transcript")
        return out

    def add(self, role: str, output: Any, no: int, entry: dict[str, Any], **kw: Any) -> str:
        """Add the node of line ``no``; its time is the line's timestamp."""
        return self.b.add(role, output, pos=no, created_at=parse_time(entry.get("timestamp")), **kw)

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
        msg = entry.get("message")
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
            self.user(no, entry, content)
        if not entry.get("isSidechain"):
            self.last_main = self.anchor.get(uuid)

    def assistant(self, no: int, entry: dict[str, Any], msg: dict[str, Any], content: Any) -> None:
        mid = msg.get("id") or f"line:{entry['uuid']}"
        raw = content if isinstance(content, list) else [content] if content else []
        nid = self.by_message.get(mid)
        if nid is None:
            meta: dict[str, Any] = {
                "claude_code": _line_meta(entry),
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
        fields["output"].extend(to_blocks(raw, meta, offset=len(fields["output"])))
        meta["uuids"].append(entry["uuid"])
        for key in ("usage", "stop_reason", "stop_sequence"):
            if msg.get(key) is not None:
                meta[key] = msg[key]  # the last line of a message carries the final values
        for block in raw:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                self.tool_uses[str(block.get("id"))] = (nid, block, no)
        self.anchor[entry["uuid"]] = nid

    def user(self, no: int, entry: dict[str, Any], content: Any) -> None:
        uuid = entry["uuid"]
        meta: dict[str, Any] = {"claude_code": _line_meta(entry)}
        if entry.get("isSidechain") and entry.get("parentUuid") is None:
            self.sidechain_root(no, entry, content, meta)
            return
        results, others = split_tool_results(content) if isinstance(content, list) else ([], [])
        answered: str | None = None
        for res in results:
            answered = self.tool_result(no, entry, res)
        if answered is not None:
            self.anchor[uuid] = answered
        if others or not results:
            output = to_blocks(others, meta) if isinstance(content, list) else str(content)
            pred = answered if answered is not None else self.parent(entry, meta)
            self.anchor[uuid] = self.add("user", output, no, entry, predecessor=pred, metadata=meta)

    def tool_result(self, no: int, entry: dict[str, Any], res: dict[str, Any]) -> str:
        tid = str(res.get("tool_use_id"))
        use = self.tool_uses.get(tid)
        if use is None:
            raise fail(
                self.path,
                no,
                f"tool_result for {tid!r} has no tool_use before it",
                "the transcript is incomplete or out of order; import the full file",
            )
        caller, block, _ = use
        meta: dict[str, Any] = {
            "tool_use_id": tid,
            "is_error": bool(res.get("is_error", False)),
            "claude_code": _line_meta(entry),
        }
        out = tool_result_output(res, meta)
        if "toolUseResult" in entry:
            meta["tool_use_result"] = entry["toolUseResult"]
        nid = self.b.node_id(f"tool:{tid}")
        if nid in self.b.records:
            raise fail(self.path, no, f"a second tool_result for {tid!r}", "remove the duplicate")
        self.add(
            "tool",
            out,
            no,
            entry,
            local=f"tool:{tid}",
            name=str(block.get("name", "")),
            input=block.get("input"),
            caller=caller,
            metadata=meta,
        )
        self.tool_nodes[tid] = nid
        return caller

    def sidechain_root(
        self, no: int, entry: dict[str, Any], content: Any, meta: dict[str, Any]
    ) -> None:
        if isinstance(content, list):
            text = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            output: Any = to_blocks(content, meta)
        else:
            text = output = str(content)
        tasks = [
            (tid, use)
            for tid, use in self.tool_uses.items()
            if use[1].get("name") in TASK_TOOLS and tid not in self.task_of_sidechain
        ]
        match = [t for t in tasks if (t[1][1].get("input") or {}).get("prompt") == text]
        candidates = match or tasks
        pick = candidates[-1] if candidates else None
        caller = None
        if pick is not None:
            tid = pick[0]
            self.task_of_sidechain.add(tid)
            caller = self.b.node_id(f"tool:{tid}")
            meta["task_tool_use_id"] = tid
        else:
            meta["sidechain_unattached"] = True
        self.anchor[entry["uuid"]] = self.add(
            "user", output, no, entry, caller=caller, metadata=meta
        )

    def other(self, no: int, entry: dict[str, Any]) -> None:
        uuid = entry.get("uuid")
        if entry.get("type") == "system" and isinstance(uuid, str):
            meta: dict[str, Any] = {"claude_code": _line_meta(entry)}
            content = entry.get("content", "")
            self.anchor[uuid] = self.add(
                "system",
                "",
                no,
                entry,
                input=content if isinstance(content, str) else json.dumps(content),
                predecessor=self.parent(entry, meta),
                metadata=meta,
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
                caller, block, line = self.tool_uses[tid]
                self.b.add(
                    "tool",
                    "",
                    pos=line + 0.5,
                    local=f"tool:{tid}",
                    name=str(block.get("name", "")),
                    input=block.get("input"),
                    caller=caller,
                    metadata={"tool_use_id": tid, "is_error": False, "result_missing": True},
                    created_at=self.b.get(caller)["created_at"],
                )
        self.b.head = self.last_main
        sessions = sorted(
            {str(e["sessionId"]) for _, e in self._entries if isinstance(e.get("sessionId"), str)}
        )
        meta = self.b.metadata
        meta["claude_code_session"] = sessions[0] if len(sessions) == 1 else sessions
        versions = sorted({str(e["version"]) for _, e in self._entries if "version" in e})
        if versions:
            meta["claude_code_versions"] = versions
        if self.extra:
            meta["extra_lines"] = self.extra
        return self.b.build()

    def run(self) -> ImportedSession:
        self._entries = self.entries()
        for no, entry in self._entries:
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
        except msgspec.DecodeError:
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
        return [_Parser(path, read_bytes(path)).run()]
