"""ctxrules: decide what an LLM is fed on every call.

The root lists what the three kinds of users need, each name imported the first time it
is used (so ``import ctxrules`` loads almost nothing):

- an agent author: ``Engine`` and ``EngineConfig`` (prepare a request, send it with the
  vendor's SDK, record the answer), ``ToolResult``, ``open_store``; ``shape`` (a message
  list in, the same list shaped by the rules out, for callers who keep their own
  history);
- a rule author: ``Rule``, ``RuleContext``, ``ContextItem``, ``ContextCommit`` (the rule
  API, ``ctxrules.ruleapi``), ``PipelineConfig`` and the test kit ``ctxrules.testing``;
- a batch user: ``session_requests`` and ``render_requests`` (the requests of stored
  sessions, ``ctxrules.requests``), ``make_commit``, ``render`` and its kin, named by what
  they return (``render`` → ``RenderedRequest``, ``render_body`` → bytes,
  ``render_messages`` → messages, ``render_context`` → ``Context``), ``count``.

Everything else lives in its subpackage (``ctxrules.model``, ``ctxrules.commit``,
``ctxrules.providers``, …).  Names that moved or were renamed still resolve here for one
release, with a ``DeprecationWarning`` naming their new home (CHANGELOG.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._deprecated import moved

__all__ = [
    "PRESETS",
    "CommitStore",
    "Context",
    "ContextCommit",
    "ContextItem",
    "Engine",
    "EngineConfig",
    "Message",
    "Node",
    "PipelineConfig",
    "RenderedRequest",
    "Request",
    "Rule",
    "RuleContext",
    "Store",
    "ToolResult",
    "__version__",
    "count",
    "count_batch",
    "diff_commits",
    "errors",
    "explain",
    "load_config",
    "make_commit",
    "open_store",
    "render",
    "render_batch",
    "render_body",
    "render_context",
    "render_messages",
    "render_requests",
    "resolve_model",
    "session_requests",
    "shape",
]

#: Where each public name lives (imported on first use).
_HOMES = {
    "PRESETS": "ctxrules.config",
    "CommitStore": "ctxrules.store",
    "Context": "ctxrules.model",
    "ContextCommit": "ctxrules.model",
    "ContextItem": "ctxrules.model",
    "Engine": "ctxrules.engine",
    "EngineConfig": "ctxrules.engine",
    "Message": "ctxrules.model",
    "Node": "ctxrules.model",
    "PipelineConfig": "ctxrules.config",
    "RenderedRequest": "ctxrules.providers",
    "Request": "ctxrules.requests",
    "Rule": "ctxrules.ruleapi",
    "RuleContext": "ctxrules.ruleapi",
    "Store": "ctxrules.store",
    "ToolResult": "ctxrules.engine",
    "count": "ctxrules.tokenizers",
    "count_batch": "ctxrules.tokenizers",
    "diff_commits": "ctxrules.commit",
    "explain": "ctxrules.render",
    "load_config": "ctxrules.config",
    "make_commit": "ctxrules.commit",
    "open_store": "ctxrules.store",
    "render_batch": "ctxrules.render",
    "render_body": "ctxrules.render",
    "render_context": "ctxrules.render",
    "render_messages": "ctxrules.render",
    "render_requests": "ctxrules.requests",
    "resolve_model": "ctxrules.providers",
    "session_requests": "ctxrules.requests",
    "shape": "ctxrules.engine",
}

#: Names the root exported before 0.2: each resolves, with a DeprecationWarning, to its
#: home (renamed: ``Call`` → ``Node``, ``render_commit`` → ``render_messages``,
#: ``render_request`` → ``render_body``, ``ensure_latest_commit`` / ``generate_commit``
#: → ``make_commit``).
_MOVED: dict[str, str | tuple[str, str]] = {
    "Call": "ctxrules.model:Node",
    "CommitDiff": "ctxrules.commit:CommitDiff",
    "CompactionBlock": "ctxrules.model:CompactionBlock",
    "ContentBlock": "ctxrules.model:ContentBlock",
    "ImageBlock": "ctxrules.model:ImageBlock",
    "RedactedThinkingBlock": "ctxrules.model:RedactedThinkingBlock",
    "TextBlock": "ctxrules.model:TextBlock",
    "ThinkingBlock": "ctxrules.model:ThinkingBlock",
    "ToolResultBlock": "ctxrules.model:ToolResultBlock",
    "ToolSpec": "ctxrules.model:ToolSpec",
    "ToolUseBlock": "ctxrules.model:ToolUseBlock",
    "ModelProfile": "ctxrules.providers:ModelProfile",
    "Pipeline": "ctxrules.commit:Pipeline",
    "Provider": "ctxrules.providers:Provider",
    "Usage": "ctxrules.providers:Usage",
    "derive_commit": "ctxrules.commit:derive_commit",
    "derive_with_summaries": "ctxrules.commit:derive_with_summaries",
    "ensure_latest_commit": (
        "ctxrules.commit._aliases:ensure_latest_commit",
        "use ctxrules.make_commit",
    ),
    "generate_commit": (
        "ctxrules.commit._aliases:generate_commit",
        "use ctxrules.make_commit(..., rerun=True)",
    ),
    "find_config": "ctxrules.config:find_config",
    "get_provider": "ctxrules.providers:get_provider",
    "get_tokenizer": "ctxrules.tokenizers:get_tokenizer",
    "load_commit": "ctxrules.commit:load_commit",
    "next_request": "ctxrules.requests:next_request",
    "request_for": "ctxrules.requests:request_for",
    "render_commit": ("ctxrules.render:render_messages", "use ctxrules.render_messages"),
    "render_request": ("ctxrules.render:render_body", "use ctxrules.render_body"),
    "render_sessions": "ctxrules.render:render_sessions",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
    elif name == "__version__":
        # The version the extension was built with (Cargo.toml, the one place it is
        # written): no package metadata to read at start-up.
        value = importlib.import_module("ctxrules._core").__version__
    elif name in ("errors", "render"):
        # ``render`` is the package ``ctxrules.render``, which is callable as its
        # ``render`` function (see that package): one meaning for one name.
        value = importlib.import_module(f"ctxrules.{name}")
    else:
        return moved(__name__, _MOVED, name)
    globals()[name] = value  # found once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from . import errors
    from .commit import diff_commits, make_commit
    from .config import PRESETS, PipelineConfig, load_config
    from .engine import Engine, EngineConfig, ToolResult, shape
    from .model import Context, ContextCommit, ContextItem, Message, Node
    from .providers import RenderedRequest, resolve_model
    from .render import (
        explain,
        render,
        render_batch,
        render_body,
        render_context,
        render_messages,
    )
    from .requests import Request, render_requests, session_requests
    from .ruleapi import Rule, RuleContext
    from .store import CommitStore, Store, open_store
    from .tokenizers import count, count_batch

    __version__: str
