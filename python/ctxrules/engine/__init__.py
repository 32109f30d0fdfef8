"""The turn engine: what an agent calls on every turn (see ``ctxrules.engine.turn``;
its result types are in ``results``, its usage fusion in ``fusion``).

``Engine(store, EngineConfig(...))`` prepares each request of a session
(``prepare`` → ``TurnPrep``: the provider body, the budget and level, the usage
fusion), records each response (``record``), and reports the window's occupancy
(``stats`` → the usage record of one number and its breakdown by category).
``shape(messages, provider=…, rules=…)`` is the stateless convenience for callers who
keep their own history (``ctxrules.engine.shaping``).  ``StreamAccumulator`` collects a
stream's events for callers who stream themselves.
``attach`` stages another branch's context for the next request; ``merge`` runs one
turn over several peers' context and makes the merge commit (``attach_merge``).
"""

from __future__ import annotations

from ..providers import StreamAccumulator
from .attach_merge import (
    MERGED_KEY,
    MergeResult,
    Peer,
    PeerSpec,
    attach,
    check_answer,
    merge,
    merged_into,
    record_merge,
)
from .budget import LEVELS, Budget, Level, budget, output_reserve
from .config import DEFAULT_OUTPUT_RESERVE, NOT_RUN_RESULT, EngineConfig, Skill
from .references import Reference, find_references
from .results import Recorded, SessionStats, SystemPrompt, TokenFigures, ToolResult, TurnPrep
from .shaping import ShapedItem, shape, shape_commit, shape_items
from .turn import Engine
from .usage import Breakdown, Category, UsageRecord, breakdown

__all__ = [
    "DEFAULT_OUTPUT_RESERVE",
    "LEVELS",
    "MERGED_KEY",
    "NOT_RUN_RESULT",
    "Breakdown",
    "Budget",
    "Category",
    "Engine",
    "EngineConfig",
    "Level",
    "MergeResult",
    "Peer",
    "PeerSpec",
    "Recorded",
    "Reference",
    "SessionStats",
    "ShapedItem",
    "Skill",
    "StreamAccumulator",
    "SystemPrompt",
    "TokenFigures",
    "ToolResult",
    "TurnPrep",
    "UsageRecord",
    "attach",
    "breakdown",
    "budget",
    "check_answer",
    "find_references",
    "merge",
    "merged_into",
    "output_reserve",
    "record_merge",
    "shape",
    "shape_commit",
    "shape_items",
]
