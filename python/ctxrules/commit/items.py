"""How a history node becomes a commit item (the contract in docs/items.md).

``derive_commit`` calls ``item_for_call`` for every new node of the branch.
Conventions read from nodes (set by the importers and the DAG): tool nodes carry
``metadata["tool_use_id"]`` / ``["is_error"]``; ``metadata["pinned"]`` makes an item an
anchor (kept full by summarize); ``metadata["locked"]`` locks it, and so does the
role ``system`` while the pipeline locks system items; an attach pointer is
a node with ``metadata["attach"] = {"session", "head", "commit"}``; a merge instruction
is a node with ``metadata["merge"] = {"into", "peers": [{"session", "head", "commit"}, …],
"base"}``, naming the commits it merges (``merge_parents``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import msgspec

from ..model import (
    ContentBlock,
    ContextCommit,
    ContextItem,
    ImageBlock,
    Node,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    content_text,
)

__all__ = [
    "ATTACH_KEY",
    "MERGE_KEY",
    "attach_items",
    "attach_ref",
    "find_native",
    "item_for_call",
    "merge_parents",
    "tool_input_text",
    "user_text",
]

ATTACH_KEY = "attach"
MERGE_KEY = "merge"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return content_text(content)
    return "" if content is None else msgspec.json.encode(content).decode()


def _tool_result_text(output: Any) -> tuple[str, tuple[ContentBlock, ...], bool]:
    """Text of a tool result, its image blocks, and whether a block said it failed."""
    if isinstance(output, str):
        return output, (), False
    if not isinstance(output, list):
        return _text_of(output), (), False
    parts: list[str] = []
    images: list[ContentBlock] = []
    failed = False
    for block in output:
        if isinstance(block, ToolResultBlock):
            failed = failed or block.is_error
            if isinstance(block.content, str):
                parts.append(block.content)
            else:
                for sub in block.content:
                    if isinstance(sub, TextBlock):
                        parts.append(sub.text)
                    else:
                        images.append(sub)
        elif isinstance(block, ImageBlock):
            images.append(block)
        else:
            parts.append(content_text([block]))
    return "\n".join(parts), tuple(images), failed


def user_text(call: Node) -> str:
    """The text a user node shows: its text blocks joined by newlines (what its item's
    ``rendered`` starts as)."""
    if isinstance(call.output, list):
        return "\n".join(b.text for b in call.output if isinstance(b, TextBlock))
    return _text_of(call.output)


def tool_input_text(call: Node) -> str:
    """A tool node's arguments as its item holds them (``tool_input``): the recorded
    text, or the arguments' JSON."""
    if call.input is None:
        return ""
    return call.input if isinstance(call.input, str) else msgspec.json.encode(call.input).decode()


def item_for_call(call: Node, *, anchor: bool, lock_system: bool, now: float) -> ContextItem:
    """The ``full`` item of one node (``anchor``: make it the task-statement anchor;
    ``lock_system``: a system node's item is locked)."""
    meta = call.metadata
    common: dict[str, Any] = {
        "source_node_id": call.id,
        "role": call.role,
        "locked": bool(meta.get("locked", False)) or (lock_system and call.role == "system"),
        "is_anchor": anchor or bool(meta.get("pinned", False)),
        "reason": "anchor" if anchor else "new",
        "changed_at": now,
    }
    if call.role == "tool":
        text, images, failed = _tool_result_text(call.output)
        tool_input = tool_input_text(call)
        use_id = meta.get("tool_use_id")
        return ContextItem(
            **common,
            rendered=text,
            name=call.name,
            caller=call.caller,
            tool_use_id=use_id if isinstance(use_id, str) and use_id else None,
            tool_input=tool_input,
            is_error=bool(meta.get("is_error", False)) or failed,
            blocks=images,
        )
    blocks: tuple[ContentBlock, ...]
    if call.role == "assistant":
        if isinstance(call.output, list):
            blocks = tuple(b for b in call.output if not isinstance(b, ToolUseBlock))
            text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
        else:
            blocks, text = (), _text_of(call.output)
        return ContextItem(**common, rendered=text, blocks=blocks)
    if call.role == "system":
        text = _text_of(call.input) if call.input not in (None, "") else _text_of(call.output)
        return ContextItem(**common, rendered=text)
    # user
    blocks = (
        tuple(b for b in call.output if not isinstance(b, TextBlock))
        if isinstance(call.output, list)
        else ()
    )
    return ContextItem(**common, rendered=user_text(call), blocks=blocks)


