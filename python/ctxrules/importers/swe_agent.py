"""SWE-agent trajectories (``.traj``): the ``history`` message list becomes the session.

``history`` is Chat Completions-shaped; tool messages name their calls in a
``tool_call_ids`` list.  Runs without native tool calls keep their plain-text actions
as assistant text and observations as user messages, exactly as the model saw them.
SWE-agent's own fields per message (``thought``, ``action``, ``agent``,
``message_type``, …) are kept in node metadata under ``extra``; ``info``,
``environment`` and ``replay_config`` in the session metadata.  The session's
``model`` is the one ``replay_config`` names; the system prompt is the history's first
message (a system node), and SWE-agent records its tools as its own configuration,
not as declarations a provider takes, so there is no ``tools``.  It calls providers
through LiteLLM, so no ``provider`` is recorded either.
"""

from __future__ import annotations

from typing import Any

from ._common import ImportedSession, SessionBuilder, fail
from ._json import JsonImporter
from ._messages import openai_messages

__all__ = ["SweAgentImporter"]


def _model_name(data: dict[str, Any]) -> str:
    cfg = data.get("replay_config")
    agent = cfg.get("agent") if isinstance(cfg, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    return str(model.get("name", "")) if isinstance(model, dict) else ""


class SweAgentImporter(JsonImporter):
    """SWE-agent ``.traj`` files."""

    name = "swe-agent"
    description = "SWE-agent .traj trajectory (history messages, tool_call_ids)"

    def claims(self, data: Any) -> bool:
        """A JSON object with a ``history`` list and a ``trajectory`` or ``info``."""
        return (
            isinstance(data, dict)
            and isinstance(data.get("history"), list)
            and ("trajectory" in data or "info" in data)
        )

    def sessions(self, path: str, data: Any, key: str) -> list[ImportedSession]:
        """One session from ``history``."""
        if not isinstance(data, dict) or not isinstance(data.get("history"), list):
            raise fail(path, None, "no 'history' list", "pass a SWE-agent .traj file")
        b = SessionBuilder(key, path, self.name)
        openai_messages(b, data["history"], path=path, at="history", model=_model_name(data))
        b.metadata = {k: data[k] for k in ("info", "environment", "replay_config") if k in data}
        if isinstance(data.get("trajectory"), list):
            b.metadata["trajectory_steps"] = len(data["trajectory"])
        return [b.build()]
