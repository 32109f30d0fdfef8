"""OpenAI Responses: ``POST /v1/responses``.

The body is written in Rust (``wire = "openai-responses"``); this module adds usage
parsing, the prompt-too-long error, the structural validator and the billed-prompt
estimate (``estimate_openai_responses``, framed as the Chat Completions messages).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .base import PromptTooLong, Provider, RequestOptions, Usage
from .cache import OPENAI_CACHE_MIN_TOKENS, OPENAI_CACHE_STEP_TOKENS
from .estimate import EstimateFrame, PromptEstimate, SegmentBuilder, compact_json, wire_tools
from .models import ModelProfile
from .openai_chat import (
    OPENAI_MESSAGE_TOKENS,
    OPENAI_REPLY_TOKENS,
    OPENAI_TOOL_CALL_TOKENS,
    openai_frame,
    openai_framing,
    openai_output_schema,
    openai_parts,
    openai_prompt_too_long,
    openai_tools,
    openai_usage,
)

__all__ = [
    "COMPACTION_STATE",
    "RESPONSES_TITLES",
    "SERVER_TOOLS",
    "OpenAIResponsesProvider",
    "compaction_item_tokens",
    "estimate_openai_responses",
    "openai_responses_frame",
    "reasoning_item_tokens",
    "validate_openai_responses",
]

_MESSAGE_ROLES = {"user", "assistant", "system", "developer"}

#: Whether a model reads the titles of a Responses function tool's parameters: the
#: profile's ``responses_titles``, ``"none"`` by default; ``"comment"`` on the GPT-4o /
#: 4.1 models, whose Responses bills grow by each title as a ``// title`` line (the fit
#: set's requests with pydantic titles: 8 … 30 tokens over the untitled declarations,
#: within 1 of their comment lines; without titles 2 … 3 beyond the declarations).
RESPONSES_TITLES = "none"


def validate_openai_responses(body: Mapping[str, Any]) -> list[str]:
    """Problems of a Responses body: every function_call answered by its call_id, no orphans."""
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("model missing")
    items = body.get("input")
    if isinstance(items, str):
        return problems
    if not isinstance(items, list) or not items:
        return [*problems, "input missing or empty"]
    pending: set[str] = set()
    seen: set[str] = set()
    for i, it in enumerate(items):
        kind = it.get("type", "message")
        where = f"input[{i}]"
        if kind == "function_call":
            cid = it.get("call_id")
            if not cid or cid in seen:
                problems.append(f"{where}: call_id missing or repeated")
            seen.add(cid)
            pending.add(cid)
            if not it.get("name"):
                problems.append(f"{where}: function_call without name")
            try:
                json.loads(it.get("arguments", ""))
            except (TypeError, ValueError):
                problems.append(f"{where}: arguments is not a JSON string")
        elif kind == "function_call_output":
            cid = it.get("call_id")
            if cid not in pending:
                problems.append(f"{where}: orphan function_call_output {cid!r}")
            pending.discard(cid)
            if not isinstance(it.get("output"), (str, list)):
                problems.append(f"{where}: output missing")
        elif kind == "compaction":
            if not isinstance(it.get("encrypted_content"), str) or not it["encrypted_content"]:
                problems.append(f"{where}: compaction item without encrypted_content")
        elif kind == "message":
            if pending:
                problems.append(f"{where}: calls {sorted(pending)} unanswered before it")
                pending = set()
            if it.get("role") not in _MESSAGE_ROLES:
                problems.append(f"{where}: role {it.get('role')!r}")
            content = it.get("content")
            if content in (None, "", []):
                problems.append(f"{where}: message without content")
            if it.get("role") == "assistant" and isinstance(content, list):
                for part in content:
                    if part.get("type") not in ("output_text", "refusal"):
                        problems.append(f"{where}: {part.get('type')!r} in an assistant message")
        else:
            problems.append(f"{where}: item type {kind!r} not produced from a commit")
    if pending:
        problems.append(f"calls {sorted(pending)} unanswered at the end")
    for j, t in enumerate(body.get("tools") or []):
        if t.get("type") != "function" or not t.get("name"):
            problems.append(f"tools[{j}]: not a named function")
    return problems


def compaction_item_tokens(encrypted_content: str) -> int:
    """Tokens an OpenAI compaction item adds to the prompt, estimated from its encrypted
    state as OpenAI's Codex CLI estimates its encrypted items: the base64 text decodes to
    three quarters of its length, less a 650-byte envelope, at four bytes a token.  The
    state is opaque, so no count can be exact; the calibration against measured usage
    absorbs the rest."""
    c = COMPACTION_STATE
    return max(0, len(encrypted_content) * c["num"] // c["den"] - c["envelope"]) // c["per_token"]


#: A compaction item's state: the base64 text decodes to ``num / den`` of its length,
#: less an ``envelope`` of bytes, at ``per_token`` bytes a token.
COMPACTION_STATE = {"num": 3, "den": 4, "envelope": 650, "per_token": 4}


def _stored(body: Mapping[str, Any], profile: ModelProfile) -> int:
    """What a stored conversation the request continues can add (up to the context
    window), or 0 when it continues none."""
    return (
        profile.context_window
        if body.get("previous_response_id") or body.get("conversation")
        else 0
    )


#: Tool types the vendor runs itself, inside the request: what they find (search
#: results, file chunks, an MCP server's tool list and answers, code output) is read by
#: the model and billed as prompt, and the request body does not hold it.
SERVER_TOOLS = ("web_search", "file_search", "mcp", "code_interpreter", "image_generation")
#: Output items of those tools sent back as input: the body holds the call, the vendor
#: re-reads what it found (``results`` of a file search only when included).
_SERVER_CALLS = {"web_search_call", "file_search_call", "code_interpreter_call"}


def _server_tool(tool: Mapping[str, Any]) -> bool:
    kind = tool.get("type")
    return isinstance(kind, str) and kind.startswith(SERVER_TOOLS)


def _current_turn(items: list[Any]) -> int:
    """Index of the last user message: reasoning items before it are from earlier turns."""
    for i in range(len(items) - 1, -1, -1):
        it = items[i]
        if isinstance(it, Mapping) and it.get("type", "message") == "message":
            if it.get("role") == "user":
                return i
    return 0


def reasoning_item_tokens(item: Mapping[str, Any], current: bool) -> int | None:
    """Tokens a ``reasoning`` input item bills: none from an earlier turn (the reasoning
    guide: reasoning items of earlier turns are dropped from the context), its
    encrypted state by ``compaction_item_tokens`` when it carries one, else ``None``:
    the reasoning is stored with the vendor by the item's id and its size is not in the
    body (the summary it carries is not what is billed)."""
    if not current:
        return 0
    state = item.get("encrypted_content")
    if isinstance(state, str) and state:
        return compaction_item_tokens(state)
    return None


def _call_forced(body: Mapping[str, Any]) -> bool:
    """Whether a Responses request's ``tool_choice`` forces a function call: ``"required"``
    or a named function (``{"type": "function", "name": …}``); ``"auto"``, ``"none"``,
    ``null`` and the hosted tools' choices do not."""
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        return choice.get("type") == "function"
    return choice == "required"


