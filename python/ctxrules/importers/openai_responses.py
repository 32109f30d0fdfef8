"""OpenAI Responses request bodies: ``{"model": ..., "instructions": ..., "input": [...]}``.

The ``input`` items become the session as ``_messages.ResponsesReader`` reads them
(messages, reasoning kept opaque, function calls and their outputs, images,
compaction items); ``instructions`` is the first node, a system node.  The body's
other keys are kept in the session metadata under ``request``, and its defaults
(``system`` from ``instructions``, ``tools``, ``model``, ``params``) under the keys
every importer uses (``_defaults``); ``provider`` is ``openai-responses``.  A body
naming a ``previous_response_id`` continues a conversation the file does not hold:
outputs of calls it does not show are kept as user content (metadata
``orphan_call_id``) and the session metadata says ``previous_response_missing``.
"""

from __future__ import annotations

from typing import Any

from ._common import ImportedSession, SessionBuilder
from ._defaults import request_defaults
from ._json import JsonImporter
from ._messages import responses_items

__all__ = ["OpenAIResponsesImporter"]


class OpenAIResponsesImporter(JsonImporter):
    """OpenAI Responses request bodies (``input`` items)."""

    name = "openai-responses"
    description = "OpenAI Responses request body: {model, instructions, input: [items]}"

    def claims(self, data: Any) -> bool:
        """An object with ``input`` (items or a string) and no ``messages``."""
        return (
            isinstance(data, dict)
            and isinstance(data.get("input"), (list, str))
            and "messages" not in data
            and "contents" not in data
        )

    def sessions(self, path: str, data: Any, key: str) -> list[ImportedSession]:
        """One session."""
        b = SessionBuilder(key, path, self.name)
        model = str(data.get("model") or "")
        prev = data.get("previous_response_id")
        responses_items(
            b,
            data.get("instructions"),
            data["input"],
            path=path,
            at="input",
            model=model,
            orphan_ok=isinstance(prev, str),
        )
        b.metadata = {
            **request_defaults(data, "openai-responses"),
            "request": {k: v for k, v in data.items() if k != "input"},
        }
        if isinstance(prev, str):
            b.metadata["previous_response_missing"] = True
        return [b.build()]
