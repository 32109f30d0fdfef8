"""The data model: history nodes, content blocks, commit items and the provider context.

All of these are msgspec ``Struct``s so they round-trip through JSON exactly and cross
process and Rust boundaries as plain data.  Things that must never change after they
are made (nodes, commits, their items) are ``frozen``.  ``decode`` / ``encode`` are the
one place JSON enters and leaves the model; validation errors name the field path and
the offending value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeVar, Union

import msgspec

from ._deprecated import moved
from .errors import ValidationError

__all__ = [
    "CONTENT_BLOCK_TYPES",
    "CacheControl",
    "CompactionBlock",
    "Content",
    "ContentBlock",
    "Context",
    "ContextCommit",
    "ContextItem",
    "ImageBlock",
    "ImageSource",
    "ItemState",
    "Message",
    "Node",
    "RedactedThinkingBlock",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "content_text",
    "decode",
    "encode",
    "provider_compaction_start",
]

Role = Literal["user", "assistant", "tool", "system"]
ItemState = Literal["full", "aged", "cleared", "summarized", "summary"]

#: How far each state is from the original; a rule may only move an item up this scale
#: (invariant 3 of docs/rules.md).  ``summary`` items are synthesised, never reached by a change.
STATE_RANK: dict[str, int] = {"full": 0, "aged": 1, "cleared": 2, "summarized": 3, "summary": 0}


class CacheControl(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A prompt-cache breakpoint marker (Anthropic ``cache_control``)."""

    type: Literal["ephemeral"] = "ephemeral"
    ttl: Literal["5m", "1h"] | None = None


class _Block(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True):
    """Base of the content blocks; the ``type`` field names the block kind."""


class TextBlock(_Block, tag="text", frozen=True):
    """Plain text."""

    text: str
    cache_control: CacheControl | None = None


