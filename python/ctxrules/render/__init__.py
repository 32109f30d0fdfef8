"""Rendering: a commit → provider-neutral messages, or a provider's request body.

Both paths run in Rust from one boundary crossing per commit: the commit goes over as
msgspec MessagePack bytes (its texts then need no unescaping in Rust), the body (or the
neutral context) comes back as JSON bytes.  There is no Python work per item.
Rendering is a pure function of its inputs — the commit and finished system layers and
options; it reads no clock, no store and no randomness — so the same inputs give the
same bytes in every process (invariant 8 of docs/rules.md).

The request is composed by stability so prompt caches hit: L0 is constant for the
session (``system`` text and the tool list), L1 is the situation (``situation`` text,
which the caller builds — from the call tree with ``ctxrules.situation.commit_situation``
— and the commit's system items), L2 the conversation.  Anthropic gets cache
breakpoints at those boundaries.

The package's modules, along its seams:

- ``options``: what every path shares (``request_options``, tool declarations in any
  vendor's shape, the model checks);
- ``defaults``: what a session recorded about its requests, as render options
  (``recorded_request``, ``session_defaults``);
- ``single``: one commit (``render``, ``render_body``, ``render_context``,
  ``render_messages``, ``render_side_request``) and the core's item caches;
- ``batch``: many commits or sessions in one crossing (``render_batch``,
  ``render_sessions``, ``render_session``); ``SessionRenderer``, the core's renderer
  of one session's successive requests one call at a time (each body from the
  previous one's bytes, what the engine prepares with: ``Provider.render(renderer=…)``);
- ``estimate``: what a request will cost (``estimate_request``, ``header_tokens``,
  ``explain`` with the predicted cache use, ``ctxrules.providers.cache``).

The package is also callable: ``ctxrules.render(commit, provider, …)`` is
``ctxrules.render.render(…)``.  The root's ``render`` is this package, so the name
means the same thing however it was reached (``import ctxrules.render`` makes the
package an attribute of the root, which a separate function of that name would lose to).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .._core import SessionRenderer
from .._deprecated import moved
from ..providers.base import RenderedRequest
from .batch import MAX_THREADS, SessionOptions, render_batch, render_session, render_sessions
from .defaults import RecordedRequest, RenderDefaults, recorded_request, session_defaults
from .estimate import CacheHit, estimate_request, explain, header_tokens
from .options import (
    DEFAULT_OUTPUT_RESERVE,
    SystemArg,
    check_model,
    default_max_tokens,
    request_options,
    tool_specs,
)
from .single import (
    cache_stats,
    clear_cache,
    render,
    render_body,
    render_context,
    render_messages,
    render_side_request,
    set_cache_capacity,
)

__all__ = [
    "DEFAULT_OUTPUT_RESERVE",
    "MAX_THREADS",
    "CacheHit",
    "RecordedRequest",
    "RenderDefaults",
    "SessionOptions",
    "SessionRenderer",
    "SystemArg",
    "cache_stats",
    "check_model",
    "clear_cache",
    "default_max_tokens",
    "estimate_request",
    "explain",
    "header_tokens",
    "recorded_request",
    "render",
    "render_batch",
    "render_body",
    "render_context",
    "render_messages",
    "render_session",
    "render_sessions",
    "render_side_request",
    "request_options",
    "session_defaults",
    "set_cache_capacity",
    "tool_specs",
]

#: Old names: renamed for what they return.
_MOVED = {
    "render_commit": "ctxrules.render:render_messages",
    "render_request": "ctxrules.render:render_body",
}


def __getattr__(name: str) -> Any:
    return moved(__name__, _MOVED, name)


class _Callable(types.ModuleType):
    """This package's module type: calling it renders (``render``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> RenderedRequest:
        return render(*args, **kwargs)


sys.modules[__name__].__class__ = _Callable
