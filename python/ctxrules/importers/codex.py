"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``), 0.4x and later.

Each line is a record ``{timestamp, type, payload}``:

* ``session_meta`` (first): the session's ``id``, ``cwd``, ``originator``,
  ``cli_version``, ``model_provider`` and the instructions Codex sends as the Responses
  ``instructions`` (``base_instructions.text``; ``instructions`` in older versions).
  The instructions become the first node, a system node, and the metadata ``system``;
  the rest is kept under ``codex_session``.
* ``turn_context``: the settings of the turn that follows (``model``, ``effort``,
  ``cwd``, approval and sandbox policies, …); its ``model`` names the assistant nodes
  after it (a model switch shows on them) and every one is kept, with its line, in
  ``turn_contexts``.
* ``response_item``: the OpenAI Responses items Codex sent and received, in order,
  read by ``_responses.ResponsesReader``: messages (developer and user ones too: Codex
  sends its permissions, environment and AGENTS.md as such), ``reasoning`` (opaque
  ``encrypted_content``), ``function_call`` / ``custom_tool_call`` with their outputs,
  ``web_search_call``, ``compaction``.
* ``event_msg``: what Codex showed and measured.  ``token_count`` events with ``info``
  close a model response: ``info.last_token_usage`` is that request's usage
  (``input_tokens`` includes ``cached_input_tokens``, as OpenAI's ``input_tokens``
  does) and becomes the ``usage`` of the latest assistant node, in the Responses shape
  (``input_tokens``, ``input_tokens_details.cached_tokens``, ``output_tokens``,
  ``output_tokens_details.reasoning_tokens``, ``total_tokens``; as written under
  ``codex_usage``).  Codex writes some snapshots twice: an event whose
  ``total_token_usage`` equals the previous one measured nothing new and is dropped
  (counted in ``duplicate_token_counts``).  The other events (user and agent messages
  as shown, task start and end, patches, …) are kept, with their lines, in ``events``.
* ``compacted``: Codex replaced its history by ``replacement_history`` (the user
  messages it keeps and an OpenAI ``compaction`` item, or a summary ``message``): the
  requests after it send that history, not the earlier one.  The replacement history
  becomes a new chain of nodes after the instructions' node, a branch of its own
  beside the history it replaced;
  its first node's metadata ``codex_compacted`` keeps the record's other fields and
  names the node it replaced from (``replaces``).

A record of a kind not listed here is kept in ``extra_lines``.  A line that is not
such a record is refused with its line number.  ``provider`` is ``openai-responses``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._common import ImportedSession, SessionBuilder, fail, file_key_of, parse_time
from ._json import open_jsonl
from ._messages import ResponsesReader

__all__ = ["CodexRolloutImporter"]

_RECORDS = ("session_meta", "turn_context", "response_item", "event_msg", "compacted")


