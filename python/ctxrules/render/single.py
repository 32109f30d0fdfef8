"""One commit rendered: provider-neutral messages (``render_messages``), the neutral
``Context`` (``render_context``), or one provider's request (``render``, with its body
bytes alone from ``render_body``); and the core's item caches behind them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import _core
from ..errors import RenderError
from ..model import Context, ContextCommit, ContextItem, Message, ToolSpec
from ..providers.base import Provider, RenderedRequest, RequestOptions, neutral_context
from .options import (
    SystemArg,
    encode_commit,
    provider_of,
    request_options,
    system_blocks,
    tool_tuple,
)

__all__ = [
    "cache_stats",
    "clear_cache",
    "render",
    "render_body",
    "render_context",
    "render_messages",
    "render_side_request",
    "set_cache_capacity",
]


def render_context(
    commit: ContextCommit | bytes,
    *,
    system: SystemArg = None,
    situation: SystemArg = None,
    tools: Sequence[ToolSpec | Mapping[str, Any]] = (),
) -> Context:
    """The provider-neutral ``Context`` of a commit: what plugin providers build bodies from.

    ``system`` texts are the session-constant layer, ``situation`` texts the situation
    layer; the commit's system items follow them.
    """
    data, where = encode_commit(commit)
    options = RequestOptions(
        model="", system=system_blocks(system, situation), tools=tool_tuple(tools)
    )
    return neutral_context(data, options, where=where)


def render_messages(commit: ContextCommit | bytes) -> list[Message]:
    """Provider-neutral messages of a commit (the item rules: docs/items.md).

    ``summarized`` items are skipped, ``summary`` items become assistant text prefixed
    ``[Summary]``, tool items become a tool_use on their assistant turn and a tool_result
    opening the next user message — or user text where the pairing is really missing.
    Pure: the same commit gives the same messages.
    """
    return list(render_context(commit).messages)


def render(
    commit: ContextCommit | bytes,
    provider: str | Provider,
    model: str | None = None,
    *,
    estimate: bool = False,
    **options: Any,
) -> RenderedRequest:
    """Render a commit for a provider: body bytes, endpoint and a breakdown (``meta``).

    Keyword options are those of ``request_options`` (system, situation, tools,
    max_tokens, extra, cache, cache_ttl).  ``system`` and ``situation`` are the finished
    L0 and L1 texts: the situation of a stored commit comes from
    ``ctxrules.situation.commit_situation(store, commit)``, called by whoever holds the
    store (the CLI; the turn engine).  Without a ``situation`` there is no L1 text.
    ``estimate=True`` also makes the billed-prompt estimate (``RenderedRequest.estimate``,
    by the core from the same plan as the body: ``ctxrules.providers.estimate``).
    """
    prov = provider_of(provider)
    if not isinstance(commit, (ContextCommit, bytes)):
        encode_commit(commit)  # raises the clear type error
    return prov.render(commit, request_options(prov, model, **options), estimate=estimate)


def render_body(
    commit: ContextCommit | bytes,
    provider: str | Provider,
    model: str | None = None,
    **options: Any,
) -> bytes:
    """The request body bytes, exactly as they would be sent (see ``render``)."""
    return render(commit, provider, model, **options).body


def render_side_request(
    provider: str | Provider,
    model: str | None,
    system: str,
    text: str,
    *,
    max_tokens: int | None = None,
) -> RenderedRequest:
    """A minimal request off the main path (a summary, a branch summary, a title):
    ``system`` and one user message ``text``; no tools, no history, no situation and no
    cache breakpoints.  ``max_tokens`` as in ``request_options``."""
    item = ContextItem(source_node_id="side", role="user", rendered=text)
    commit = ContextCommit(
        id="side", session_id="", head_node_id="side", rules_version="", items=(item,)
    )
    return render(
        commit, provider, model, system=system or None, max_tokens=max_tokens, cache=False
    )


def cache_stats() -> dict[str, int]:
    """What the core's item caches hold: ``items`` / ``bytes`` / ``hits`` / ``misses``
    of the cache of items prepared from commit bytes (found by their exact bytes),
    ``objects`` / ``object_bytes`` / ``object_hits`` of the table of ``ContextItem``s
    prepared from commits (found by identity; it keeps those objects alive), and
    ``capacity``, the bound of each in bytes (when an insert would pass it, that cache
    starts over)."""
    return _core.item_cache_stats()


def clear_cache() -> None:
    """Empty the core's item caches (the next render of any commit prepares it again)."""
    _core.item_cache_clear()


def set_cache_capacity(capacity: int) -> None:
    """Bound each of the core's item caches to ``capacity`` bytes (0: cache nothing);
    applies from the next insert.  The default is 128 MiB each."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise RenderError(
            f"cache capacity must be a non-negative int of bytes, not {capacity!r}",
            where="set_cache_capacity",
        )
    _core.set_item_cache_capacity(capacity)
