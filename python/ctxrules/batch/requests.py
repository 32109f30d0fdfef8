"""The requests of a recorded session: where the agent made one, when, and what the
recording says it cost.

A worker receives a session as ``SessionData`` (its metadata and the nodes of its
branch, MessagePack bytes); ``request_points`` finds its requests: before each recorded
answer that follows new input (a user message, or the tool results of the answer
before), and the last one when the session metadata keeps the response to it (a
cassette).  ``render_provider`` says which provider a session is rendered for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .. import dag
from ..model import Node
from ..providers import Provider, Usage, get_provider, model_families, provider_names
from ..render import recorded_request
from ..requests import recorded_usage, sent_time
from ..store import CommitStore

__all__ = ["RequestPoint", "SessionData", "render_provider", "request_points", "session_data"]


class SessionData(msgspec.Struct, frozen=True, kw_only=True):
    """One session as a worker receives it: its id, its metadata and the nodes of its
    branch in ``dag.branch_path`` order (encoded with ``msgspec.msgpack``)."""

    id: str
    metadata: dict[str, Any] = {}
    nodes: tuple[Node, ...] = ()


def session_data(store: CommitStore, session_id: str) -> SessionData:
    """The ``SessionData`` of a stored session: its branch as the model saw it."""
    info = store.get_session(session_id)
    nodes = tuple(dag.branch_path(store, session_id)) if info.head is not None else ()
    return SessionData(id=info.id, metadata=dict(info.metadata), nodes=nodes)


class RequestPoint(msgspec.Struct, frozen=True, kw_only=True):
    """A request the agent made: before the node at ``index`` of the branch (``len``:
    after the last), sent at ``now``, answered by ``answer`` (``None``: the recording
    keeps the response, not a node) with ``usage`` as recorded."""

    index: int
    now: float
    answer: Node | None
    usage: Usage | None
    output_tokens: int | None


def _usage(provider: Provider, raw: Any) -> Usage | None:
    """Recorded usage that measured a prompt (``None``: none, or an empty one)."""
    usage = recorded_usage(provider, raw)
    return usage if usage is not None and usage.prompt_tokens > 0 else None


def request_points(data: SessionData, recorded_as: Provider) -> list[RequestPoint]:
    """Every request of the branch: before each answer that follows new input (a user
    message, or an answer's tool results), and the last one when the session metadata
    keeps its ``response`` (a cassette)."""
    out: list[RequestPoint] = []
    last: Node | None = None
    calls: list[Node] = []

    def due() -> bool:
        return last is not None and (last.role != "assistant" or bool(calls))

    for i, node in enumerate(data.nodes):
        if node.caller is not None:
            calls.append(node)
            continue
        if node.role == "assistant" and last is not None and due():
            usage = _usage(recorded_as, node.metadata.get("usage"))
            out.append(
                RequestPoint(
                    index=i,
                    now=sent_time(last, calls, node.created_at),
                    answer=node,
                    usage=usage,
                    output_tokens=usage.output_tokens if usage is not None else None,
                )
            )
        last, calls = node, []
    response = data.metadata.get("response")
    if last is not None and due() and isinstance(response, Mapping):
        # A cassette: the response to the request at HEAD, as the vendor sent it.
        parsed = recorded_as.parse_usage(response)
        usage = parsed if parsed is not None and parsed.prompt_tokens > 0 else None
        out.append(
            RequestPoint(
                index=len(data.nodes),
                now=sent_time(last, calls, math.inf),
                answer=None,
                usage=usage,
                output_tokens=usage.output_tokens if usage is not None else 0,
            )
        )
    return out


def family_provider(model: str) -> str | None:
    """The first registered provider of the family whose model table names ``model``."""
    for family in model_families(model) if model else ():
        for name in provider_names():
            if get_provider(name).model_family == family:
                return name
    return None


def render_provider(
    provider: str | None, model: str | None, metadata: Mapping[str, Any], nodes: Sequence[Node]
) -> str:
    """The provider to render a session for: ``provider``, else the provider of
    ``model``'s family, else the one the session was recorded for, else the provider of
    the family that names the session's model, else Anthropic."""
    if provider:
        return provider
    if model:
        return family_provider(model) or "anthropic"
    rec = recorded_request(metadata)
    if rec.provider:
        return rec.provider
    model = rec.model or next((n.name for n in nodes if n.role == "assistant" and n.name), "")
    return family_provider(model) or "anthropic"