def _responses_tool_prompt(profile: ModelProfile, body: Mapping[str, Any]) -> int:
    """The tool prompt on the Responses API (the gpt-5 models' is their own), plus the
    profile's ``responses_tool_forced`` when ``tool_choice`` forces a call
    (``_call_forced``; 0 unless the model's entry states it).  Unlike Chat's
    ``tool_forced``, ``"required"`` costs as much as a named function."""
    prompt = profile.rule("responses_tool_prompt", profile.tool_prompt_tokens)
    if _call_forced(body):
        prompt += profile.rule("responses_tool_forced", 0)
    return int(prompt)


def _responses_titles(profile: ModelProfile) -> bool:
    """Whether the model reads the parameters' titles of a Responses function tool
    (the profile's ``responses_titles``: ``"comment"``, or ``"none"``)."""
    return profile.rule("responses_titles", RESPONSES_TITLES) == "comment"


def _responses_tool_call(profile: ModelProfile, declared: bool) -> float:
    """What a function call with its output costs on the Responses API beyond their text:
    the profile's ``responses_tool_call`` where the request declares tools (GPT-4.1),
    ``tool_call`` where it declares none or the profile states no such rule."""
    per_call = profile.rule("tool_call", OPENAI_TOOL_CALL_TOKENS)
    return profile.rule("responses_tool_call", per_call) if declared else per_call


def openai_responses_frame(options: RequestOptions, profile: ModelProfile) -> EstimateFrame | None:
    """What the core estimates a Responses request with (``estimate_frame``)."""
    tools = [
        {
            "type": "function",
            "name": t["name"],
            **({"description": t["description"]} if t.get("description") else {}),
            "parameters": t.get("input_schema", {"type": "object", "properties": {}}),
            "strict": False,
        }
        for t in wire_tools(options.tools)
    ]
    framing = {
        **openai_framing(profile),
        "tool_call": _responses_tool_call(profile, bool(tools)),
        **{f"state_{k}": v for k, v in COMPACTION_STATE.items()},
        "stored_conversation": _stored(options.extra, profile),
    }
    text = options.extra.get("text")
    return openai_frame(
        tools,
        profile,
        wire="openai-responses",
        framing=framing,
        tool_prompt=_responses_tool_prompt(profile, options.extra),
        output_format=text.get("format") if isinstance(text, Mapping) else None,
        titles=_responses_titles(profile),
    )


