"""What the corpus files hold, read with the standard library and PyYAML only (no
ctxrules code): the oracle of the corpus importer tests.

Each reader follows the format as its writer defines it (the recorders, Claude Code,
Codex, Gemini CLI), written here a second time on purpose: a count the importer gets
wrong cannot be confirmed by the importer's own reading of the file.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml


class AnyTagLoader(yaml.SafeLoader):
    """PyYAML's safe loader, reading Ruby's ``!binary`` as bytes and a Python-tagged
    one-string call (aiohttp's ``istr("Accept")`` header names) as the string."""


def _binary(loader: yaml.SafeLoader, node: yaml.Node) -> bytes:
    return loader.construct_yaml_binary(node)  # type: ignore[no-any-return]


def _python(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.SequenceNode) and len(node.value) == 1:
        return loader.construct_scalar(node.value[0])  # type: ignore[arg-type]
    raise yaml.constructor.ConstructorError(None, None, f"unexpected {suffix}", node.start_mark)


AnyTagLoader.add_constructor("!binary", _binary)
AnyTagLoader.add_multi_constructor("tag:yaml.org,2002:python/", _python)


# -- recorded HTTP traffic ---------------------------------------------------------------


def _first(headers: Any, name: str) -> str:
    for key, value in (headers or {}).items():
        if str(key).lower() == name:
            return str(value[0] if isinstance(value, list) else value)
    return ""


def _body(part: dict[str, Any]) -> Any:
    if "parsed_body" in part:
        return part["parsed_body"]
    body = part.get("body", part.get("content"))
    return body.get("string") if isinstance(body, dict) else body


def _httprr(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    head = b"httprr trace v1\n"
    assert data.startswith(head)
    pos, out = len(head), []
    while pos < len(data):
        end = data.index(b"\n", pos)
        nreq, nres = (int(x) for x in data[pos:end].split())
        req, res = data[end + 1 : end + 1 + nreq], data[end + 1 + nreq : end + 1 + nreq + nres]
        pos = end + 1 + nreq + nres
        req_head, _, req_body = req.partition(b"\r\n\r\n")
        res_head, _, res_body = res.partition(b"\r\n\r\n")
        lines = res_head.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        out.append(
            {
                "uri": req_head.decode().split("\r\n")[0].split(" ")[1],
                "request": req_body,
                "request_headers": {},
                "response": res_body,
                "response_headers": headers,
            }
        )
    return out


def exchanges(path: Path) -> list[dict[str, Any]]:
    """Every exchange of a cassette or trace: uri, request and response bodies as
    recorded, the response's headers."""
    if path.read_bytes().startswith(b"httprr trace v1\n"):
        return _httprr(path)
    doc = yaml.load(path.read_text(encoding="utf-8"), Loader=AnyTagLoader)
    items = doc.get("interactions", doc.get("http_interactions"))
    return [
        {
            "uri": it["request"]["uri"],
            "request": _body(it["request"]),
            "request_headers": it["request"].get("headers") or {},
            "response": _body(it["response"]),
            "response_headers": it["response"].get("headers") or {},
        }
        for it in items
    ]


def text_of(body: Any, headers: Any) -> str | None:
    """A recorded body as text: decoded JSON as it is re-encoded, bytes un-gzipped."""
    if body is None:
        return None
    if isinstance(body, (dict, list)):
        return json.dumps(body)
    raw = body if isinstance(body, bytes) else body.encode()
    encoding = _first(headers, "content-encoding").lower()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    elif encoding == "deflate" and not raw.lstrip().startswith((b"{", b"[", b"data:", b"event:")):
        raw = zlib.decompress(raw)
    return raw.decode("utf-8", "replace")  # telemetry and uploads are binary


_NOT_CALLS = ("count_tokens", "counttokens", "embeddings", "embedcontent")


def wire(uri: str, body: Any) -> str | None:
    """The API a request calls, by its URL path, else by its body."""
    if not isinstance(body, dict):
        return None
    path = urlsplit(uri).path.rstrip("/")
    if path.lower().endswith(_NOT_CALLS):
        return None
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    if path.endswith("/messages"):
        return "anthropic"
    if isinstance(body.get("contents"), list):
        return "gemini"
    if isinstance(body.get("messages"), list):
        return "anthropic" if "system" in body else "openai-chat"
    if "model" in body and "input" in body:
        return "openai-responses"
    return None


def has_conversation(kind: str, body: dict[str, Any]) -> bool:
    key = {"gemini": "contents", "openai-responses": "input"}.get(kind, "messages")
    value = body.get(key)
    return isinstance(value, list) or (kind == "openai-responses" and isinstance(value, str))


def sse_data(text: str) -> Iterator[Any]:
    """The JSON of every ``data:`` line of a stream."""
    for line in text.splitlines():
        if line.startswith("data:"):
            try:
                yield json.loads(line[5:].strip())
            except ValueError:
                continue


_PROMPT = {
    "anthropic": "input_tokens",
    "openai-chat": "prompt_tokens",
    "openai-responses": "input_tokens",
}


def billed_prompt(kind: str, text: str | None) -> int | None:
    """The prompt tokens the response says were billed (the vendor's own field), read
    from a JSON body, a Gemini JSON array or a stream."""
    if not text or not text.strip():
        return None
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        chunks = value if isinstance(value, list) else [value] if value is not None else []
    else:
        chunks = list(sse_data(text))
    found = None
    for c in chunks:
        if not isinstance(c, dict):
            continue
        if kind == "gemini":
            u = c.get("usageMetadata")
            if isinstance(u, dict) and "promptTokenCount" in u:
                found = u["promptTokenCount"]
        elif kind == "anthropic":
            for u in (c.get("usage"), (c.get("message") or {}).get("usage")):
                if isinstance(u, dict) and u.get("input_tokens") is not None:
                    found = u["input_tokens"]  # message_delta's replaces message_start's
        elif kind == "openai-responses":
            r = c.get("response") if isinstance(c.get("response"), dict) else c
            u = r.get("usage")
            if isinstance(u, dict) and "input_tokens" in u:
                found = u["input_tokens"]
        else:
            u = c.get("usage") or (c.get("x_groq") or {}).get("usage")
            if isinstance(u, dict) and "prompt_tokens" in u:
                found = u["prompt_tokens"]
    return found


def request_tool_calls(kind: str, body: dict[str, Any]) -> int:
    """How many tool calls a request body's conversation holds."""
    if kind == "anthropic":
        return sum(
            1
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"
        )
    if kind == "openai-chat":
        return sum(len(m.get("tool_calls") or []) for m in body["messages"])
    if kind == "gemini":
        return sum(
            1
            for c in body["contents"]
            for p in c.get("parts", [])
            if "functionCall" in p or "function_call" in p
        )
    items = body["input"] if isinstance(body["input"], list) else []
    return sum(
        1
        for it in items
        if isinstance(it, dict) and it.get("type") in ("function_call", "custom_tool_call")
    )


def calls(path: Path) -> list[dict[str, Any]]:
    """The model calls of a recording: exchanges to one of the four APIs whose request
    body is a JSON object holding a conversation, with what the response billed."""
    out = []
    for i, ex in enumerate(exchanges(path)):
        text = text_of(ex["request"], ex["request_headers"])
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = None
        kind = wire(ex["uri"], body)
        if kind is None or not has_conversation(kind, body):
            continue
        billed = billed_prompt(kind, text_of(ex["response"], ex["response_headers"]))
        out.append({"index": i, "wire": kind, "body": body, "uri": ex["uri"], "billed": billed})
    return out


# -- agent transcripts ----------------------------------------------------------------


def json_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of a JSONL file; a line holding several objects back to
    back gives each."""
    out = []
    dec = json.JSONDecoder()
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        pos, line = 0, line.strip()
        while pos < len(line):
            value, pos = dec.raw_decode(line, pos)
            out.append((no, value))
    return out


def glued_lines(path: Path) -> list[int]:
    """The lines of a JSONL file holding more than one object."""
    numbers = [no for no, _ in json_lines(path)]
    return sorted({n for n in numbers if numbers.count(n) > 1})


def claude_code(path: Path) -> dict[str, Any]:
    """What a Claude Code transcript holds: its API requests (message id → usage and
    model, sub-agents' included), tool calls and results, sub-agents (agentId → the
    Task call that started it), compaction boundaries and models."""
    requests: dict[str, dict[str, Any]] = {}
    tool_uses: set[str] = set()
    results: set[str] = set()
    agents: dict[str, str | None] = {}
    boundaries: list[dict[str, Any]] = []
    uuids: set[str] = set()
    summaries: list[str] = []

    def message(entry: dict[str, Any]) -> None:
        msg = entry.get("message") or {}
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        if entry.get("type") == "assistant":
            model = msg.get("model")
            if msg.get("usage") and model != "<synthetic>":
                requests[msg["id"]] = {"usage": msg["usage"], "model": model}
            tool_uses.update(b["id"] for b in blocks if b.get("type") == "tool_use")
        elif entry.get("type") == "user":
            results.update(b["tool_use_id"] for b in blocks if b.get("type") == "tool_result")

    for _, entry in json_lines(path):
        if isinstance(entry.get("uuid"), str):
            uuids.add(entry["uuid"])
        kind = entry.get("type")
        if kind in ("user", "assistant"):
            message(entry)
            if entry.get("isCompactSummary"):
                summaries.append(entry["message"]["content"])
            if entry.get("isSidechain") and entry.get("parentUuid") is None:
                agents.setdefault(entry.get("agentId") or entry["uuid"], None)
        elif kind == "progress" and (entry.get("data") or {}).get("type") == "agent_progress":
            data = entry["data"]
            message(data["message"])
            agents.setdefault(data["agentId"], entry.get("parentToolUseID"))
        elif kind == "system" and entry.get("subtype") == "compact_boundary":
            boundaries.append(entry)
    return {
        "requests": requests,
        "tool_uses": tool_uses,
        "results": results,
        "agents": agents,
        "boundaries": boundaries,
        "uuids": uuids,
        "summaries": summaries,
        "models": {r["model"] for r in requests.values()},
    }


def codex(path: Path) -> dict[str, Any]:
    """What a Codex rollout holds: the prompt tokens of each request (a token_count
    snapshot that is not a repeat of the one before), tool calls and outputs,
    compactions and the models of its turns."""
    prompts: list[int] = []
    last_total = None
    calls_, outputs, compacted = 0, 0, 0
    models: set[str] = set()
    for _, rec in json_lines(path):
        p = rec.get("payload") or {}
        if rec["type"] == "event_msg" and p.get("type") == "token_count" and p.get("info"):
            total = p["info"].get("total_token_usage")
            if total != last_total:
                prompts.append(p["info"]["last_token_usage"]["input_tokens"])
            last_total = total
        elif rec["type"] == "response_item":
            calls_ += p.get("type") in ("function_call", "custom_tool_call")
            outputs += p.get("type") in ("function_call_output", "custom_tool_call_output")
        elif rec["type"] == "compacted":
            compacted += 1
        elif rec["type"] == "turn_context" and p.get("model"):
            models.add(p["model"])
    return {
        "prompts": prompts,
        "calls": calls_,
        "outputs": outputs,
        "compacted": compacted,
        "models": models,
    }


def gemini_cli(path: Path) -> dict[str, Any]:
    """What a Gemini CLI session file (JSON) holds: the prompt tokens of each model
    answer (a model message after a user message or after a model message that called
    tools; one after a model message that called none is the rest of that answer, the
    CLI having started a new message after a notice), tool calls and answered ones,
    and its notices."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    model = [m for m in doc["messages"] if m["type"] == "gemini"]
    calls_ = [c for m in model for c in m.get("toolCalls") or []]
    answers: list[list[dict[str, Any]]] = []
    previous = None
    for m in doc["messages"]:
        if m["type"] == "gemini":
            if (
                previous is not None
                and previous["type"] == "gemini"
                and not any(x.get("toolCalls") for x in answers[-1])
            ):
                answers[-1].append(m)
            else:
                answers.append([m])
        if m["type"] in ("user", "gemini"):
            previous = m
    prompts = []
    for answer in answers:
        measured = [m["tokens"] for m in answer if m.get("tokens")]
        if measured:
            prompts.append(next((t for t in measured if t["input"]), measured[0])["input"])
    return {
        "prompts": prompts,
        "turns": sum(m["type"] == "user" for m in doc["messages"]) + len(answers),
        "calls": len(calls_),
        "answered": sum(c.get("result") is not None for c in calls_),
        "conversation": sum(m["type"] in ("user", "gemini") for m in doc["messages"]),
        "notices": [m["type"] for m in doc["messages"] if m["type"] not in ("user", "gemini")],
        "models": {m["model"] for m in model if m.get("model")},
    }
