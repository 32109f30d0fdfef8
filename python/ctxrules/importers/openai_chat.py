"""OpenAI Chat Completions message lists: a bare list, ``{"messages": [...]}``, or
tau-bench's list of ``{"traj": [...]}`` runs (one session per run).

Assistant ``tool_calls`` become ``tool_use`` blocks of the assistant node; each role
``tool`` message becomes a tool node under the assistant that made the call
(``tool_call_id``).  ``{"messages": [...], ...}`` is taken as a request body: its other
keys are kept in the session metadata under ``request``, and its defaults (``tools``,
``model``, ``params``: ``tool_choice``, ``temperature``, …) under the keys every
importer uses (``_defaults``).  tau-bench's ``task_id`` / ``reward`` / ``info`` are
kept in the session metadata.  ``provider`` is ``openai-chat``.
"""

from __future__ import annotations

from typing import Any

from ._common import ImportedSession, SessionBuilder, fail
from ._defaults import request_defaults
from ._json import JsonImporter
from ._messages import openai_messages

__all__ = ["OpenAIChatImporter", "anthropic_features", "messages_of", "openai_features"]

_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking"}


def messages_of(data: Any) -> list[Any] | None:
    """The message list of ``{"messages": [...]}`` or of a bare list of role messages."""
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return data["messages"]
    if isinstance(data, list) and data and all(isinstance(m, dict) and "role" in m for m in data):
        return data
    return None


def anthropic_features(messages: list[Any]) -> bool:
    """Whether messages use blocks only Anthropic's format has."""
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            for blk in content:
                if isinstance(blk, dict) and (
                    blk.get("type") in _ANTHROPIC_BLOCKS
                    or (blk.get("type") == "image" and "source" in blk)
                ):
                    return True
    return False


def openai_features(messages: list[Any]) -> bool:
    """Whether messages use roles or fields only Chat Completions has."""
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") in ("system", "developer", "tool") or "tool_calls" in m:
            return True
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") == "image_url" for p in content
        ):
            return True
    return False


def _is_taubench(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(e, dict) and "traj" in e for e in data)
    )


class OpenAIChatImporter(JsonImporter):
    """Chat Completions message lists (incl. tau-bench trajectories)."""

    name = "openai-chat"
    description = "OpenAI Chat Completions messages: list, {messages}, tau-bench [{traj}]"

    def claims(self, data: Any) -> bool:
        """Role messages (without Anthropic-only blocks) or tau-bench runs."""
        if _is_taubench(data):
            return True
        msgs = messages_of(data)
        if msgs is None or (isinstance(data, dict) and "system" in data):
            return False
        if not all(isinstance(m, dict) and "role" in m for m in msgs):
            return False  # another format's "messages" (a Gemini CLI session, say)
        return openai_features(msgs) or not anthropic_features(msgs)

    def sessions(self, path: str, data: Any, key: str) -> list[ImportedSession]:
        """One session per message list (per ``traj`` entry for tau-bench files)."""
        if _is_taubench(data):
            out = []
            for i, entry in enumerate(data):
                b = SessionBuilder(f"{key}#{i}", path, self.name)
                openai_messages(b, entry["traj"], path=path, at=f"[{i}].traj")
                b.metadata = {k: v for k, v in entry.items() if k != "traj"}
                b.metadata.update(index=i, provider="openai-chat")
                out.append(b.build())
            return out
        msgs = messages_of(data)
        if msgs is None:
            raise fail(
                path,
                None,
                "no Chat Completions messages found",
                'expected a list of {role, content} messages, {"messages": [...]} '
                'or a list of {"traj": [...]}',
            )
        b = SessionBuilder(key, path, self.name)
        model = str(data.get("model", "")) if isinstance(data, dict) else ""
        openai_messages(
            b, msgs, path=path, at="messages" if isinstance(data, dict) else "", model=model
        )
        b.metadata = {"provider": "openai-chat"}
        if isinstance(data, dict):
            b.metadata = {
                **request_defaults(data, "openai-chat"),
                "request": {k: v for k, v in data.items() if k != "messages"},
            }
        return [b.build()]