def estimate_openai_responses(
    body: Mapping[str, Any], profile: ModelProfile, *, prefix_tokens: int = 0
) -> PromptEstimate:
    """OpenAI Responses: tools, instructions, then the input items as chat messages (an
    assistant message with text the profile's ``assistant_text`` more).

    A ``reasoning`` item counts ``reasoning_item_tokens``: nothing before the last user
    message, its encrypted state after it, and where it carries none (stored by id) it
    is flagged (``stored_reasoning``) with the range up to the model's output limit.  A
    server-side tool (``SERVER_TOOLS``) or one of its calls sent back is flagged
    (``server_tool_results``): what it found is billed and not in the body.
    A ``compaction`` item is opaque: it counts ``compaction_item_tokens`` of its
    encrypted state.  Items before it are counted as any others: the API reads and bills
    them (it does not drop them the way Anthropic drops what precedes its compaction
    block; the built-in renderer starts the input at the latest compaction item).
    """
    u = SegmentBuilder()
    openai_tools(
        u,
        [t for t in body.get("tools") or [] if isinstance(t, Mapping)],
        profile,
        _responses_tool_prompt(profile, body),
        titles=_responses_titles(profile),
    )
    text = body.get("text")
    openai_output_schema(u, text.get("format") if isinstance(text, Mapping) else None, profile)
    per_message = profile.rule("message", OPENAI_MESSAGE_TOKENS)
    declared = any(isinstance(t, Mapping) for t in body.get("tools") or [])
    per_call = _responses_tool_call(profile, declared)
    named = per_message + profile.rule("name", 1)
    assistant_text = profile.rule("assistant_text", 0)
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        u.add(
            {"instructions": body["instructions"]},
            prose=["developer", body["instructions"]],
            framing=per_message,
        )
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    previous = None
    items = items if isinstance(items, list) else []
    turn = _current_turn(items)
    # A server tool's work in this request, or one of its calls sent back: billed, not
    # held by the body (flagged once; the range is up to the context window).
    server = any(isinstance(t, Mapping) and _server_tool(t) for t in body.get("tools") or [])
    for ii, it in enumerate(items):
        if not isinstance(it, Mapping):
            continue
        kind = it.get("type", "message")
        if kind == "reasoning":
            tokens = reasoning_item_tokens(it, ii >= turn)
            if tokens is None:  # stored by id: up to the model's output limit
                tokens = u.unknown("stored_reasoning", 0, 0, profile.max_output_tokens)
            u.add(it, framing=tokens)
        elif kind in _SERVER_CALLS:
            # The call as a stand-in; what the tool found is read again, not held here.
            call = {k: v for k, v in it.items() if k not in ("id", "status")}
            server = server or kind != "file_search_call" or not it.get("results")
            u.add(it, structured=[compact_json(call)], framing=per_message)
        elif kind == "function_call":
            # Consecutive calls share one assistant message header.
            framing = per_call + (named if previous != "function_call" else 0)
            u.add(
                it,
                structured=[str(it.get("name") or "") + str(it.get("arguments") or "")],
                framing=framing,
            )
        elif kind == "function_call_output":
            texts, images = openai_parts(it.get("output"), u, profile)
            u.add(it, structured=texts, framing=named, images=images)
        elif kind == "compaction":
            state = it.get("encrypted_content")
            u.add(it, framing=compaction_item_tokens(state if isinstance(state, str) else ""))
        elif kind in ("message", "input_text") or "role" in it:
            texts, images = openai_parts(it.get("content"), u, profile)
            extra = assistant_text if it.get("role") == "assistant" and texts else 0
            u.add(
                it,
                prose=[str(it.get("role") or ""), *texts],
                framing=per_message + extra,
                images=images,
            )
        else:  # other output items sent back (MCP tool lists and calls, …): their JSON
            body_of = {k: v for k, v in it.items() if k not in ("id", "status")}
            u.add(it, structured=[compact_json(body_of)], framing=per_message)
        previous = kind
    if server:
        u.unknown("server_tool_results", 0, 0, profile.context_window)
    stored = _stored(body, profile)
    if stored:  # the stored conversation is billed too; the body does not hold it
        u.unknown("stored_conversation", 0, 0, stored)
    u.add({"reply": True}, framing=profile.rule("reply", OPENAI_REPLY_TOKENS))
    return u.finish(profile, prefix_tokens, wire="openai-responses")


class OpenAIResponsesProvider(Provider):
    """OpenAI Responses API."""

    name = "openai-responses"
    wire = "openai-responses"
    family = "openai"
    default_model = "gpt-4o"
    reserved = frozenset({"model", "instructions", "input", "tools", "max_output_tokens"})
    max_tokens_fields = (("max_output_tokens",),)
    cache_rule = "openai-automatic-prefix"
    cache_step = OPENAI_CACHE_STEP_TOKENS
    cache_min_tokens = OPENAI_CACHE_MIN_TOKENS

    def endpoint(self, model: str) -> str:
        return "/v1/responses"

    def parse_usage(self, response: Mapping[str, Any]) -> Usage | None:
        return openai_usage(response, "input_tokens", "output_tokens")

    def prompt_too_long(self, status: int | None, body: Any) -> PromptTooLong | None:
        return openai_prompt_too_long(status, body)

    def validate(self, body: Mapping[str, Any]) -> list[str]:
        return validate_openai_responses(body)

    estimate_prompt = staticmethod(estimate_openai_responses)
    estimate_frame = staticmethod(openai_responses_frame)
