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
    litellm.callbacks = [CtxrulesLogger("aggressive")]
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
            rules="aggressive",
        )
    _check(server, given)
