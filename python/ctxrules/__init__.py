"""ctxrules: decide what an LLM is fed on every call.

The public surface is what ``__all__`` lists; everything in ``_``-prefixed modules is
private.  See ``ctxrules.hookspecs`` for the plugin contract.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from . import errors
from .commit import (
    CommitDiff,
    Pipeline,
    RuleContext,
    derive_commit,
    derive_with_summaries,
    diff_commits,
    ensure_latest_commit,
    generate_commit,
    load_commit,
)
from .config import PRESETS, PipelineConfig, find_config, load_config
from .model import (
    Call,
    CompactionBlock,
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
from .providers import (
    ModelProfile,
    Provider,
    RenderedRequest,
    Usage,
    get_provider,
    resolve_model,
)
from .render import (
    explain,
    render_batch,
    render_commit,
    render_context,
    render_request,
    render_sessions,
)
from .replay import Request, next_request, render_requests, request_for, session_requests
from .rules import Rule
from .store import CommitStore, Store, open_store
from .tokenizers import count, count_batch, get_tokenizer

try:
    __version__ = version("ctxrules")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = [
    "PRESETS",
    "Call",
    "CommitDiff",
    "CommitStore",
    "CompactionBlock",
    "ContentBlock",
    "Context",
    "ContextCommit",
    "ContextItem",
    "ImageBlock",
    "Message",
    "ModelProfile",
    "Pipeline",
    "PipelineConfig",
    "Provider",
    "RedactedThinkingBlock",
    "RenderedRequest",
    "Request",
    "Rule",
    "RuleContext",
    "Store",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "Usage",
    "__version__",
    "count",
    "count_batch",
    "derive_commit",
    "derive_with_summaries",
    "diff_commits",
    "ensure_latest_commit",
    "errors",
    "explain",
    "find_config",
    "generate_commit",
    "get_provider",
    "get_tokenizer",
    "load_commit",
    "load_config",
    "next_request",
    "open_store",
    "render_batch",
    "render_commit",
    "render_context",
    "render_request",
    "render_requests",
    "render_sessions",
    "request_for",
    "resolve_model",
    "session_requests",
]
