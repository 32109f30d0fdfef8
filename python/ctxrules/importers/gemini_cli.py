"""Gemini CLI sessions (``~/.gemini/tmp/<project hash>/chats/``), both forms it writes.

**The JSON file** (``session-*.json``, Gemini CLI before its JSONL recordings): one
object ``{sessionId, projectHash, startTime, lastUpdated, messages, summary?, kind?,
directories?}``.  **The JSONL recording** (``session-*.jsonl``, and a sub-agent's
``<parent session id>/<session id>.jsonl``): a metadata line ``{sessionId,
projectHash, startTime, lastUpdated, kind?, …}``, then one line per message written or
rewritten, ``{"$set": {...}}`` lines that update the metadata (with ``messages``: a
checkpoint that replaces the whole list) and ``{"$rewindTo": id}`` lines that remove
that message and every later one (``/rewind``).

A message is ``{id, timestamp, type, content, …}``:

* ``user``: a user node (``content`` a string or Gemini parts);
* ``gemini``: an assistant node — one model response — with its ``thoughts``
  (``ThinkingBlock``s of vendor ``"gemini"``: ``**subject** description``, shown, never
  sent back), its text, and a ``ToolUseBlock`` per ``toolCalls`` entry, each answered
  by a tool node holding the call's ``result`` (the ``functionResponse`` parts the CLI
  sent back, their ``response`` as JSON text); its ``tokens`` (``input`` = the
  request's ``promptTokenCount``, cached tokens included, ``output``, ``cached``,
  ``thoughts``, ``tool``, ``total``) become the node's ``usage`` in Gemini's
  ``usageMetadata`` shape, and stay as written under ``gemini_cli_tokens``; ``model``
  names the node;
* ``info``, ``error``, ``warning``: the CLI's own notices, never sent to the model:
  kept in the session metadata ``notices``.

A model message right after a model message that asked for no tool (a notice may
stand between them: the CLI then starts a new message for the same answer's tool
calls) continues that answer: one node (its other records under
``gemini_cli_continued``), measured by the first record's tokens that counted a prompt.

Every node keeps its message record (without the parts it became) under
``gemini_cli``.  A message written again with the same id replaces the node of the
current branch (its tool calls gain their results).  A rewind is a branch: the
messages after it continue from the message before the one rewound to, and the
removed ones stay a branch of their own; a checkpoint keeps the messages it repeats
unchanged and branches where it differs.  HEAD is where the recording ends.  The
session metadata records ``gemini_cli_session`` (the metadata lines merged),
``rewinds`` (line and message id of each), ``model`` and ``provider`` (``gemini``).

A session whose messages are only notices is refused: there is no conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from ..model import ContentBlock, TextBlock, ThinkingBlock, ToolUseBlock
from ._common import (
    ImportedSession,
    SessionBuilder,
    empty,
    fail,
    file_key_of,
    parse_time,
    read_bytes,
)
from ._json import load_json, open_jsonl
from ._messages import gemini_part_blocks

__all__ = ["GeminiCliImporter"]

_NOTICES = ("info", "error", "warning")
_MESSAGE_KEYS = ("content", "displayContent", "toolCalls", "thoughts", "tokens")


def _usage(tokens: Any) -> dict[str, int] | None:
    if not isinstance(tokens, Mapping):
        return None
    names = {
        "input": "promptTokenCount",
        "output": "candidatesTokenCount",
        "cached": "cachedContentTokenCount",
        "thoughts": "thoughtsTokenCount",
        "tool": "toolUsePromptTokenCount",
        "total": "totalTokenCount",
    }
    return {
        names[k]: v
        for k, v in tokens.items()
        if k in names and isinstance(v, int) and not isinstance(v, bool)
    }


def _parts(content: Any) -> list[Any]:
    """A ``PartListUnion``: a string, a part, or a list of strings and parts."""
    if content is None:
        return []
    items = content if isinstance(content, list) else [content]
    return [{"text": p} if isinstance(p, str) else p for p in items]


def _result_text(result: Any, meta: dict[str, Any]) -> Any:
    """The output of a tool node: the ``functionResponse`` parts' ``response`` as JSON
    text, other parts as blocks."""
    parts = _parts(result)
    texts: list[str] = []
    blocks: list[ContentBlock] = []
    for part in parts:
        fr = (
            part.get("functionResponse", part.get("function_response"))
            if isinstance(part, Mapping)
            else None
        )
        if isinstance(fr, Mapping):
            texts.append(json.dumps(fr.get("response"), ensure_ascii=False))
        elif isinstance(part, dict):
            blocks.extend(gemini_part_blocks(part, meta, len(blocks), model=False))
    if not blocks:
        return "\n".join(texts)
    return [*(TextBlock(text=t) for t in texts), *blocks]


class _Session:
    def __init__(self, path: str, key: str):
        self.path = path
        self.b = SessionBuilder(key, path, "gemini-cli")
        self.info: dict[str, Any] = {}
        self.branch: list[tuple[str, str, str]] = []  # (message id, node id, record json)
        self.records: dict[str, list[Mapping[str, Any]]] = {}  # node -> its message records
        self.nodes_of: dict[str, int] = {}  # how many nodes a message id has had
        self.notices: list[dict[str, Any]] = []
        self.rewinds: list[dict[str, Any]] = []
        self.found = False

    @property
    def tip(self) -> str | None:
        return self.branch[-1][1] if self.branch else None

    def where(self, line: int | None, at: str | None) -> dict[str, Any]:
        return {"line": line} if line is not None else {"at": at}

    def message(
        self, msg: Mapping[str, Any], *, line: int | None = None, at: str | None = None
    ) -> None:
        mid, kind = msg.get("id"), msg.get("type")
        if not isinstance(mid, str):
            raise fail(self.path, line, "a message without an 'id'", "fix the message", at=at)
        if kind in _NOTICES or kind not in ("user", "gemini"):
            self.notices.append({**({"line": line} if line else {"at": at}), **msg})
            return
        self.found = True
        text = msgspec.json.encode(msg).decode()
        for i, (seen, nid, _) in enumerate(self.branch):
            if seen == mid:  # written again: the node of this branch is updated
                records = self.records[nid]
                records[[r.get("id") for r in records].index(mid)] = msg
                self.fill(nid, line, at)
                self.branch[i] = (mid, nid, text)
                return
        tip = self.tip
        if kind == "gemini" and tip is not None and self._open_answer(tip):
            # The rest of the same answer, written as a message of its own (the CLI
            # starts one when a notice came between): one node, one request.
            self.records[tip].append(msg)
            self.fill(tip, line, at)
            self.branch.append((mid, tip, text))
            return
        n = self.nodes_of.get(mid, 0)
        self.nodes_of[mid] = n + 1
        local = f"msg:{mid}" + (f"#{n}" if n else "")
        when = parse_time(msg.get("timestamp"), path=self.path, line=line, at=at)
        role = "assistant" if kind == "gemini" else "user"
        nid = self.b.add(
            role,
            [],
            pos=len(self.b.records),
            local=local,
            predecessor=tip,
            created_at=when,
            **self.where(line, at),
        )
        self.records[nid] = [msg]
        self.fill(nid, line, at)
        self.branch.append((mid, nid, text))

    def _open_answer(self, nid: str) -> bool:
        """Whether ``nid`` is a model answer that asked for no tool: a model message
        after it, with no input between, continues it."""
        records = self.records.get(nid, [])
        return (
            bool(records)
            and records[0].get("type") == "gemini"
            and not any(r.get("toolCalls") for r in records)
        )

    def fill(self, nid: str, line: int | None, at: str | None) -> None:
        """(Re)build node ``nid`` from its message records."""
        fields = self.b.get(nid)
        records = self.records[nid]
        first = records[0]
        meta: dict[str, Any] = {
            "gemini_cli": {k: v for k, v in first.items() if k not in _MESSAGE_KEYS}
        }
        if records[1:]:
            meta["gemini_cli_continued"] = [
                {k: v for k, v in r.items() if k not in _MESSAGE_KEYS} for r in records[1:]
            ]
        blocks: list[ContentBlock] = []
        if first.get("type") != "gemini":
            for part in _parts(first.get("content")):
                if isinstance(part, dict):
                    blocks.extend(gemini_part_blocks(part, meta, len(blocks), model=False))
            if first.get("displayContent") is not None:
                meta["display_content"] = first["displayContent"]
            fields["output"] = blocks
            fields["metadata"] = meta
            return
        thoughts = [t for r in records for t in r.get("thoughts") or [] if isinstance(t, Mapping)]
        for t in thoughts:
            subject, desc = str(t.get("subject") or ""), str(t.get("description") or "")
            blocks.append(
                ThinkingBlock(
                    thinking=f"**{subject}** {desc}".strip() if subject else desc,
                    vendor="gemini",
                )
            )
        if thoughts:
            meta["thoughts"] = thoughts
        for r in records:
            for part in _parts(r.get("content")):
                if isinstance(part, dict):
                    blocks.extend(gemini_part_blocks(part, meta, len(blocks), model=True))
        # The answer's tokens: the first record's that measured a prompt (a message
        # continuing an answer records zeros).
        measured = [r["tokens"] for r in records if isinstance(r.get("tokens"), Mapping)]
        tokens = next((t for t in measured if t.get("input")), measured[0] if measured else None)
        usage = _usage(tokens)
        if usage is not None:
            meta["usage"] = usage
            meta["gemini_cli_tokens"] = tokens
        fields["name"] = str(next((r["model"] for r in records if r.get("model")), ""))
        calls = [c for r in records for c in r.get("toolCalls") or [] if isinstance(c, Mapping)]
        for j, call in enumerate(calls):
            cid = str(call.get("id") or f"{call.get('name')}_{j}")
            raw_args = call.get("args")
            args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
            blocks.append(ToolUseBlock(id=cid, name=str(call.get("name", "")), input=args))
            self.tool(nid, cid, call, args, fields["created_at"], line, at)
        if calls:
            meta["tool_calls"] = [{k: v for k, v in c.items() if k != "result"} for c in calls]
        fields["output"] = blocks
        fields["metadata"] = meta

    def tool(
        self,
        caller: str,
        cid: str,
        call: Mapping[str, Any],
        args: dict[str, Any],
        when: float,
        line: int | None,
        at: str | None,
    ) -> None:
        if "result" not in call or call.get("result") is None:
            return  # not answered (yet): the call stays open
        meta: dict[str, Any] = {
            "tool_use_id": cid,
            "is_error": call.get("status") not in (None, "success"),
        }
        output = _result_text(call.get("result"), meta)
        local = f"tool:{caller}:{cid}"
        nid = self.b.node_id(local)
        if nid in self.b.records:
            self.b.get(nid).update(output=output, metadata=meta)
            return
        self.b.add(
            "tool",
            output,
            pos=self.b.records[caller].pos + 0.5,
            local=local,
            name=str(call.get("name", "")),
            input=args,
            caller=caller,
            metadata=meta,
            created_at=when,
            **self.where(line, at),
        )

    def rewind(self, to: Any, line: int) -> None:
        self.rewinds.append({"line": line, "to": to})
        ids = [m for m, _, _ in self.branch]
        self.branch = self.branch[: ids.index(to)] if to in ids else []

    def checkpoint(self, messages: list[Any], line: int | None) -> None:
        """A ``$set`` of the whole message list: keep the repeated prefix, branch after."""
        keep = 0
        for msg in messages:
            if keep < len(self.branch) and isinstance(msg, Mapping):
                mid, _, text = self.branch[keep]
                if msg.get("id") == mid and msgspec.json.encode(msg).decode() == text:
                    keep += 1
                    continue
            break
        self.branch = self.branch[:keep]
        for i, msg in enumerate(messages[keep:], keep):
            if isinstance(msg, Mapping):
                self.message(msg, line=line, at=None if line else f"messages[{i}]")

    def finish(self) -> ImportedSession:
        if not self.found:
            kinds = sorted({str(n.get("type")) for n in self.notices})
            raise empty(
                self.path,
                "no conversation: the session holds no user or model message"
                + (
                    f", only {len(self.notices)} notice(s) ({', '.join(kinds)})"
                    if self.notices
                    else ""
                ),
                "Gemini CLI's own notices are not sent to the model; import a session "
                "in which a prompt was answered",
            )
        self.b.head = self.tip
        meta = self.b.metadata
        meta["provider"] = "gemini"
        meta["gemini_cli_session"] = self.info
        if self.notices:
            meta["notices"] = self.notices
        if self.rewinds:
            meta["rewinds"] = self.rewinds
        return self.b.build()


def _is_meta(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("sessionId"), str)
        and isinstance(value.get("projectHash"), str)
    )


class GeminiCliImporter:
    """Gemini CLI session files: the JSON object and the JSONL recording."""

    name = "gemini-cli"
    description = "Gemini CLI session: session-*.json, or its JSONL recording ($set, $rewindTo)"
    auto = True

    def detect(self, path: str, head: bytes) -> bool:
        """The first line is the metadata line of a recording, or the file is the JSON
        object of a session."""
        text = head.lstrip()
        if not text.startswith(b"{"):
            return False
        first = text.split(b"\n", 1)[0]
        try:
            value = msgspec.json.decode(first)
        except (msgspec.DecodeError, RecursionError):
            value = None
        if _is_meta(value):
            return True
        if path.endswith(".jsonl") or b'"projectHash"' not in head:
            return False
        doc = load_json(path)
        return _is_meta(doc) and isinstance(doc.get("messages"), list)

    def parse(self, path: str) -> list[ImportedSession]:
        """The session, its rewinds as branches."""
        s = _Session(path, f"gemini-cli:{file_key_of(path)}")
        if self._one_document(path):
            doc = load_json(path)
            s.info = {k: v for k, v in doc.items() if k != "messages"}
            for i, msg in enumerate(doc["messages"]):
                if not isinstance(msg, Mapping):
                    raise fail(
                        path, None, "a message that is not an object", "fix it", at=f"messages[{i}]"
                    )
                s.message(msg, at=f"messages[{i}]")
            return [s.finish()]
        with open_jsonl(path) as lines:
            for no, rec in lines.values():
                self._record(s, no, rec)
        return [s.finish()]

    @staticmethod
    def _one_document(path: str) -> bool:
        head = read_bytes(path, 4096).lstrip()
        first = head.split(b"\n", 1)[0]
        try:
            msgspec.json.decode(first)
        except (msgspec.DecodeError, RecursionError):
            return True  # a pretty-printed object: one document
        return False

    @staticmethod
    def _record(s: _Session, no: int, rec: Any) -> None:
        if not isinstance(rec, dict):
            raise fail(
                s.path, no, f"expected a JSON object, got {type(rec).__name__}", "fix the line"
            )
        if isinstance(rec.get("$rewindTo"), str):
            s.rewind(rec["$rewindTo"], no)
        elif isinstance(rec.get("id"), str):
            s.message(rec, line=no)
        elif isinstance(rec.get("$set"), dict):
            update = rec["$set"]
            if isinstance(update.get("messages"), list):
                s.checkpoint(update["messages"], no)
            s.info.update({k: v for k, v in update.items() if k != "messages"})
        elif _is_meta(rec):
            s.info.update({k: v for k, v in rec.items() if k != "messages"})
            if isinstance(rec.get("messages"), list):
                s.checkpoint(rec["messages"], no)
        else:
            raise fail(
                s.path,
                no,
                "not a Gemini CLI record (a message with an id, $set, $rewindTo or metadata)",
                "pass a Gemini CLI session file",
            )
