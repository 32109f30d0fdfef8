"""Recorded provider answers replayed on loopback, and the history an agent brings to a
run: the integration tests run each framework for real (its own model client, its
own agent loop) against a ``loopback.Loopback`` that answers with a cassette's recorded
responses in order — JSON, or the recorded server-sent events as they came — on top of
earlier turns whose long tool results the rules should age.

The cassettes (tests/data/corpus, MANIFEST.json):

* ``CHAT``: OpenAI Chat, two parallel ``get_current_weather`` calls, then the answer;
* ``CHAT_STREAM``: OpenAI Chat streamed, one ``get_current_weather`` call, then the
  answer (usage in the last chunk);
* ``RESPONSES``: OpenAI Responses, one ``get_weather`` call, then the answer;
* ``RESPONSES_STREAM``: OpenAI Responses streamed, one ``fail_tool`` call, then the
  answer.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from corpus import CORPUS
from loopback import Reply

CHAT = (
    "vcr-cassettes-yaml/openai-chat/otelcontrib__test_chat_completion_tool_calls_with_content.yaml"
)
CHAT_STREAM = "vcr-cassettes-yaml/openai-chat/magentic__test_prompt_chain.yaml"
RESPONSES = "vcr-cassettes-yaml/openai-responses/openinference__test_agent_with_tool_calls.yaml"
RESPONSES_STREAM = "vcr-cassettes-yaml/openai-responses/chatlas__test_tool_error_recorded.yaml"

#: An old tool result: long, so the rules age it, and plain text, so its stub is short.
OLD_OUTPUT = "The file lists every release since 2019 with its notes. " * 40
#: How many earlier tool turns the history brings.
OLD_TURNS = 3


def _events(text: str) -> list[tuple[str, Any]]:
    """Server-sent events as recorded: ``(event name or "", data as sent)``."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = "", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data:
            out.append((name, "\n".join(data)))
    return out


def replies(cassette: str) -> list[Reply]:
    """The cassette's recorded responses, in order, as the server sent them."""
    doc = yaml.safe_load((CORPUS / cassette).read_text(encoding="utf-8"))
    out = []
    for it in doc["interactions"]:
        body = it["response"]["body"]["string"]
        status = it["response"]["status"]["code"]
        if body.lstrip().startswith(("event:", "data:")):
            out.append(Reply(events=_events(body), status=status))
        else:
            out.append(Reply(json.loads(body), status=status))
    return out


def recorded_text(cassette: str) -> str:
    """The text of the cassette's last answer (what the agent's final output is)."""
    reply = replies(cassette)[-1]
    if reply.events is None:
        body = reply.body
        if "choices" in body:
            return body["choices"][0]["message"]["content"]
        return "".join(
            c["text"]
            for o in body["output"]
            if o["type"] == "message"
            for c in o["content"]
            if c["type"] == "output_text"
        )
    text = []
    for _, data in reply.events:
        if data == "[DONE]":
            continue
        event = json.loads(data)
        if event.get("type") == "response.output_text.delta":
            text.append(event["delta"])
        for choice in event.get("choices") or ():
            text.append(choice["delta"].get("content") or "")
    return "".join(text)


def old_chat_turns() -> list[dict[str, Any]]:
    """``OLD_TURNS`` earlier turns as OpenAI Chat messages: a question, a ``read``
    call, its long result, an answer."""
    msgs: list[dict[str, Any]] = []
    for i in range(OLD_TURNS):
        msgs.append({"role": "user", "content": f"What changed in release {i}?"})
        call = {"name": "read", "arguments": json.dumps({"path": f"CHANGES-{i}.md"})}
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"old{i}", "type": "function", "function": call}],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"old{i}", "content": OLD_OUTPUT})
        msgs.append({"role": "assistant", "content": f"Release {i} fixed the parser."})
    return msgs


def old_response_items() -> list[dict[str, Any]]:
    """The same earlier turns as OpenAI Responses input items."""
    items: list[dict[str, Any]] = []
    for i in range(OLD_TURNS):
        items.append({"role": "user", "content": f"What changed in release {i}?"})
        items.append(
            {
                "type": "function_call",
                "call_id": f"old{i}",
                "name": "read",
                "arguments": json.dumps({"path": f"CHANGES-{i}.md"}),
            }
        )
        items.append({"type": "function_call_output", "call_id": f"old{i}", "output": OLD_OUTPUT})
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"Release {i} fixed the parser."}],
            }
        )
    return items


def old_outputs(texts: list[str]) -> tuple[int, int]:
    """How many of ``texts`` (the tool results a request carried) are the old output
    whole, and how many an aged stub of it."""
    whole = sum(t == OLD_OUTPUT for t in texts)
    aged = sum(t != OLD_OUTPUT and t.startswith("[tool read]") for t in texts)
    return whole, aged


def check_chat_requests(seen: list[Any], *, streamed: bool) -> None:
    """Each OpenAI Chat request the server saw: streamed or not as asked, one the vendor
    accepts (every call with its result), the old results aged."""
    from ctxrules.providers import get_provider

    assert [s.body.get("stream", False) for s in seen] == [streamed] * len(seen)
    for s in seen:
        assert get_provider("openai-chat").validate(s.body) == []
        tools = [m["content"] for m in s.body["messages"] if m["role"] == "tool"]
        assert old_outputs(tools[:OLD_TURNS]) == (0, OLD_TURNS)
