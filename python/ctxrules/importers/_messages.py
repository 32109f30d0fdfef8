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
    CompactionBlock,
    ContentBlock,
    ImageBlock,
    ImageSource,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from ..providers.gemini import one_or_list
from ..providers.responses import tool_arguments
from ._common import (
    ImportedSession,
    SessionBuilder,
    fail,
    split_tool_results,
    to_blocks,
    tool_result_output,
)

__all__ = [
    "LIST_KEYS",
    "OUTPUT_ITEMS",
    "ResponsesReader",
    "anthropic_messages",
    "gemini_contents",
    "gemini_part_blocks",
    "openai_messages",
    "read_messages",
    "responses_items",
]


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
                args, raw = tool_arguments(fn.get("arguments"))
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


def _field(part: dict[str, Any], camel: str) -> Any:
    """A Gemini field by its REST name (``functionCall``) or its Python SDK name
    (``function_call``)."""
    if camel in part:
        return part[camel]
    return part.get("".join(f"_{c.lower()}" if c.isupper() else c for c in camel))


def _has(part: dict[str, Any], camel: str) -> bool:
    return camel in part or "".join(f"_{c.lower()}" if c.isupper() else c for c in camel) in part


def gemini_part_blocks(
    part: dict[str, Any], meta: dict[str, Any], offset: int, *, model: bool
) -> list[ContentBlock]:
    """The blocks of one Gemini part that is neither a ``functionCall`` nor a
    ``functionResponse`` (camelCase or snake_case alike).

    A model part's ``thoughtSignature`` becomes ``ThinkingBlock(thinking="",
    signature=…, vendor="gemini")`` right before the part's own block (so it is sent
    back on the same part); a model's ``thought`` part (a thought summary) is thinking,
    not text; ``inlineData`` / ``fileData`` are images (data or URI, with their MIME
    type); a part of another kind (``executableCode``, ``codeExecutionResult``, …) is
    its JSON text, the original in ``meta["converted_blocks"]`` (``offset``: the
    block's index).  ``offset`` counts the blocks before, for that index."""
    blocks: list[ContentBlock] = []
    sig = _field(part, "thoughtSignature")
    if model and isinstance(sig, str) and sig:
        blocks.append(ThinkingBlock(thinking="", signature=sig, vendor="gemini"))
    data = _field(part, "inlineData")
    files = _field(part, "fileData")
    if _has(part, "inlineData") and isinstance(data, dict):
        inline = data.get("data", "")
        if not isinstance(inline, str):
            raise ValueError(f"inlineData.data must be base64 text, got {type(inline).__name__}")
        media = str(_field(data, "mimeType") or "")
        blocks.append(ImageBlock(source=ImageSource(media_type=media, data=inline)))
    elif _has(part, "fileData") and isinstance(files, dict):
        uri = str(_field(files, "fileUri") or "")
        media = str(_field(files, "mimeType") or "")
        blocks.append(ImageBlock(source=ImageSource(type="url", url=uri, media_type=media)))
    elif model and part.get("thought") is True:
        blocks.append(ThinkingBlock(thinking=str(part.get("text", "")), vendor="gemini"))
    elif "text" in part:
        blocks.append(TextBlock(text=str(part.get("text") or "")))
    else:
        rest = {k: v for k, v in part.items() if k not in ("thoughtSignature", "thought_signature")}
        if rest:
            blocks.extend(to_blocks([rest], meta, offset=offset + len(blocks)))
        else:  # a signature-only part: the signature's block needs a part to ride on
            blocks.append(TextBlock(text=""))
    return blocks


