"""Fake vendors for the tests that run agent code end to end: how each vendor streams an
answer (its documented events, built from a whole answer), and a ``responder`` for
``loopback.Loopback`` that answers each wire's request like a model that calls a tool
once and then answers — Anthropic Messages, OpenAI Chat Completions and Responses,
Gemini — streamed when the request asks for a stream."""

from __future__ import annotations

import json
from typing import Any

from loopback import Reply, Seen


def anthropic_events(msg: dict[str, Any]) -> list[tuple[str, Any]]:
    start = dict(msg, content=[], stop_reason=None, stop_sequence=None)
    start["usage"] = dict(msg["usage"], output_tokens=1)
    events: list[tuple[str, Any]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(msg["content"]):
        kind = block["type"]
        if kind == "text":
            first, deltas = (
                {"type": "text", "text": ""},
                [
                    {"type": "text_delta", "text": block["text"][j : j + 7]}
                    for j in range(0, len(block["text"]), 7)
                ],
            )
        elif kind == "tool_use":
            raw = json.dumps(block["input"])
            first = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": raw[j : j + 5]}
                for j in range(0, len(raw), 5)
            ]
        elif kind == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        else:
            first, deltas = block, []
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": first},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        if i == 0:
            events.append(("ping", {"type": "ping"}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": msg["usage"]["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def chat_chunks(body: dict[str, Any]) -> list[tuple[str, Any]]:
    head = {k: body[k] for k in ("id", "created", "model") if k in body}
    head["object"] = "chat.completion.chunk"
    msg = body["choices"][0]["message"]
    out: list[tuple[str, Any]] = []

    def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
        out.append(
            ("", {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )

    chunk({"role": "assistant", "content": ""})
    text = msg.get("content") or ""
    for j in range(0, len(text), 6):
        chunk({"content": text[j : j + 6]})
    for n, call in enumerate(msg.get("tool_calls") or []):
        args = call["function"]["arguments"]
        chunk(
            {
                "tool_calls": [
                    {
                        "index": n,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        for j in range(0, len(args), 4):
            chunk({"tool_calls": [{"index": n, "function": {"arguments": args[j : j + 4]}}]})
    chunk({}, body["choices"][0]["finish_reason"])
    out.append(("", {**head, "choices": [], "usage": body["usage"]}))
    out.append(("", "[DONE]"))
    return out


RESPONSES_ANSWER: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-4o-2024-08-06",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Two files.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "ls",
            "arguments": '{"path": "src"}',
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 64},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 140,
    },
}


def responses_events(body: dict[str, Any]) -> list[tuple[str, Any]]:
    seq = iter(range(1000))
    created = dict(body, status="in_progress", output=[], usage=None)
    ev: list[tuple[str, Any]] = [
        (
            "response.created",
            {"type": "response.created", "response": created, "sequence_number": next(seq)},
        )
    ]
    for i, item in enumerate(body["output"]):
        empty = dict(item, status="in_progress")
        if item["type"] == "message":
            empty["content"] = []
        else:
            empty["arguments"] = ""
        ev.append(
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "item": empty,
                    "sequence_number": next(seq),
                },
            )
        )
        if item["type"] == "message":
            part = item["content"][0]
            ev.append(
                (
                    "response.content_part.added",
                    {
                        "type": "response.content_part.added",
                        "item_id": item["id"],
                        "output_index": i,
                        "content_index": 0,
                        "part": dict(part, text=""),
                        "sequence_number": next(seq),
                    },
                )
            )
            ev.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": i,
                        "content_index": 0,
                        "delta": part["text"],
                        "logprobs": [],
                        "sequence_number": next(seq),
                    },
                )
            )
            ev.append(
                (
                    "response.output_text.done",
                    {
                        "type": "response.output_text.done",
                        "item_id": item["id"],
                        "output_index": i,
                        "content_index": 0,
                        "text": part["text"],
                        "logprobs": [],
                        "sequence_number": next(seq),
                    },
                )
            )
            ev.append(
                (
                    "response.content_part.done",
                    {
                        "type": "response.content_part.done",
                        "item_id": item["id"],
                        "output_index": i,
                        "content_index": 0,
                        "part": part,
                        "sequence_number": next(seq),
                    },
                )
            )
        else:
            ev.append(
                (
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": i,
                        "delta": item["arguments"],
                        "sequence_number": next(seq),
                    },
                )
            )
            ev.append(
                (
                    "response.function_call_arguments.done",
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": item["id"],
                        "name": item["name"],
                        "output_index": i,
                        "arguments": item["arguments"],
                        "sequence_number": next(seq),
                    },
                )
            )
        ev.append(
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "output_index": i,
                    "item": item,
                    "sequence_number": next(seq),
                },
            )
        )
    ev.append(
        (
            "response.completed",
            {"type": "response.completed", "response": body, "sequence_number": next(seq)},
        )
    )
    return ev


