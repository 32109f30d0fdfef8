"""Tool calls waiting at HEAD, and their results: none is ever dropped.

When the model's answer at HEAD asks for tool calls, every vendor needs each call
answered before the conversation goes on; a request that leaves one out would have it
removed from the request without a word.  So ``prepare`` settles the calls first
(``settle``): input that leaves calls unanswered — the user's next message while calls
wait, some of the results but not all, no input at all — is refused with
``UnansweredToolCallsError`` naming them (``unanswered_calls = "refuse"``, the
default), or each call left is answered explicitly with the configured "not run"
result, marked as an error and as ``not_run`` in the tool node's metadata, and
``TurnPrep.not_run`` lists them (``"not_run"``).  Results are checked before anything is
stored: a result for no waiting call, or a second result for one, is a ``DagError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from .. import dag
from ..errors import DagError, UnansweredToolCallsError
from ..model import ToolUseBlock
from ..store import CommitStore
from .config import EngineConfig
from .results import ToolResult

__all__ = ["Settled", "append_results", "settle"]


class Settled(NamedTuple):
    """What ``settle`` decided: the results to append, the calls answered as not run,
    and HEAD's calls by id (read once: ``append_results`` takes them)."""

    results: list[ToolResult]
    not_run: tuple[str, ...]
    calls: Mapping[str, ToolUseBlock]


def _calls(store: CommitStore, session: str, head: str) -> tuple[list[ToolUseBlock], set[str]]:
    """The tool calls of the node ``head`` and the ids already answered under it."""
    node = store.get_node(head)
    if node.role != "assistant" or node.caller is not None:
        return [], set()
    calls = [
        b
        for b in (node.output if isinstance(node.output, list) else [])
        if isinstance(b, ToolUseBlock)
    ]
    answered = {
        str(c.metadata.get("tool_use_id"))
        for c in store.children(head, session_id=session, edge="caller")
    }
    return calls, answered


def settle(
    store: CommitStore,
    session: str,
    head: str | None,
    results: Sequence[ToolResult],
    config: EngineConfig,
) -> Settled:
    """The results to append for ``prepare``'s input, and the calls answered as not run.

    ``results`` are the caller's (checked: each answers a waiting call, once); the calls
    they leave unanswered are refused (``UnansweredToolCallsError``) or answered with
    ``config.not_run_result`` (see the module docstring).  Nothing is stored here.
    """
    # One read of HEAD's calls and results serves the waiting list, the checks and the
    # appends (``Settled.calls``).
    calls, answered = _calls(store, session, head) if head is not None else ([], set())
    by_id = {c.id: c for c in calls}
    waiting = [c for c in calls if c.id not in answered]
    ids = [r.tool_use_id for r in results]
    if results:
        assert head is not None
        known = {c.id for c in calls}
        for r in results:
            if r.tool_use_id not in known:
                raise DagError(
                    f"no tool call {r.tool_use_id!r} is waiting at HEAD {head}",
                    where=f"session {session}",
                    hint=f"the calls of HEAD are {sorted(known) or 'none'}",
                )
            if r.tool_use_id in answered or ids.count(r.tool_use_id) > 1:
                raise DagError(
                    f"tool call {r.tool_use_id!r} already has its result",
                    where=f"session {session}, node {head}",
                )
    left = [c for c in waiting if c.id not in ids]
    if not left:
        return Settled(list(results), (), by_id)
    names = ", ".join(f"{c.id} ({c.name})" for c in left)
    if config.unanswered_calls == "refuse":
        raise UnansweredToolCallsError(
            f"{len(left)} tool call(s) of HEAD {head} would be left without a result: {names}",
            calls=[c.id for c in left],
            where=f"session {session}",
            hint="hand every result back with prepare(tool_results=…), or set "
            'EngineConfig(unanswered_calls="not_run") to answer the rest as not run',
        )
    filled = [ToolResult(c.id, config.not_run_result, is_error=True) for c in left]
    return Settled([*results, *filled], tuple(c.id for c in left), by_id)


def append_results(
    store: CommitStore,
    session: str,
    head: str,
    results: Sequence[ToolResult],
    calls: Mapping[str, ToolUseBlock],
    now: float,
    *,
    not_run: Sequence[str] = (),
) -> list[str]:
    """Append one tool node per result under the answer at ``head`` (checked by
    ``settle``, whose ``calls`` these are: HEAD's calls by id); a result in ``not_run``
    is marked so in its metadata."""
    out = []
    for r in results:
        use = calls[r.tool_use_id]
        metadata = {"tool_use_id": r.tool_use_id, "is_error": r.is_error}
        if r.tool_use_id in not_run:
            metadata["not_run"] = True
        node = dag.append(
            store,
            session,
            "tool",
            r.output,
            name=use.name,
            input=use.input,
            caller=head,
            metadata=metadata,
            created_at=now,
        )
        out.append(node.id)
    return out