def gemini_contents(
    b: SessionBuilder, system: Any, contents: Any, *, path: str, at: str, model: str = ""
) -> None:
    """Append a Gemini ``generateContent`` conversation (``systemInstruction`` + ``contents``),
    its parts in camelCase (REST) or snake_case (Google's Python SDK logs) alike.

    ``functionResponse`` parts pair with the ``functionCall`` of the same id (or, for
    requests without ids, the oldest unanswered call of that name); every other part
    is read by ``gemini_part_blocks`` (thought signatures, thoughts, images, text,
    other kinds kept as JSON).  Each node keeps its raw parts in metadata
    ``gemini_parts``.
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
            input=_text_of(one_or_list(system.get("parts"))),
            metadata={"gemini_parts": system.get("parts")},
            at=_beside(at, "systemInstruction"),
        )
    elif isinstance(system, str) and system:
        last = b.add("system", "", pos=-1, input=system, at=_beside(at, "systemInstruction"))
    open_calls: list[tuple[str, str, str, dict[str, Any]]] = []  # (id, name, node, args)
    for i, content in enumerate(contents):
        where = f"{at}[{i}]"
        sent = content.get("parts") if isinstance(content, dict) else None
        parts = one_or_list(sent) if isinstance(sent, dict) else sent
        if not isinstance(parts, list):
            raise fail(
                path, None, "a content without 'parts'", "each content needs a parts list", at=where
            )
        role = "assistant" if content.get("role") == "model" else "user"
        blocks: list[ContentBlock] = []
        responses = []
        meta: dict[str, Any] = {"index": i, "gemini_parts": sent}
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
            if _has(part, "functionCall"):
                sig = _field(part, "thoughtSignature")
                if role == "assistant" and isinstance(sig, str) and sig:
                    blocks.append(ThinkingBlock(thinking="", signature=sig, vendor="gemini"))
                fc = _field(part, "functionCall") or {}
                cid = str(fc.get("id") or f"{fc.get('name')}_{i}_{j}")
                args: dict[str, Any] = fc["args"] if isinstance(fc.get("args"), dict) else {}
                blocks.append(ToolUseBlock(id=cid, name=str(fc.get("name", "")), input=args))
                open_calls.append((cid, str(fc.get("name", "")), nid, args))
            elif _has(part, "functionResponse"):
                responses.append((j, _field(part, "functionResponse") or {}))
            else:
                try:
                    blocks.extend(
                        gemini_part_blocks(part, meta, len(blocks), model=role == "assistant")
                    )
                except ValueError as exc:
                    raise fail(
                        path,
                        None,
                        str(exc),
                        "give the image bytes as a base64 string",
                        at=f"{where}.parts[{j}]",
                    ) from None
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
                metadata=meta,
                at=where,
            )
    b.head = last


#: Responses item types a model outputs (with assistant messages, one assistant node).
OUTPUT_ITEMS = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "compaction",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "tool_search_call",
    }
)
_RESULTS = ("function_call_output", "custom_tool_call_output")


def _responses_parts(content: Any, path: str, at: str) -> Any:
    """Responses message content: a string stays a string; ``input_text`` /
    ``output_text`` parts become text (``refusal`` too), ``input_image`` an image, any
    other part is kept as its JSON text (see ``to_blocks``)."""
    if isinstance(content, str) or content is None:
        return content or ""
    if not isinstance(content, list):
        raise fail(path, None, "message content must be a string or a list", "fix the item", at=at)
    blocks: list[ContentBlock] = []
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        image = part.get("image_url") if isinstance(part, dict) else None
        if isinstance(image, dict):
            image = image.get("url")
        if kind in ("input_text", "output_text", "text") and "text" in part:
            blocks.append(TextBlock(text=str(part["text"])))
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            blocks.append(TextBlock(text=part["refusal"]))
        elif kind == "input_image" and isinstance(image, str):
            blocks.append(_image_from_url(image, path, f"{at}.content[{k}]"))
        else:
            blocks.append(TextBlock(text=json.dumps(part, ensure_ascii=False)))
    return blocks


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _reasoning(item: dict[str, Any]) -> ThinkingBlock:
    """A ``reasoning`` item as thinking of vendor ``openai``: its summary texts (or its
    ``content`` texts) and its ``encrypted_content`` as the opaque signature."""
    texts = [
        str(x["text"])
        for key in ("summary", "content")
        for x in _list(item.get(key))
        if isinstance(x, dict) and isinstance(x.get("text"), str)
    ]
    state = item.get("encrypted_content")
    signature = state if isinstance(state, str) else ""
    return ThinkingBlock(thinking="\n".join(texts), signature=signature, vendor="openai")


class ResponsesReader:
    """OpenAI Responses items into a ``SessionBuilder``, one at a time, in order: a
    request's ``input``, a response's ``output``, a Codex rollout's ``response_item``s.

    * A run of output items — an assistant ``message``, ``reasoning``,
      ``function_call``, ``custom_tool_call``, ``compaction``, server-side tool calls
      (``web_search_call``, …: ``OUTPUT_ITEMS``) — is one assistant node, one
      response: a message gives text, a ``function_call`` a ``ToolUseBlock`` (its
      arguments decoded; text that is no JSON object kept in metadata
      ``raw_arguments``), a ``custom_tool_call`` a ``ToolUseBlock`` whose input is
      ``{"input": …}``, ``reasoning`` a ``ThinkingBlock`` of vendor ``"openai"`` (the
      summary texts; ``encrypted_content`` as the opaque signature, sent back to OpenAI
      only), ``compaction`` a ``CompactionBlock(vendor="openai")``, any other item its
      JSON text (``to_blocks``, listed in ``converted_blocks``).
    * A ``function_call_output`` / ``custom_tool_call_output`` is a tool node under
      the node holding its call; the conversation goes on from that node.
    * A ``system`` / ``developer`` message is a system node (``openai_role`` says
      which), a ``user`` message (or a bare string) a user node, an item of any other
      kind a user node holding its JSON text.

    Every node keeps the items it was made of, exactly as recorded, in metadata
    ``responses_items``, and the index of its first item in ``index``.  ``last`` is the
    node the next one continues from; ``model`` names the assistant nodes (change it
    between items: a model switch); ``close()`` ends the open assistant node (a new
    response starts with the next output item).  A result whose call was not read is an
    error, unless ``item(..., orphan_ok=True)``: then it is a user node holding its JSON
    (metadata ``orphan_call_id``), as a request chained on a response the recording
    lacks sends it.
    """

    def __init__(self, b: SessionBuilder, path: str, *, model: str = ""):
        self.b = b
        self.path = path
        self.model = model
        self.last: str | None = None
        self.open: str | None = None
        self.calls: dict[str, tuple[str, str, dict[str, Any]]] = {}

    def close(self) -> str | None:
        """End the open assistant node; returns it (``None``: none was open)."""
        node, self.open = self.open, None
        return node

    def item(
        self,
        raw: Any,
        *,
        pos: float,
        index: int | None = None,
        local: str | None = None,
        at: str | None = None,
        line: int | None = None,
        created_at: float = 0.0,
        orphan_ok: bool = False,
    ) -> str:
        """Take in one item (``pos`` orders it, ``index`` goes to the metadata, ``local``
        names the assistant node it may open, ``at`` / ``line`` say where it is);
        returns the node it went to."""
        where: dict[str, Any] = {"line": line} if line is not None else {"at": at}
        if isinstance(raw, str):
            raw = {"role": "user", "content": raw}
        if not isinstance(raw, dict):
            raise fail(self.path, line, "an input item that is not an object", "fix it", at=at)
        kind = raw.get("type", "message")
        role = raw.get("role")
        meta: dict[str, Any] = {} if index is None else {"index": index}
        meta["responses_items"] = [raw]
        common: dict[str, Any] = {"pos": pos, "created_at": created_at, **where}
        if (kind == "message" and role == "assistant") or kind in OUTPUT_ITEMS:
            return self._output(raw, kind, meta, local, common)
        self.close()
        if kind in _RESULTS:
            cid = str(raw.get("call_id"))
            call = self.calls.get(cid)
            if call is not None:
                return self.b.add(
                    "tool",
                    _responses_parts(raw.get("output"), self.path, at or ""),
                    name=call[1],
                    input=call[2],
                    caller=call[0],
                    metadata={**meta, "tool_use_id": cid, "is_error": False},
                    **common,
                )
            if not orphan_ok:
                raise fail(
                    self.path,
                    line,
                    f"{kind} for {cid!r} has no {kind.removesuffix('_output')} before it",
                    "the conversation is incomplete; import the full input",
                    at=at,
                )
            meta["orphan_call_id"] = cid
        if kind == "message" and role in ("system", "developer"):
            if role == "developer":
                meta["openai_role"] = role
            content = _responses_parts(raw.get("content"), self.path, at or "")
            text = content if isinstance(content, str) else _text_of(raw.get("content"))
            self.last = self.b.add(
                "system", "", input=text, predecessor=self.last, metadata=meta, **common
            )
        elif kind == "message" and role == "user":
            self.last = self.b.add(
                "user",
                _responses_parts(raw.get("content"), self.path, at or ""),
                predecessor=self.last,
                metadata=meta,
                **common,
            )
        else:  # an item kind the model has no node for: kept whole, as user context
            self.last = self.b.add(
                "user", to_blocks([raw], meta), predecessor=self.last, metadata=meta, **common
            )
        return self.last

    def _output(
        self,
        raw: dict[str, Any],
        kind: str,
        meta: dict[str, Any],
        local: str | None,
        common: dict[str, Any],
    ) -> str:
        if self.open is None:
            self.open = self.b.add(
                "assistant",
                [],
                local=local,
                name=self.model,
                predecessor=self.last,
                metadata={**meta, "responses_items": []},
                **common,
            )
            self.last = self.open
        fields = self.b.get(self.open)
        node_meta, blocks = fields["metadata"], fields["output"]
        node_meta["responses_items"].append(raw)
        if kind == "message":
            out = _responses_parts(raw.get("content"), self.path, str(common.get("at") or ""))
            blocks.extend([TextBlock(text=out)] if isinstance(out, str) and out else out or [])
        elif kind == "reasoning":
            blocks.append(_reasoning(raw))
        elif kind in ("function_call", "custom_tool_call"):
            cid = str(raw.get("call_id") or raw.get("id") or f"call_{len(self.calls)}")
            name = str(raw.get("name", ""))
            if kind == "function_call":
                args, text = tool_arguments(raw.get("arguments"))
                if text is not None:
                    node_meta.setdefault("raw_arguments", {})[cid] = text
            else:
                args = {"input": raw.get("input", "")}
            blocks.append(ToolUseBlock(id=cid, name=name, input=args))
            self.calls[cid] = (self.open, name, args)
        elif kind == "compaction" and isinstance(raw.get("encrypted_content"), str):
            blocks.append(
                CompactionBlock(
                    encrypted_content=raw["encrypted_content"],
                    id=str(raw.get("id") or ""),
                    vendor="openai",
                )
            )
        else:
            blocks.extend(to_blocks([raw], node_meta, offset=len(blocks)))
        return self.open


def responses_items(
    b: SessionBuilder,
    instructions: Any,
    items: Any,
    *,
    path: str,
    at: str,
    model: str = "",
    orphan_ok: bool = False,
) -> None:
    """Append an OpenAI Responses conversation (``instructions`` + ``input`` items) with
    a ``ResponsesReader``: ``instructions`` is the first node, a system node; ``input``
    given as a string is one user message."""
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise fail(path, None, "expected a list of input items", "pass Responses input", at=at)
    reader = ResponsesReader(b, path, model=model)
    if isinstance(instructions, str) and instructions:
        where = _beside(at, "instructions")
        reader.last = b.add("system", "", pos=-1, input=instructions, at=where)
    for i, item in enumerate(items):
        reader.item(item, pos=i, index=i, local=f"{at}#{i}", at=f"{at}[{i}]", orphan_ok=orphan_ok)
    reader.close()
    b.head = reader.last


#: Where each wire's message list is in a request body.
LIST_KEYS = {
    "anthropic": "messages",
    "openai-chat": "messages",
    "openai-responses": "input",
    "gemini": "contents",
}


def read_messages(wire: str, messages: list[Any], system: Any = None) -> ImportedSession:
    """A message list of ``wire`` (``LIST_KEYS``: Anthropic ``messages``, OpenAI Chat
    ``messages``, Responses ``input`` items, Gemini ``contents``) and its system prompt
    given apart, read into one session's nodes with the readers above (nothing is
    stored).  ``ImportedSession.origins`` names each node's message (``messages[3]``)."""
    b = SessionBuilder("messages", "<messages>", wire)
    at = LIST_KEYS[wire]
    if wire == "openai-chat":
        openai_messages(b, messages, path="<messages>", at=at, extra_keys=False)
    elif wire == "anthropic":
        anthropic_messages(b, system, messages, path="<messages>", at=at)
    elif wire == "openai-responses":
        responses_items(b, system, messages, path="<messages>", at=at)
    else:
        gemini_contents(b, system, messages, path="<messages>", at=at)
    return b.build()