def gemini_chunks(body: dict[str, Any]) -> list[tuple[str, Any]]:
    cand = body["candidates"][0]
    parts = cand["content"]["parts"]
    out = []
    usage = dict(body["usageMetadata"])
    for n, part in enumerate(parts):
        pieces = (
            [
                dict(part, text=part["text"][: len(part["text"]) // 2]),
                {"text": part["text"][len(part["text"]) // 2 :]},
            ]
            if "text" in part and len(part["text"]) > 1 and set(part) == {"text"}
            else [part]
        )
        for piece in pieces:
            chunk = {
                "candidates": [{"content": {"role": "model", "parts": [piece]}, "index": 0}],
                "usageMetadata": {"promptTokenCount": usage["promptTokenCount"]},
                "modelVersion": body.get("modelVersion"),
                "responseId": body.get("responseId"),
            }
            out.append(("", chunk))
        if n == len(parts) - 1:
            out[-1][1]["candidates"][0]["finishReason"] = cand["finishReason"]
            out[-1][1]["usageMetadata"] = usage
    return out


# -- a model that calls one tool, then answers ----------------------------------------

#: The tool the fake model calls first, and the text of its final answer.
TOOL, ARGS, FINAL = "ls", {"path": "."}, "There are two files: a.py and b.py."
USAGE = {"prompt": 120, "output": 12}


def _anthropic(body: dict[str, Any]) -> dict[str, Any]:
    last = (body.get("messages") or [{}])[-1].get("content")
    answered = isinstance(last, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in last
    )
    content = (
        [{"type": "text", "text": FINAL}]
        if answered
        else [{"type": "tool_use", "id": "toolu_1", "name": TOOL, "input": ARGS}]
    )
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-sonnet-4-5"),
        "content": content,
        "stop_reason": "end_turn" if answered else "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": USAGE["prompt"],
            "output_tokens": USAGE["output"],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def _chat(body: dict[str, Any]) -> dict[str, Any]:
    answered = any(m.get("role") == "tool" for m in body.get("messages") or [])
    message: dict[str, Any] = {"role": "assistant", "content": FINAL if answered else None}
    if not answered:
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": TOOL, "arguments": json.dumps(ARGS)},
            }
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": body.get("model", "gpt-4o"),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "stop" if answered else "tool_calls"}
        ],
        "usage": {
            "prompt_tokens": USAGE["prompt"],
            "completion_tokens": USAGE["output"],
            "total_tokens": USAGE["prompt"] + USAGE["output"],
        },
    }


def _responses(body: dict[str, Any]) -> dict[str, Any]:
    items = body.get("input") if isinstance(body.get("input"), list) else []
    answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
    output: list[dict[str, Any]] = (
        [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": FINAL, "annotations": []}],
            }
        ]
        if answered
        else [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": TOOL,
                "arguments": json.dumps(ARGS),
                "status": "completed",
            }
        ]
    )
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": body.get("model", "gpt-4o"),
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": USAGE["prompt"],
            "output_tokens": USAGE["output"],
            "total_tokens": USAGE["prompt"] + USAGE["output"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _gemini(body: dict[str, Any], model: str) -> dict[str, Any]:
    last = (body.get("contents") or [{}])[-1]
    answered = any("functionResponse" in p for p in last.get("parts") or [])
    part = {"text": FINAL} if answered else {"functionCall": {"name": TOOL, "args": ARGS}}
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": USAGE["prompt"],
            "candidatesTokenCount": USAGE["output"],
            "totalTokenCount": USAGE["prompt"] + USAGE["output"],
        },
        "modelVersion": model,
        "responseId": "r1",
    }


def responder(seen: Seen) -> Reply:
    """The reply of the wire ``seen.path`` names (404 for any other path)."""
    body = seen.body if isinstance(seen.body, dict) else {}
    path = seen.path.split("?")[0]
    if path.endswith("/messages"):
        msg = _anthropic(body)
        return Reply(events=anthropic_events(msg)) if body.get("stream") else Reply(msg)
    if path.endswith("/chat/completions"):
        chat = _chat(body)
        return Reply(events=chat_chunks(chat)) if body.get("stream") else Reply(chat)
    if path.endswith("/responses"):
        resp = _responses(body)
        return Reply(events=responses_events(resp)) if body.get("stream") else Reply(resp)
    if ":generateContent" in path or ":streamGenerateContent" in path:
        model = path.rsplit("/models/", 1)[-1].split(":")[0]
        answer = _gemini(body, model)
        stream = ":streamGenerateContent" in path
        return Reply(events=gemini_chunks(answer)) if stream else Reply(answer)
    return Reply({"error": {"message": f"no such path {path}"}}, status=404)


def vendor_env(url: str) -> dict[str, str]:
    """The environment that points each official SDK at the loopback server ``url``
    (their documented base-URL variables), with test keys and tracing off."""
    return {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "test-key",
        "OPENAI_BASE_URL": url + "/v1",
        "OPENAI_API_KEY": "test-key",
        "GOOGLE_GEMINI_BASE_URL": url,
        "GEMINI_API_KEY": "test-key",
        "GOOGLE_API_KEY": "test-key",
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
