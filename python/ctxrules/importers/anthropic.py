"""Anthropic Messages conversations: ``{"system": ..., "messages": [...]}`` or a bare list.

Content blocks are kept as they are (text, images, thinking with its signature,
redacted thinking, tool_use); each ``tool_result`` becomes a tool node under the
assistant node that holds its ``tool_use``.  Other request keys (``model``, ``tools``,
``max_tokens`` …) are kept in the session metadata.
"""

from __future__ import annotations

from ._common import ImportedSession, SessionBuilder, fail, file_key, load_json, read_bytes
from ._messages import anthropic_messages
from .openai_chat import _looks_json, _messages_of, anthropic_features, openai_features

__all__ = ["AnthropicMessagesImporter"]


class AnthropicMessagesImporter:
    """Anthropic Messages API conversations (a request body or a message list)."""

    name = "anthropic-messages"
    description = "Anthropic Messages: {system, messages} or a list of block messages"
    auto = True

    def detect(self, path: str, head: bytes) -> bool:
        """A top-level ``system`` beside ``messages``, or Anthropic-only blocks."""
        if not _looks_json(head):
            return False
        data = load_json(path)
        msgs = _messages_of(data)
        if msgs is None:
            return False
        if isinstance(data, dict) and "system" in data:
            return True
        return anthropic_features(msgs) and not openai_features(msgs)

    def parse(self, path: str) -> list[ImportedSession]:
        """One session."""
        data = load_json(path)
        msgs = _messages_of(data)
        if msgs is None:
            raise fail(
                path,
                None,
                "no Anthropic messages found",
                'expected {"system": ..., "messages": [...]} or a list of messages',
            )
        b = SessionBuilder(f"anthropic-messages:{file_key(read_bytes(path))}", path, self.name)
        system = data.get("system") if isinstance(data, dict) else None
        model = str(data.get("model", "")) if isinstance(data, dict) else ""
        anthropic_messages(
            b, system, msgs, path=path, at="messages" if isinstance(data, dict) else "", model=model
        )
        if isinstance(data, dict):
            b.metadata = {k: v for k, v in data.items() if k not in ("messages",)}
        return [b.build()]