class ImageSource(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where an image's bytes are: inline base64 ``data`` or a ``url``."""

    type: Literal["base64", "url"] = "base64"
    media_type: str = ""
    data: str = ""
    url: str = ""

    def __post_init__(self) -> None:
        # Decoding checks the field types, constructing does not: an image built with a
        # non-string URL would otherwise only fail later, inside a renderer.
        for field in ("media_type", "data", "url"):
            value = getattr(self, field)
            if not isinstance(value, str):
                raise ValidationError(
                    f"an image source's {field!r} must be a string, got {type(value).__name__}",
                    where=f"image source ({self.type})",
                    hint="pass base64 text in data, or a URL string in url",
                )
        if self.type not in ("base64", "url"):
            raise ValidationError(
                f"an image source's type must be 'base64' or 'url', got {self.type!r}",
                hint="use ImageSource(type='url', url=...) or ImageSource(data=...)",
            )


class ImageBlock(_Block, tag="image", frozen=True):
    """An image, inline or by URL."""

    source: ImageSource
    cache_control: CacheControl | None = None


class ThinkingBlock(_Block, tag="thinking", frozen=True):
    """Model reasoning; ``signature`` must be sent back unchanged where the vendor requires it.

    ``vendor`` says who minted the signature, which only that vendor can check: ``""``
    (Anthropic, also for thinking with empty text under ``display: "omitted"``) or
    ``"gemini"`` — a Gemini ``thoughtSignature``, kept as a block with empty
    ``thinking`` right before the part that carried it.  Renderers send a signature
    only to its vendor.
    """

    thinking: str
    signature: str = ""
    cache_control: CacheControl | None = None
    vendor: str = ""


class RedactedThinkingBlock(_Block, tag="redacted_thinking", frozen=True):
    """Reasoning the vendor returned encrypted; opaque ``data`` to send back as is."""

    data: str
    cache_control: CacheControl | None = None


class ToolUseBlock(_Block, tag="tool_use", frozen=True):
    """The model asks for a tool call; ``id`` pairs it with its result."""

    id: str
    name: str
    input: dict[str, Any] = {}
    cache_control: CacheControl | None = None


class ToolResultBlock(_Block, tag="tool_result", frozen=True):
    """The answer to the tool call whose id is ``tool_use_id``."""

    tool_use_id: str
    content: Union[str, list[Union[TextBlock, ImageBlock]]] = ""
    is_error: bool = False
    cache_control: CacheControl | None = None


class CompactionBlock(_Block, tag="compaction", frozen=True):
    """A provider's own compaction of the conversation before it, returned by the vendor
    and sent back to that vendor only, as it came.

    ``vendor`` says who made it, as for ``ThinkingBlock``: ``""`` is Anthropic's
    ``compaction`` block — ``content`` the summary (``None`` when the summary failed,
    which makes the block a no-op), ``encrypted_content`` and ``signature`` opaque text
    and ``tool_changes`` the tool changes of the compacted range, all sent back
    verbatim; ``"openai"`` an OpenAI Responses ``compaction`` item — ``encrypted_content``
    the opaque state, ``id`` its item id, no readable ``content``.  ``tool_changes`` is
    kept as its JSON text (a list given here is encoded once), so the block stays
    immutable.  The vendor reads nothing before its latest such block, so its renderer
    sends nothing before it; every other vendor never sees the block and gets the
    history it stands for.  ``effective`` says whether the block does anything.
    """

    content: str | None = None
    encrypted_content: str | None = None
    signature: str | None = None
    tool_changes: str | list[Any] | None = None
    id: str = ""
    cache_control: CacheControl | None = None
    vendor: str = ""

    def __post_init__(self) -> None:
        changes = self.tool_changes
        if isinstance(changes, list):
            msgspec.structs.force_setattr(
                self, "tool_changes", msgspec.json.encode(changes).decode()
            )
        elif isinstance(changes, str):
            try:
                ok = isinstance(msgspec.json.decode(changes), list)
            except msgspec.DecodeError:
                ok = False
            if not ok:
                raise ValidationError(
                    "a compaction block's tool_changes must be a JSON array",
                    where=f"compaction block ({self.vendor or 'anthropic'})",
                    hint="pass the list the vendor returned, or its JSON text",
                )

    @property
    def effective(self) -> bool:
        """Whether the vendor acts on it: Anthropic's needs a non-empty summary (``content``
        null or empty is a failed compaction, a no-op), OpenAI's its encrypted state."""
        if self.vendor == "":
            return bool(self.content)
        return bool(self.encrypted_content)


ContentBlock = Union[
    TextBlock,
    ImageBlock,
    ThinkingBlock,
    RedactedThinkingBlock,
    ToolUseBlock,
    ToolResultBlock,
    CompactionBlock,
]
#: Content of a message or node: a plain string or a list of blocks.
Content = Union[str, list[ContentBlock]]
CONTENT_BLOCK_TYPES = (
    "text",
    "image",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "tool_result",
    "compaction",
)


class Node(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A node of the history graph; never modified once stored.

    ``predecessor`` (conversation edge) and ``caller`` (call edge: assistant → tool →
    sub-LLM) are mutually exclusive.  ``seq`` is the only ordering key.
    """

    id: str
    seq: int
    created_at: float
    role: Role
    session_id: str = ""
    name: str = ""
    input: Any = None
    output: Content = ""
    predecessor: str | None = None
    caller: str | None = None
    reads: tuple[str, ...] = ()
    metadata: dict[str, Any] = {}

    def __post_init__(self) -> None:
        if self.predecessor is not None and self.caller is not None:
            raise ValidationError(
                "a Node cannot have both 'predecessor' and 'caller'",
                where=f"node {self.id}",
                hint="use predecessor for the conversation chain, caller for tool/sub-LLM calls",
            )
        if not self.id:
            raise ValidationError("a Node needs a non-empty 'id'")
        if self.seq < 0:
            raise ValidationError(f"'seq' must be >= 0, got {self.seq}", where=f"node {self.id}")


class ContextItem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One entry of a commit: how a node (or a synthesised summary) is shown to the model.

    ``rendered`` is the text the model sees for this item in its current state.  Tool
    items keep what pairing needs (``tool_use_id``, ``name``, ``tool_input`` and their
    assistant ``caller``) so a renderer can always emit a matched tool-use / tool-result.
    ``blocks`` holds non-text content of a ``full`` item (images, thinking with
    signatures, tool_use blocks of an assistant turn).
    """

    source_node_id: str
    role: Role
    state: ItemState = "full"
    locked: bool = False
    rendered: str = ""
    tokens: int = 0
    reason: str = "new"
    merged_into: str | None = None
    is_anchor: bool = False
    attached_from: str | None = None
    name: str = ""
    caller: str | None = None
    tool_use_id: str | None = None
    tool_input: str = ""
    is_error: bool = False
    blocks: tuple[ContentBlock, ...] = ()
    changed_at: float = 0.0


def provider_compaction_start(items: Sequence[ContextItem]) -> int:
    """Position of the item holding the latest effective ``CompactionBlock`` that is
    shown (not ``summarized``), or -1 when there is none.

    The vendor that made the block reads nothing before it, so the items before this
    position are already compacted for that vendor: rules leave them alone and do not
    count them (docs/items.md, provider compaction).
    """
    # Every rule pass scans the whole commit, so the cheapest test rules an item out
    # first (a long session is mostly folded items), the block test runs in C (a
    # block's type is its tag: no subclasses), and the Python check runs only on items
    # that hold a compaction block.
    for p in range(len(items) - 1, -1, -1):
        it = items[p]
        if it.state == "summarized":
            continue
        blocks = it.blocks
        if not blocks or CompactionBlock not in map(type, blocks):
            continue
        if any(type(b) is CompactionBlock and b.effective for b in blocks):
            return p
    return -1


class ContextCommit(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Immutable snapshot of the model input at one head.

    ``parent_ids`` has one entry for an ordinary turn and several only for a merge.
    ``notes`` records what the rules did or could not do (e.g. a summarizer failure).
    ``total_tokens`` counts every item except ``summarized`` ones (they are not rendered).
    """

    id: str
    session_id: str
    parent_ids: tuple[str, ...] = ()
    created_at: float = 0.0
    head_node_id: str
    rules_version: str
    total_tokens: int = 0
    items: tuple[ContextItem, ...] = ()
    summary: str = ""
    notes: tuple[str, ...] = ()
    #: Positions the rules carry from commit to commit so each generation resumes where
    #: the last one stopped (e.g. the tool-aging boundary); part of the content.
    cursors: dict[str, int] = {}


class Message(msgspec.Struct, frozen=True, omit_defaults=True):
    """A provider-neutral chat message: role and a list of content blocks."""

    role: Literal["user", "assistant"]
    content: tuple[ContentBlock, ...]


class ToolSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    """A tool the model may call: name, description and JSON-schema of its input."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    cache_control: CacheControl | None = None


class Context(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a provider plugin turns into one vendor's request: system, messages, tools."""

    system: tuple[TextBlock, ...] = ()
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolSpec, ...] = ()


def content_text(content: Content) -> str:
    """Return the plain text of a content value (text blocks and tool results joined)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ThinkingBlock):
            parts.append(block.thinking)
        elif isinstance(block, ToolUseBlock):
            parts.append(f"{block.name}({msgspec.json.encode(block.input).decode()})")
        elif isinstance(block, ToolResultBlock):
            parts.append(content_text(block.content))  # type: ignore[arg-type]
    return "\n".join(parts)


T = TypeVar("T")


def decode(data: bytes | str, type: type[T], *, where: str | None = None) -> T:
    """Decode JSON into a model type; a mismatch raises ``ValidationError`` naming the field."""
    try:
        return msgspec.json.decode(data, type=type)
    except msgspec.ValidationError as exc:
        raise ValidationError(str(exc), where=where) from None
    except msgspec.DecodeError as exc:
        raise ValidationError(f"invalid JSON: {exc}", where=where) from None


def encode(obj: Any) -> bytes:
    """Encode a model value as compact JSON bytes (the exact inverse of ``decode``)."""
    return msgspec.json.encode(obj)


#: Old names of this module (``Call`` was the node's class before it was named ``Node``).
_MOVED = {"Call": "ctxrules.model:Node"}


def __getattr__(name: str) -> Any:
    return moved(__name__, _MOVED, name)
