"""SWE-agent trajectories (``.traj``): the ``history`` message list becomes the session.

``history`` is Chat Completions-shaped; tool messages name their calls in a
``tool_call_ids`` list.  Runs without native tool calls keep their plain-text actions
as assistant text and observations as user messages, exactly as the model saw them.
SWE-agent's own fields per message (``thought``, ``action``, ``agent``,
``message_type``, …) are kept in node metadata under ``extra``; ``info``,
``environment`` and ``replay_config`` in the session metadata.
"""

from __future__ import annotations

from ._common import ImportedSession, SessionBuilder, fail, file_key, load_json, read_bytes
from ._messages import openai_messages
from .openai_chat import _looks_json

__all__ = ["SweAgentImporter"]


class SweAgentImporter:
    """SWE-agent ``.traj`` files."""

    name = "swe-agent"
    description = "SWE-agent .traj trajectory (history messages, tool_call_ids)"
    auto = True

    def detect(self, path: str, head: bytes) -> bool:
        """A JSON object with a ``history`` list and a ``trajectory`` or ``info``."""
        if not _looks_json(head):
            return False
        data = load_json(path)
        return (
            isinstance(data, dict)
            and isinstance(data.get("history"), list)
            and ("trajectory" in data or "info" in data)
        )

    def parse(self, path: str) -> list[ImportedSession]:
        """One session from ``history``."""
        data = load_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("history"), list):
            raise fail(path, None, "no 'history' list", "pass a SWE-agent .traj file")
        b = SessionBuilder(f"swe-agent:{file_key(read_bytes(path))}", path, self.name)
        model = ""
        cfg = data.get("replay_config")
        if isinstance(cfg, dict):
            agent = cfg.get("agent") if isinstance(cfg.get("agent"), dict) else {}
            m = agent.get("model") if isinstance(agent, dict) else None
            model = str(m.get("name", "")) if isinstance(m, dict) else ""
        openai_messages(b, data["history"], path=path, at="history", model=model)
        b.metadata = {k: data[k] for k in ("info", "environment", "replay_config") if k in data}
        if isinstance(data.get("trajectory"), list):
            b.metadata["trajectory_steps"] = len(data["trajectory"])
        return [b.build()]
