"""Anthropic Messages conversations: ``{"system": ..., "messages": [...]}`` or a bare list.

Content blocks are kept as they are (text, images, thinking with its signature,
redacted thinking, tool_use); each ``tool_result`` becomes a tool node under the
assistant node that holds its ``tool_use``.  A request body's other keys are kept in
the session metadata under ``request``, and its defaults (``system``, ``tools``,
``model``, ``params``: ``max_tokens``, ``tool_choice``, …) under the keys every
importer uses (``_defaults``); ``provider`` is ``anthropic``.
"""

from __future__ import annotations

from typing import Any

from ._common import ImportedSession, SessionBuilder, fail
from ._defaults import request_defaults
from ._json import JsonImporter
from ._messages import anthropic_messages
from .openai_chat import anthropic_features, messages_of, openai_features

__all__ = ["AnthropicMessagesImporter"]


class AnthropicMessagesImporter(JsonImporter):
    """Anthropic Messages API conversations (a request body or a message list)."""

    name = "anthropic-messages"
    description = "Anthropic Messages: {system, messages} or a list of block messages"

    def claims(self, data: Any) -> bool:
        """A top-level ``system`` beside ``messages``, or Anthropic-only blocks."""
        msgs = messages_of(data)
        if msgs is None:
            return False
        if isinstance(data, dict) and "system" in data:
            return True
        return anthropic_features(msgs) and not openai_features(msgs)

    def sessions(self, path: str, data: Any, key: str) -> list[ImportedSession]:
        """One session."""
        msgs = messages_of(data)
        if msgs is None:
            raise fail(
                path,
                None,
                "no Anthropic messages found",
                'expected {"system": ..., "messages": [...]} or a list of messages',
            )
        b = SessionBuilder(key, path, self.name)
        system = data.get("system") if isinstance(data, dict) else None
        model = str(data.get("model", "")) if isinstance(data, dict) else ""
        anthropic_messages(
            b, system, msgs, path=path, at="messages" if isinstance(data, dict) else "", model=model
        )
        b.metadata = {"provider": "anthropic"}
        if isinstance(data, dict):
            b.metadata = {
                **request_defaults(data, "anthropic"),
                "request": {k: v for k, v in data.items() if k != "messages"},
            }
        return [b.build()]