def attach_ref(call: Node) -> dict[str, str] | None:
    """The attach pointer of a node (``session``, ``head``, ``commit``), if it is one."""
    ref = call.metadata.get(ATTACH_KEY)
    if isinstance(ref, dict) and isinstance(ref.get("commit"), str):
        return {k: str(v) for k, v in ref.items() if isinstance(v, (str, int))}
    return None


def merge_parents(call: Node) -> tuple[str, ...]:
    """The peer commit ids a merge instruction node names, in order (empty for any other
    node): the parents a commit gains besides its own when it adds this node."""
    record = call.metadata.get(MERGE_KEY)
    if not isinstance(record, dict) or not isinstance(record.get("peers"), list):
        return ()
    return tuple(
        p["commit"]
        for p in record["peers"]
        if isinstance(p, dict) and isinstance(p.get("commit"), str)
    )


def attach_items(
    call: Node,
    ref: dict[str, str],
    load_commit: Callable[[str], ContextCommit | None] | None,
    *,
    now: float,
    shown: Collection[str] = (),
) -> list[ContextItem]:
    """The items an attach pointer expands to (docs/items.md, attach blocks).

    An open marker (the pointer node itself), the source commit's visible items, and a
    close marker, all with ``attached_from`` = the source commit id; the block is what
    summarize never splits.  Expanded items are ordinary unlocked items.  Items whose
    node is in ``shown`` (what the commit shows already: the history a sibling branch
    or a fork shares with this one), and the tool results of such calls, are left out,
    so a shared prefix is not sent twice.  When the source commit cannot be loaded the
    pointer becomes one user item saying so.  A pointer with ``metadata["locked"]``
    locks the whole block, markers included (a merge's base peer: rules leave it as
    its source commit shows it).
    """
    source_id = ref["commit"]
    source = None
    if load_commit is not None:
        try:
            source = load_commit(source_id)
        except Exception:  # an unloadable source degrades to one item, never fails the commit
            source = None
    label = f"session {ref.get('session', '?')} at {ref.get('head', '?')} (commit {source_id})"
    if source is None:
        return [
            ContextItem(
                source_node_id=call.id,
                role="user",
                rendered=f"[attached: {label} could not be loaded]",
                reason="attach_unavailable",
                changed_at=now,
            )
        ]
    reason = f"attached_from:{source_id}"
    locked = bool(call.metadata.get("locked", False))
    out = [
        ContextItem(
            source_node_id=call.id,
            role="user",
            rendered=f"<attached {label}>",
            locked=locked,
            reason=reason,
            attached_from=source_id,
            changed_at=now,
        )
    ]
    for it in source.items:
        if it.state == "summarized" or it.source_node_id in shown:
            continue
        if it.role == "tool" and it.caller is not None and it.caller in shown:
            continue  # a result (maybe another variant) of a call the commit shows
        out.append(
            msgspec.structs.replace(
                it,
                locked=locked,
                is_anchor=False,
                reason=reason,
                attached_from=source_id,
                changed_at=now,
                tokens=0,
            )
        )
    out.append(
        ContextItem(
            source_node_id=f"{call.id}/end",
            role="user",
            rendered=f"</attached {source_id}>",
            locked=locked,
            reason=reason,
            attached_from=source_id,
            changed_at=now,
        )
    )
    return out


def find_native(items: Sequence[ContextItem], node_id: str) -> int:
    """Position of the last item showing node ``node_id`` natively (not inside an attach
    block), or -1."""
    for p in range(len(items) - 1, -1, -1):
        if items[p].source_node_id == node_id and items[p].attached_from is None:
            return p
    return -1