def _responses_usage(raw: Any) -> dict[str, Any] | None:
    """Codex's ``last_token_usage`` in the shape of a Responses ``usage``."""
    if not isinstance(raw, dict):
        return None

    def num(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return {
        "input_tokens": num("input_tokens"),
        "input_tokens_details": {"cached_tokens": num("cached_input_tokens")},
        "output_tokens": num("output_tokens"),
        "output_tokens_details": {"reasoning_tokens": num("reasoning_output_tokens")},
        "total_tokens": num("total_tokens"),
    }


class _Rollout:
    def __init__(self, path: str, key: str):
        self.path = path
        self.b = SessionBuilder(key, path, "codex")
        self.reader = ResponsesReader(self.b, path)
        self.meta: dict[str, Any] = {}
        self.turns: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.extra: list[dict[str, Any]] = []
        self.last_total: Any = None
        self.duplicates = 0
        self.unassigned: list[dict[str, Any]] = []
        self.measured: set[str] = set()  # assistant nodes that have their usage
        self.assistants: list[str] = []  # in order
        self.system: str | None = None  # the instructions' node, sent with every request

    def record(self, no: int, rec: Any) -> None:
        if not isinstance(rec, dict) or rec.get("type") not in _RECORDS:
            kind = rec.get("type") if isinstance(rec, dict) else type(rec).__name__
            if isinstance(rec, dict) and "payload" in rec:
                self.extra.append({"line": no, **rec})  # a record kind of a newer Codex
                return
            raise fail(
                self.path,
                no,
                f"not a Codex rollout record (type {kind!r})",
                "a rollout line is {timestamp, type, payload}; pass a Codex rollout-*.jsonl",
            )
        kind, payload = rec["type"], rec.get("payload")
        when = parse_time(rec.get("timestamp"), path=self.path, line=no)
        if not isinstance(payload, dict):
            raise fail(self.path, no, f"a {kind} record without a payload object", "fix the line")
        if kind == "session_meta":
            self.session_meta(no, payload, when)
        elif kind == "turn_context":
            self.turns.append({"line": no, **payload})
            if isinstance(payload.get("model"), str):
                self.reader.model = payload["model"]
        elif kind == "response_item":
            node = self.reader.item(payload, pos=no, line=no, created_at=when)
            if self.b.get(node)["role"] == "assistant" and node not in self.assistants[-1:]:
                self.assistants.append(node)
        elif kind == "event_msg":
            self.event(no, payload, rec)
        else:
            self.compacted(no, payload, when)

    def session_meta(self, no: int, payload: dict[str, Any], when: float) -> None:
        if self.meta:  # a resumed rollout starts again: keep it, read on
            self.extra.append({"line": no, "type": "session_meta", "payload": payload})
            return
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else payload.get("instructions")
        self.meta = {k: v for k, v in payload.items() if k not in ("base_instructions",)}
        if isinstance(text, str) and text:
            self.b.metadata["system"] = text
            self.system = self.b.add("system", "", pos=no, input=text, line=no, created_at=when)
            self.reader.last = self.system

    def event(self, no: int, payload: dict[str, Any], rec: dict[str, Any]) -> None:
        if payload.get("type") != "token_count" or not isinstance(payload.get("info"), dict):
            self.events.append({"line": no, "timestamp": rec.get("timestamp"), **payload})
            return
        info = payload["info"]
        total = info.get("total_token_usage")
        if total is not None and total == self.last_total:
            self.duplicates += 1  # the same snapshot written again
            return
        self.last_total = total
        self.reader.close()
        usage = _responses_usage(info.get("last_token_usage"))
        # The response this snapshot closes: the latest assistant node, unless an
        # earlier snapshot measured it already.
        target = self.assistants[-1] if self.assistants else None
        if target is None or target in self.measured or usage is None:
            self.unassigned.append({"line": no, **info})
            return
        self.measured.add(target)
        meta = self.b.get(target)["metadata"]
        meta["usage"] = usage
        meta["codex_usage"] = info.get("last_token_usage")
        meta["token_count_line"] = no

    def compacted(self, no: int, payload: dict[str, Any], when: float) -> None:
        replaced = self.reader.close() or self.reader.last
        history = payload.get("replacement_history")
        record = {k: v for k, v in payload.items() if k != "replacement_history"}
        record.update(line=no, replaces=replaced)
        # The replacement history is a chain of its own after the instructions, which
        # Codex sends with every request.
        self.reader.last = self.system
        self.reader.calls = {}
        first: str | None = None
        if isinstance(history, list):
            for i, item in enumerate(history):
                node = self.reader.item(
                    item,
                    pos=no + i / (len(history) + 1),
                    at=f"line {no}: replacement_history[{i}]",
                    created_at=when,
                )
                first = first or node
            self.reader.close()
        message = payload.get("message")
        if isinstance(message, str) and message and not history:
            first = self.reader.item(
                {"type": "message", "role": "user", "content": message},
                pos=no,
                line=no,
                created_at=when,
            )
        if first is None:  # nothing to continue from: keep the record
            self.extra.append({"line": no, "type": "compacted", "payload": payload})
            self.reader.last = replaced
            return
        self.b.get(first)["metadata"]["codex_compacted"] = record

    def finish(self) -> ImportedSession:
        self.reader.close()
        meta = self.b.metadata
        meta["provider"] = "openai-responses"
        if self.meta:
            meta["codex_session"] = self.meta
            if isinstance(self.meta.get("cli_version"), str):
                meta["codex_versions"] = [self.meta["cli_version"]]
        models = [t["model"] for t in self.turns if isinstance(t.get("model"), str)]
        if models:
            meta["model"] = models[0]
        for key, value in (
            ("turn_contexts", self.turns),
            ("events", self.events),
            ("extra_lines", self.extra),
            ("unassigned_token_counts", self.unassigned),
        ):
            if value:
                meta[key] = value
        if self.duplicates:
            meta["duplicate_token_counts"] = self.duplicates
        self.b.head = self.reader.last
        return self.b.build()


class CodexRolloutImporter:
    """Codex CLI ``rollout-*.jsonl`` session files; one session per file."""

    name = "codex"
    description = "Codex CLI rollout JSONL (session_meta, turn_context, response_item, event_msg)"
    auto = True

    def detect(self, path: str, head: bytes) -> bool:
        """The first line is a ``session_meta`` record (``{timestamp, type, payload}``)."""
        first = head.lstrip().split(b"\n", 1)[0]
        try:
            rec = msgspec.json.decode(first)
        except (msgspec.DecodeError, RecursionError):
            return False
        return (
            isinstance(rec, dict)
            and rec.get("type") == "session_meta"
            and isinstance(rec.get("payload"), dict)
        )

    def parse(self, path: str) -> list[ImportedSession]:
        """The rollout as one session."""
        r = _Rollout(path, f"codex:{file_key_of(path)}")
        with open_jsonl(path) as lines:
            for no, rec in lines.values():
                r.record(no, rec)
        if not r.meta and not r.b.records:
            raise fail(path, None, "the file holds no rollout records", "pass a Codex rollout")
        return [r.finish()]
