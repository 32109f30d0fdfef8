"""Message-list conversions shared by several importers (files and recorded requests).

Each function appends one conversation to a ``SessionBuilder``: a linear chain of
conversation nodes (system, user, assistant) and, under each assistant node, one tool
node per answered tool call.  A tool result whose call is not in an earlier assistant
message is an error: the file is incomplete, and guessing would pair it wrongly.
"""

from __future__ import annotations

import json
from typing import Any

from ..model import (
    ContentBlock,
    ImageBlock,
    ImageSource,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from ._common import SessionBuilder, fail, split_tool_results, to_blocks, tool_result_output

__all__ = ["anthropic_messages", "gemini_contents", "openai_messages", "responses_items"]


def _beside(at: str, key: str) -> str | None:
    """The path of ``key`` next to the message list at ``at`` (the request's system)."""
    head, _, last = at.rpartition(".")
    if last in ("messages", "contents"):
        return f"{head}.{key}" if head else key
    return None


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content, ensure_ascii=False)


def _image_from_url(url: Any, path: str, at: str) -> ImageBlock:
    if not isinstance(url, str):
        raise fail(
            path,
            None,
            f"an image URL must be a string, got {type(url).__name__}",
            "give the image as a URL or a data: URL string",
            at=at,
        )
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return ImageBlock(source=ImageSource(type="base64", media_type=media, data=data))
    return ImageBlock(source=ImageSource(type="url", url=url))


