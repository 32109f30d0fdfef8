"""What the turn engine hands back: the tool results a caller returns (``ToolResult``),
the prepared request (``TurnPrep`` with its ``SystemPrompt`` and ``TokenFigures``), the
recorded answer (``Recorded``) and a session's occupancy (``SessionStats``)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from ..compaction import CompactResult
from ..context_sources import SourceText
from ..model import Content, ContextCommit, Node, ToolSpec, ToolUseBlock
from ..providers import RenderedRequest
from .budget import Budget
from .references import Reference
from .usage import Breakdown, UsageRecord

__all__ = [
    "Recorded",
    "SessionStats",
    "SystemPrompt",
    "TokenFigures",
    "ToolResult",
    "TurnPrep",
]


class ToolResult(msgspec.Struct, frozen=True):
    """The result of a tool call the model asked for, handed back to ``prepare``."""

    tool_use_id: str
    output: Content = ""
    is_error: bool = False


class SystemPrompt(msgspec.Struct, frozen=True, kw_only=True):
    """The system prompt of a request, by part (step 3).

    ``identity``, ``skills`` and ``memory`` come from the engine's configuration (or, for
    ``identity``, the session's recorded system prompt); ``sources`` are the context
    sources' texts (memoised per session); ``situation`` is the L1 text (empty unless the
    configuration asks for it).  ``texts`` is the session-constant layer in order.
    """

    identity: str = ""
    skills: str = ""
    memory: str = ""
    sources: tuple[SourceText, ...] = ()
    situation: str = ""

    def texts(self) -> list[str]:
        """The L0 texts, in the order they are sent (empty parts left out)."""
        return [t for t in (self.identity, self.skills, self.memory) if t] + [
            s.text for s in self.sources if s.text
        ]


class TokenFigures(msgspec.Struct, frozen=True, kw_only=True):
    """Step 5: the local estimate of this request, the last measurement it is fused with.

    ``estimate`` is our billed-prompt estimate of the body (``explain.input_tokens``);
    ``measured`` the provider's count of the last measured request of this branch as
    it was sent (``None``: none within reach; the billed prompt, or the vendor's
    compaction step's when it compacted that request on its side) and
    ``measured_estimate`` our estimate of that same request; ``fused`` =
    ``measured + (estimate - measured_estimate)``, or ``estimate`` without a
    measurement — the figure the budget uses.
    """

    estimate: int
    fused: int
    measured: int | None = None
    measured_estimate: int | None = None
    measured_node: str | None = None

    @property
    def calibration(self) -> float | None:
        """``measured / measured_estimate`` of the last measured request, if any."""
        if self.measured is None or not self.measured_estimate:
            return None
        return self.measured / self.measured_estimate


class TurnPrep(msgspec.Struct, frozen=True, kw_only=True):
    """Everything ``prepare`` made for one request; send ``body`` and ``record`` the answer.

    ``head`` is the node the request is made at (the new user message, or the assistant
    turn whose tool results it carries); ``appended`` the nodes this ``prepare`` added.
    ``request`` is the rendered body (bytes as sent), ``commit`` what it carries,
    ``system`` / ``tools`` its session-constant parts, ``budget`` the window split and
    level, ``tokens`` the estimate and usage fusion, ``usage`` the usage record of the
    session as this request leaves (``basis`` ``"estimated"``).  ``compaction`` is the
    ``CompactResult`` of a compaction made before it (``None``: none);
    ``compaction_error`` why an automatic compaction that was due did not happen (it
    failed, or the circuit breaker is open: the request goes as it is); ``attempt``
    counts the retries after prompt-too-long refusals (``retry_after_error``).
    ``not_run`` lists the tool calls this ``prepare`` answered with the configured "not
    run" result (``EngineConfig.unanswered_calls = "not_run"``), in HEAD's order.
    """

    session_id: str
    head: str
    appended: tuple[str, ...]
    provider: str
    model: str
    commit: ContextCommit
    request: RenderedRequest
    system: SystemPrompt
    tools: tuple[ToolSpec, ...]
    references: tuple[Reference, ...]
    budget: Budget
    tokens: TokenFigures
    usage: UsageRecord
    created_at: float
    compaction: CompactResult | None = None
    compaction_error: str = ""
    attempt: int = 0
    not_run: tuple[str, ...] = ()

    @property
    def body(self) -> dict[str, Any]:
        """The request body as a dict, for an SDK call (``client.messages.create(**body)``)."""
        decoded: dict[str, Any] = json.loads(self.request.body)
        return decoded

    @property
    def level(self) -> str:
        """The budget level: ``ok``, ``warn``, ``compact`` or ``critical``."""
        return self.budget.level


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """What ``record`` stored: the answer node, the usage record it measured, and the tool
    calls that now wait for results (hand them back with ``prepare(tool_results=…)``)."""

    node: Node
    usage: UsageRecord
    tool_calls: tuple[ToolUseBlock, ...]
    stop_reason: str = ""


class SessionStats(msgspec.Struct, frozen=True, kw_only=True):
    """A session's window occupancy now: the usage record, its breakdown, the budget and
    level of the next request, and the compaction boundaries on the branch."""

    session_id: str
    head: str | None
    provider: str
    model: str
    usage: UsageRecord
    breakdown: Breakdown
    budget: Budget
    boundaries: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (what ``ctxrules stats --json`` prints)."""
        return {
            "session": self.session_id,
            "head": self.head,
            "provider": self.provider,
            "model": self.model,
            "usage": self.usage.as_dict(),
            "level": self.budget.level,
            "budget": msgspec.to_builtins(self.budget),
            "breakdown": self.breakdown.as_dict(),
            "compactions": list(self.boundaries),
        }
