"""Compaction: fold a session's history into a summary at a boundary node, in all forms.

``compact(store, session_id, now=..., ...)`` is the one flow (``flow``): manual,
partial (``from`` / ``up_to`` a pivot), automatic (the engine's threshold) and reactive
(the provider's prompt-too-long refusal) are its triggers.  It appends a boundary node
(the record: ``ctxrules.commit.Compaction``) and a restore message, and the commit at
the new HEAD folds the history as the boundary says (``ctxrules.commit.boundary``).
The hooks ``pre_compact``, ``session_start`` and ``post_compact`` run around it.

``CircuitBreaker`` and ``retry_after_compaction`` (``breaker``) are what an agent loop
holds around it; ``boundaries`` lists the compactions on a branch (for ``ctxrules log``
and ``stats``); ``failures`` the failed ones.  docs/compaction.md is the guide.
"""

from __future__ import annotations

from ..commit import Compaction, boundary_of
from ..dag import load_graph
from ..errors import ValidationError
from ..model import Node
from ..store import Store
from .breaker import CircuitBreaker, is_prompt_too_long, retry_after_compaction
from .flow import FAILURES_KEY, compact, failures
from .restore import compose_restore
from .types import (
    CompactOptions,
    CompactResult,
    PostCompactEvent,
    PreCompactEvent,
    Restored,
    RestoreLimits,
    SessionStartEvent,
)

__all__ = [
    "FAILURES_KEY",
    "CircuitBreaker",
    "CompactOptions",
    "CompactResult",
    "Compaction",
    "PostCompactEvent",
    "PreCompactEvent",
    "RestoreLimits",
    "Restored",
    "SessionStartEvent",
    "boundaries",
    "boundary_of",
    "compact",
    "compose_restore",
    "failures",
    "is_prompt_too_long",
    "retry_after_compaction",
]


def boundaries(
    store: Store, session_id: str, head: str | None = None
) -> list[tuple[Node, Compaction]]:
    """The compaction boundaries on the branch to ``head`` (default HEAD), oldest first,
    each node with its record (a node whose record does not validate is left out)."""

    graph = load_graph(store, session_id)
    out: list[tuple[Node, Compaction]] = []
    for node in graph.chain(head if head is not None else graph.session.head):
        try:
            record = boundary_of(node)
        except ValidationError:
            continue
        if record is not None:
            out.append((node, record))
    return out