def _openai_parts(content: Any, path: str, at: str) -> Any:
    """OpenAI user/tool content: a string stays a string; parts become blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise fail(
            path,
            None,
            "message content must be a string or a list",
            "give it as text or a list of content parts",
            at=at,
        )
    blocks: list[ContentBlock] = []
    for k, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") == "image_url":
            img = part.get("image_url")
            url = img.get("url", "") if isinstance(img, dict) else img or ""
            blocks.append(_image_from_url(url, path, f"{at}.content[{k}]"))
        elif isinstance(part, dict) and "text" in part:
            blocks.append(TextBlock(text=str(part["text"])))
        else:
            blocks.append(TextBlock(text=json.dumps(part, ensure_ascii=False)))
    return blocks


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    # Chat Completions sends arguments as a JSON string, and models do emit broken JSON;
    # the raw string is kept so nothing is lost.
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return {"arguments": raw}, raw
        if isinstance(parsed, dict):
            return parsed, None
        return {"arguments": parsed}, raw
    return {}, None


def openai_messages(
    b: SessionBuilder,
    messages: Any,
    *,
    path: str,
    at: str,
    model: str = "",
    extra_keys: bool = True,
) -> None:
    """Append Chat Completions messages (also SWE-agent ``history``: ``tool_call_ids``).

    Keys a message has beyond the standard ones (SWE-agent's ``thought``, ``action``,
    …) go to the node's metadata under ``extra`` when ``extra_keys``.
    """
    if not isinstance(messages, list):
        raise fail(path, None, "expected a list of messages", "pass a message list", at=at)
    calls: dict[str, tuple[str, str, dict[str, Any]]] = {}  # call id -> (node, name, args)
    last: str | None = None
    standard = {"role", "content", "tool_calls", "tool_call_id", "tool_call_ids", "name"}
    for i, msg in enumerate(messages):
        where = f"{at}[{i}]"
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise fail(path, None, "a message without a 'role'", "fix the message", at=where)
        role = msg["role"]
        meta: dict[str, Any] = {"index": i}
        if extra_keys:
            extra = {k: v for k, v in msg.items() if k not in standard}
            if extra:
                meta["extra"] = extra
        if msg.get("name") and role != "tool":
            meta["name"] = msg["name"]
        content = msg.get("content")
        if role in ("system", "developer"):
            if role == "developer":
                meta["openai_role"] = role
            last = b.add(
                "system",
                "",
                pos=i,
                input=_text_of(content),
                predecessor=last,
                metadata=meta,
                at=where,
            )
        elif role == "user":
            last = b.add(
                "user",
                _openai_parts(content, path, where),
                pos=i,
                predecessor=last,
                metadata=meta,
                at=where,
            )
        elif role == "assistant":
            nid = b.node_id(f"{at}#{i}")
            blocks: list[ContentBlock] = []
            if content:
                blocks.extend(
                    [TextBlock(text=content)]
                    if isinstance(content, str)
                    else _openai_parts(content, path, where)
                )
            raw_args: dict[str, str] = {}
            for j, tc in enumerate(msg.get("tool_calls") or []):
                fn = tc.get("function") if isinstance(tc, dict) else None
                if not isinstance(fn, dict):
                    raise fail(
                        path,
                        None,
                        "a tool call without 'function'",
                        'each tool_calls entry needs {"function": {"name", "arguments"}}',
                        at=f"{where}.tool_calls[{j}]",
                    )
                cid = str(tc.get("id") or f"call_{i}_{j}")
                args, raw = _arguments(fn.get("arguments"))
                if raw is not None:
                    raw_args[cid] = raw
                name = str(fn.get("name", ""))
                blocks.append(ToolUseBlock(id=cid, name=name, input=args))
                calls[cid] = (nid, name, args)
            if raw_args:
                meta["raw_arguments"] = raw_args
            output: Any = blocks
            if not msg.get("tool_calls") and (content is None or isinstance(content, str)):
                output = content or ""
            last = b.add(
                "assistant",
                output,
                pos=i,
                local=f"{at}#{i}",
                name=model,
                predecessor=last,
                metadata=meta,
                at=where,
            )
        elif role == "tool":
            ids = msg.get("tool_call_ids")
            if ids is None:
                ids = [msg["tool_call_id"]] if msg.get("tool_call_id") is not None else []
            if not isinstance(ids, list) or not ids:
                raise fail(
                    path,
                    None,
                    "a tool message without tool_call_id",
                    "a role tool message names its call in tool_call_id (or tool_call_ids)",
                    at=where,
                )
            for cid in ids:
                call = calls.get(str(cid))
                if call is None:
                    raise fail(
                        path,
                        None,
                        f"tool result for {cid!r} has no tool call before it",
                        "the conversation is incomplete; import the full message list",
                        at=where,
                    )
                caller, name, args = call
                b.add(
                    "tool",
                    _openai_parts(content, path, where),
                    pos=i + 0.5,
                    name=str(msg.get("name") or name),
                    input=args,
                    caller=caller,
                    metadata={**meta, "tool_use_id": str(cid), "is_error": False},
                    at=where,
                )
        else:
            raise fail(
                path,
                None,
                f"unknown message role {role!r}",
                "expected system, developer, user, assistant or tool",
                at=where,
            )
    b.head = last


def anthropic_messages(
    b: SessionBuilder, system: Any, messages: Any, *, path: str, at: str, model: str = ""
) -> None:
    """Append an Anthropic Messages conversation (``system`` + ``messages``).

    A system given as blocks keeps them (``cache_control`` included) in the system
    node's metadata ``system_blocks``; its text is the node's ``input``.
    """
    if not isinstance(messages, list):
        raise fail(path, None, "expected a list of messages", "pass a message list", at=at)
    last: str | None = None
    if system:
        meta: dict[str, Any] = {}
        if isinstance(system, list):
            meta["system_blocks"] = system
        last = b.add(
            "system", "", pos=-1, input=_text_of(system), metadata=meta, at=_beside(at, "system")
        )
    uses: dict[str, tuple[str, dict[str, Any]]] = {}
    for i, msg in enumerate(messages):
        where = f"{at}[{i}]"
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            raise fail(
                path,
                None,
                "a message whose role is not user or assistant",
                "Anthropic messages alternate user and assistant",
                at=where,
            )
        content = msg.get("content", "")
        meta = {"index": i}
        if isinstance(content, str):
            last = b.add(
                msg["role"],
                content,
                pos=i,
                name=model if msg["role"] == "assistant" else "",
                predecessor=last,
                metadata=meta,
                at=where,
            )
            continue
        if not isinstance(content, list):
            raise fail(
                path,
                None,
                "content must be a string or a list of blocks",
                "give it as text or a list of content blocks",
                at=where,
            )
        if msg["role"] == "assistant":
            blocks = to_blocks(content, meta)
            last = b.add(
                "assistant", blocks, pos=i, name=model, predecessor=last, metadata=meta, at=where
            )
            for blk in content:
                if isinstance(blk, dict) and blk.get("type") == "tool_use":
                    uses[str(blk.get("id"))] = (last, blk)
            continue
        results, others = split_tool_results(content)
        for j, res in enumerate(results):
            tid = str(res.get("tool_use_id"))
            use = uses.get(tid)
            if use is None:
                raise fail(
                    path,
                    None,
                    f"tool_result for {tid!r} has no tool_use before it",
                    "the conversation is incomplete; import the full message list",
                    at=f"{where}.content",
                )
            rmeta: dict[str, Any] = {
                "index": i,
                "tool_use_id": tid,
                "is_error": bool(res.get("is_error", False)),
            }
            out = tool_result_output(res, rmeta)
            if "cache_control" in res:
                rmeta["cache_control"] = res["cache_control"]
            b.add(
                "tool",
                out,
                pos=i + j / 1000,
                name=str(use[1].get("name", "")),
                input=use[1].get("input"),
                caller=use[0],
                metadata=rmeta,
                at=f"{where}.content",
            )
        if others or not results:
            blocks = to_blocks(others, meta)
            last = b.add("user", blocks, pos=i + 0.9, predecessor=last, metadata=meta, at=where)
    b.head = last


def gemini_contents(
    b: SessionBuilder, system: Any, contents: Any, *, path: str, at: str, model: str = ""
) -> None:
    """Append a Gemini ``generateContent`` conversation (``systemInstruction`` + ``contents``).

    ``functionResponse`` parts pair with the ``functionCall`` of the same id (or, for
    requests without ids, the oldest unanswered call of that name).  A model part's
    ``thoughtSignature`` becomes ``ThinkingBlock(thinking="", signature=…,
    vendor="gemini")`` right before that part's block, so it reaches the commit and is
    sent back on the same part; a ``thought`` part (a thought summary) becomes
    ``ThinkingBlock(thinking=text, vendor="gemini")``, not text.  Each model node also
    keeps its raw parts in metadata ``gemini_parts``.
    """
    if not isinstance(contents, list):
        raise fail(
            path, None, "expected a list of contents", "pass generateContent contents", at=at
        )
    last: str | None = None
    if isinstance(system, dict):
        last = b.add(
            "system",
            "",
            pos=-1,
            input=_text_of(system.get("parts")),
            metadata={"gemini_parts": system.get("parts")},
            at=_beside(at, "systemInstruction"),
        )
    open_calls: list[tuple[str, str, str, dict[str, Any]]] = []  # (id, name, node, args)
    for i, content in enumerate(contents):
        where = f"{at}[{i}]"
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            raise fail(
                path, None, "a content without 'parts'", "each content needs a parts list", at=where
            )
        role = "assistant" if content.get("role") == "model" else "user"
        blocks: list[ContentBlock] = []
        responses = []
        nid = b.node_id(f"{at}#{i}")
        for j, part in enumerate(parts):
            if not isinstance(part, dict):
                raise fail(
                    path,
                    None,
                    "a part that is not an object",
                    'a part is an object such as {"text": ...}',
                    at=f"{where}.parts[{j}]",
                )
            sig = part.get("thoughtSignature")
            if (
                role == "assistant"
                and isinstance(sig, str)
                and sig
                and "functionResponse" not in part
            ):
                blocks.append(ThinkingBlock(thinking="", signature=sig, vendor="gemini"))
            if "functionCall" in part:
                fc = part["functionCall"] or {}
                cid = str(fc.get("id") or f"{fc.get('name')}_{i}_{j}")
                args: dict[str, Any] = fc["args"] if isinstance(fc.get("args"), dict) else {}
                blocks.append(ToolUseBlock(id=cid, name=str(fc.get("name", "")), input=args))
                open_calls.append((cid, str(fc.get("name", "")), nid, args))
            elif "functionResponse" in part:
                responses.append((j, part["functionResponse"] or {}))
            elif "inlineData" in part:
                data = part["inlineData"] or {}
                inline = data.get("data", "") if isinstance(data, dict) else data
                if not isinstance(inline, str):
                    raise fail(
                        path,
                        None,
                        f"inlineData.data must be base64 text, got {type(inline).__name__}",
                        "give the image bytes as a base64 string",
                        at=f"{where}.parts[{j}]",
                    )
                media = data.get("mimeType", "") if isinstance(data, dict) else ""
                blocks.append(ImageBlock(source=ImageSource(media_type=str(media), data=inline)))
            elif part.get("thought") is True and role == "assistant":
                # A thought summary: the model's reasoning, not text the user saw.
                blocks.append(ThinkingBlock(thinking=str(part.get("text", "")), vendor="gemini"))
            else:
                blocks.append(TextBlock(text=str(part.get("text", ""))))
        for j, fr in responses:
            fid, fname = fr.get("id"), fr.get("name")
            match = next((c for c in open_calls if fid and c[0] == fid), None) or next(
                (c for c in open_calls if not fid and c[1] == fname), None
            )
            if match is None:
                raise fail(
                    path,
                    None,
                    f"functionResponse {fid or fname!r} has no functionCall",
                    "the conversation is incomplete",
                    at=f"{where}.parts[{j}]",
                )
            open_calls.remove(match)
            b.add(
                "tool",
                json.dumps(fr.get("response"), ensure_ascii=False),
                pos=i + j / 1000,
                name=match[1],
                input=match[3],
                caller=match[2],
                metadata={"index": i, "tool_use_id": match[0], "is_error": False},
                at=f"{where}.parts[{j}]",
            )
        if blocks or not responses:
            last = b.add(
                role,
                blocks,
                pos=i + 0.9,
                local=f"{at}#{i}",
                name=model if role == "assistant" else "",
                predecessor=last,
                metadata={"index": i, "gemini_parts": parts},
                at=where,
            )
    b.head = last


#: Responses input items an assistant turn is made of (besides assistant messages).
_RESPONSES_TURN = ("function_call", "reasoning", "custom_tool_call", "compaction")


def _responses_parts(content: Any, path: str, at: str) -> Any:
    """Responses message content: a string stays a string; ``input_text`` /
    ``output_text`` parts become text, ``input_image`` an image, any other part is
    kept as its JSON text (see ``to_blocks``)."""
    if isinstance(content, str) or content is None:
        return content or ""
    if not isinstance(content, list):
        raise fail(path, None, "message content must be a string or a list", "fix the item", at=at)
    blocks: list[ContentBlock] = []
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and "text" in part:
            blocks.append(TextBlock(text=str(part["text"])))
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            blocks.append(_image_from_url(part["image_url"], path, f"{at}.content[{k}]"))
        else:
            blocks.append(TextBlock(text=json.dumps(part, ensure_ascii=False)))
    return blocks


def responses_items(
    b: SessionBuilder, instructions: Any, items: Any, *, path: str, at: str, model: str = ""
) -> None:
    """Append an OpenAI Responses conversation (``instructions`` + ``input`` items).

    A run of assistant items (an assistant message, ``function_call``, ``reasoning``)
    is one assistant node: messages give text, calls ``tool_use`` blocks (the
    arguments string parsed, kept raw in metadata ``raw_arguments`` when it is not
    an object), and an item of another type stays as its JSON (``to_blocks``, listed
    in ``converted_blocks``) so it is sent back as it came; the node keeps its raw
    items in metadata ``responses_items``.  Each ``function_call_output`` becomes a
    tool node under the node holding its call (``call_id``).  ``input`` given as a
    string is one user message.
    """
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise fail(path, None, "expected a list of input items", "pass Responses input", at=at)
    last: str | None = None
    if isinstance(instructions, str) and instructions:
        last = b.add("system", "", pos=-1, input=instructions, at=_beside(at, "instructions"))
    calls: dict[str, tuple[str, str, dict[str, Any]]] = {}
    turn: list[tuple[int, dict[str, Any]]] = []

    def close_turn() -> None:
        nonlocal last
        if not turn:
            return
        first = turn[0][0]
        nid = b.node_id(f"{at}#{first}")
        blocks: list[ContentBlock] = []
        meta: dict[str, Any] = {"index": first, "responses_items": [it for _, it in turn]}
        raw_args: dict[str, str] = {}
        for i, item in turn:
            kind = item.get("type", "message")
            if kind == "message":
                out = _responses_parts(item.get("content"), path, f"{at}[{i}]")
                blocks.extend([TextBlock(text=out)] if isinstance(out, str) and out else out or [])
            elif kind == "function_call":
                cid = str(item.get("call_id") or item.get("id") or f"call_{i}")
                args, raw = _arguments(item.get("arguments"))
                if raw is not None:
                    raw_args[cid] = raw
                name = str(item.get("name", ""))
                blocks.append(ToolUseBlock(id=cid, name=name, input=args))
                calls[cid] = (nid, name, args)
            else:
                blocks.extend(to_blocks([item], meta, offset=len(blocks)))
        if raw_args:
            meta["raw_arguments"] = raw_args
        last = b.add(
            "assistant",
            blocks,
            pos=first,
            local=f"{at}#{first}",
            name=model,
            predecessor=last,
            metadata=meta,
            at=f"{at}[{first}]",
        )
        turn.clear()

    for i, item in enumerate(items):
        where = f"{at}[{i}]"
        if not isinstance(item, dict):
            raise fail(path, None, "an input item that is not an object", "fix it", at=where)
        kind = item.get("type", "message")
        role = item.get("role")
        if (kind == "message" and role == "assistant") or kind in _RESPONSES_TURN:
            turn.append((i, item))
            continue
        close_turn()
        if kind in ("function_call_output", "custom_tool_call_output"):
            cid = str(item.get("call_id"))
            call = calls.get(cid)
            if call is None:
                raise fail(
                    path,
                    None,
                    f"function_call_output for {cid!r} has no function_call before it",
                    "the conversation is incomplete; import the full input",
                    at=where,
                )
            b.add(
                "tool",
                _responses_parts(item.get("output"), path, where),
                pos=i,
                name=call[1],
                input=call[2],
                caller=call[0],
                metadata={"index": i, "tool_use_id": cid, "is_error": False},
                at=where,
            )
        elif kind == "message" and role in ("system", "developer"):
            meta: dict[str, Any] = {"index": i}
            if role == "developer":
                meta["openai_role"] = role
            content = _responses_parts(item.get("content"), path, where)
            last = b.add(
                "system",
                "",
                pos=i,
                input=content if isinstance(content, str) else _text_of(item.get("content")),
                predecessor=last,
                metadata=meta,
                at=where,
            )
        elif kind == "message" and role == "user":
            last = b.add(
                "user",
                _responses_parts(item.get("content"), path, where),
                pos=i,
                predecessor=last,
                metadata={"index": i},
                at=where,
            )
        else:  # an item kind the model has no node for: kept whole, as user context
            meta = {"index": i}
            last = b.add(
                "user", to_blocks([item], meta), pos=i, predecessor=last, metadata=meta, at=where
            )
    close_turn()
    b.head = last
