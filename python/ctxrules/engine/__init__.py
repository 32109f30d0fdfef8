"""The turn engine: what an agent calls on every turn (see ``ctxrules.engine.turn``).

``Engine(store, EngineConfig(...))`` prepares each request of a session
(``prepare`` → ``TurnPrep``: the provider body, the budget and level, the usage
fusion), records each response (``record``), and reports the window's occupancy
(``stats`` → the usage record of one number and its breakdown by category).
"""

from __future__ import annotations

from .budget import LEVELS, Budget, Level, budget, output_reserve
from .config import DEFAULT_OUTPUT_RESERVE, EngineConfig, Skill
from .references import Reference, find_references
from .turn import (
    Engine,
    Recorded,
    SessionStats,
    SystemPrompt,
    TokenFigures,
    ToolResult,
    TurnPrep,
)
from .usage import Breakdown, Category, UsageRecord, breakdown

__all__ = [
    "DEFAULT_OUTPUT_RESERVE",
    "LEVELS",
    "Breakdown",
    "Budget",
    "Category",
    "Engine",
    "EngineConfig",
    "Level",
    "Recorded",
    "Reference",
    "SessionStats",
    "Skill",
    "SystemPrompt",
    "TokenFigures",
    "ToolResult",
    "TurnPrep",
    "UsageRecord",
    "breakdown",
    "budget",
    "find_references",
    "output_reserve",
]
