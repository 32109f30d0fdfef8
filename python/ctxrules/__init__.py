"""ctxrules: decide what an LLM is fed on every call.

The public surface is what ``__all__`` lists; everything in ``_``-prefixed modules is
private.  See ``ctxrules.hookspecs`` for the plugin contract.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from . import errors
from .commit import ensure_latest_commit, generate_commit
from .model import (
    Call,
    ContentBlock,
    Context,
    ContextCommit,
    ContextItem,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
)
from .providers import resolve_model
from .render import render_commit, render_context, render_request
from .tokenizers import count, count_batch, get_tokenizer

try:
    __version__ = version("ctxrules")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = [
    "Call",
    "ContentBlock",
    "Context",
    "ContextCommit",
    "ContextItem",
    "ImageBlock",
    "Message",
    "RedactedThinkingBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "__version__",
    "count",
    "count_batch",
    "ensure_latest_commit",
    "errors",
    "generate_commit",
    "get_tokenizer",
    "render_commit",
    "render_context",
    "render_request",
    "resolve_model",
]
