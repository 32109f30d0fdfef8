"""Batch work over many sessions: ``rerender`` replays recorded sessions under a rule set."""

from __future__ import annotations

from .session import ReplayOptions, SessionData, replay_session, session_data

__all__ = ["ReplayOptions", "SessionData", "replay_session", "session_data"]
