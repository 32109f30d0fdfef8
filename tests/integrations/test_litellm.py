"""The LiteLLM adapter, tested only where LiteLLM is installed (it is not in the dev set:
``make bench-peers`` and the ``litellm`` extra install it): the async hook and the sync
wrapper send the shaped messages to a loopback OpenAI-compatible server; the caller's
list is never changed."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import
litellm = pytest.importorskip("litellm", reason="LiteLLM is not installed (ctxrules[litellm])")

from ctxrules.integrations.litellm import CtxrulesLogger, completion  # noqa: E402
from fake_vendors import responder  # noqa: E402
from integrations.conftest import AGING  # noqa: E402
from integrations.replay import (  # noqa: E402
    CHAT_STREAM,
    check_chat_requests,
    old_chat_turns,
    recorded_text,
    replies,
)
from loopback import Loopback  # noqa: E402

BODY = "".join(f"def f{j}(x):\n    return x * {j}\n" for j in range(25))  # under the cap


def _history(turns: int) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        msgs.append({"role": "user", "content": f"Read m{i}.py."})
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": BODY})
    return msgs


def _check(server, given: list[dict]) -> None:
    (seen,) = server.seen
    sent = seen.body["messages"]
    assert len(sent) == len(given)
    assert len(json.dumps(sent)) < len(json.dumps(given)) / 2  # old results aged
    assert sent[-1]["content"] == BODY  # the newest result whole
    assert all(m["content"] == BODY for m in given if m["role"] == "tool")  # untouched


def test_the_async_hook_shapes_each_call():
    given = _history(6)
    litellm.callbacks = [CtxrulesLogger(AGING)]
    try:
        with Loopback() as server:
            server.responder = responder
            asyncio.run(
                litellm.acompletion(
                    model="openai/gpt-4o", api_base=server.url + "/v1", api_key="k", messages=given
                )
            )
    finally:
        litellm.callbacks = []
    _check(server, given)


def test_the_sync_wrapper_shapes_the_call():
    given = _history(6)
    with Loopback() as server:
        server.responder = responder
        completion(
            model="openai/gpt-4o",
            api_base=server.url + "/v1",
            api_key="k",
            messages=given,
            rules=AGING,
        )
    _check(server, given)


def test_a_streamed_call_against_recorded_answers():
    """``acompletion(stream=True)`` through the hook, against a recorded stream (a tool
    call, then the answer), the caller's history holding earlier turns: each request
    carries the old results aged and each call with its result."""

    messages = [*old_chat_turns(), {"role": "user", "content": "The weather?"}]
    given = json.loads(json.dumps(messages))
    litellm.callbacks = [CtxrulesLogger(AGING)]

    async def call(msgs):
        stream = await litellm.acompletion(
            model="openai/gpt-4o",
            api_base=server.url + "/v1",
            api_key="k",
            messages=msgs,
            stream=True,
            stream_options={"include_usage": True},
        )
        return [chunk async for chunk in stream]

    try:
        with Loopback() as server:
            server.reply(*replies(CHAT_STREAM))
            chunks = asyncio.run(call(messages))
            message = litellm.stream_chunk_builder(chunks, messages=messages).choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            for c in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": c.id, "content": "72F, sunny"})
            text = "".join(
                c.choices[0].delta.content or "" for c in asyncio.run(call(messages)) if c.choices
            )
    finally:
        litellm.callbacks = []
    assert text == recorded_text(CHAT_STREAM)
    check_chat_requests(server.seen, streamed=True)
    assert messages[: len(given)] == given  # the caller's list: untouched
