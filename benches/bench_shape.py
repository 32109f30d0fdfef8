"""``ctxrules.shape`` on a 100-message history: what a call costs beyond rendering.

An agent that keeps its own history calls ``shape`` before each model call with the
previous list and the new messages (the model's answer and its tool's result).  Side by
side, on the same 100-message history (50 tool turns, results of ~1 KB, an OpenAI Chat
list):

* ``render``: rendering the shaped commit into the request's messages (the floor);
* ``shape``: a call whose list extends the one shaped before (the loop's case);
* ``shape_cold``: a list never seen (the first call of a process, or a new conversation);
* ``loop``: the whole agent loop — ``shape`` before every model call of the conversation
  (after each user message and each tool result), from an empty cache; so the rules'
  work that comes in steps is counted where it falls, and ``loop_render``, the same
  requests' renders, is its floor.  With the default rules (whose cache ledger ages none
  of these results) and with the default aging every result once it leaves the tail
  (``aging``: each stub names its output's identifiers, the work issue 23 found slow);
* ``import_each_call``: the way there was before ``shape`` — a temporary in-memory store
  per call, the list imported as a session, its commit made and rendered.

Target: ≤ 1 ms per call beyond rendering, in the loop: (``loop`` − ``loop_render``) ÷
the calls (benches/README.md, "shape"; ``extra_info`` has the calls).
"""

from __future__ import annotations

import itertools
import json

import pytest

from ctxrules import shape
from ctxrules.commit import make_commit
from ctxrules.config import PRESETS, PipelineConfig
from ctxrules.engine import shaping
from ctxrules.importers import import_paths
from ctxrules.providers import RequestOptions, get_provider
from ctxrules.store import open_store
from ctxrules.store.memory import forget

PROVIDER = get_provider("openai-chat")


def _history(turns: int) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "You are a careful coding agent."}]
    for i in range(turns):
        msgs.append({"role": "user", "content": f"What does module {i} do, and is it tested?"})
        msgs.append(
            {
                "role": "assistant",
                "content": f"Let me read module {i}.",
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "read", "arguments": json.dumps({"path": f"m{i}.py"})},
                    }
                ],
            }
        )
        body = "".join(f"def f{j}(x):\n    return x * {j}\n" for j in range(40))
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": body})
    return msgs


HISTORY = _history(34)[:100]  # ends with a tool result: the request after it
PREVIOUS = HISTORY[:-2]  # the call before: without the last answer and its result


#: The loop's requests: the list as it stands after each user message and tool result.
LOOP = [
    HISTORY[:k] for k in range(1, len(HISTORY) + 1) if HISTORY[k - 1]["role"] in ("user", "tool")
]


def _setup():
    shaping._cache.clear()
    shape(PREVIOUS, provider="openai-chat")
    return (HISTORY,), {"provider": "openai-chat"}


def test_render(benchmark):
    commit = shaping.shape_commit(HISTORY, provider=PROVIDER)
    options = RequestOptions(model=PROVIDER.default_model, cache=False)
    benchmark(lambda: json.loads(PROVIDER.render(commit, options).body)["messages"])


def test_shape(benchmark):
    out = benchmark.pedantic(shape, setup=_setup, rounds=300, warmup_rounds=5)
    shaping._cache.clear()
    assert out == shape(HISTORY, provider="openai-chat")  # warm or cold: the same list
    assert len(out) == 100 and out[-1] == HISTORY[-1]


def test_shape_cold(benchmark):
    def setup():
        shaping._cache.clear()
        return (HISTORY,), {"provider": "openai-chat"}

    out = benchmark.pedantic(shape, setup=setup, rounds=20)
    assert len(out) == 100


_names = itertools.count()


def test_import_each_call(benchmark, tmp_path):
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"messages": HISTORY}))

    def once() -> list:
        name = f"memory:shape-bench-{next(_names)}"
        store = open_store(name)
        (res,) = import_paths(store, [str(path)])
        commit = make_commit(res.id, now=0.0, store=store)
        body = PROVIDER.render(commit, RequestOptions(model=PROVIDER.default_model, cache=False))
        store.close()
        forget(name)
        return json.loads(body.body)["messages"]

    out = benchmark.pedantic(once, rounds=10)
    assert len(out) == 100


def _aging() -> PipelineConfig:
    """The default rules with tool aging that does not wait for the cache to pay: every
    result is aged once it leaves the tail, its stub naming its output's identifiers
    (the default's cache ledger ages none of this history's results)."""
    rules = {name: dict(values) for name, values in PRESETS["default"]["rules"].items()}
    rules["tool_aging"]["cache_aware"] = False
    return PipelineConfig.preset("default", rules=rules)


#: The rules the loop is shaped with: the default, and the default aging every result.
LOOP_RULES = {"default": "default", "aging": _aging()}


@pytest.mark.parametrize("rules", LOOP_RULES)
def test_loop(benchmark, rules):
    def loop() -> list:
        return [shape(msgs, provider="openai-chat", rules=LOOP_RULES[rules]) for msgs in LOOP]

    out = benchmark.pedantic(loop, setup=shaping._cache.clear, rounds=7, warmup_rounds=1)
    benchmark.extra_info["calls"] = len(LOOP)
    shaping._cache.clear()
    assert out[-1] == shape(HISTORY, provider="openai-chat", rules=LOOP_RULES[rules])
    stubs = sum("identifiers: " in str(m.get("content")) for m in out[-1])
    assert stubs > 0 if rules == "aging" else stubs == 0


@pytest.mark.parametrize("rules", LOOP_RULES)
def test_loop_render(benchmark, rules):
    options = RequestOptions(model=PROVIDER.default_model, cache=False)
    commits = [
        shaping.shape_commit(msgs, provider=PROVIDER, rules=LOOP_RULES[rules]) for msgs in LOOP
    ]

    def renders() -> list:
        return [json.loads(PROVIDER.render(c, options).body)["messages"] for c in commits]

    benchmark.pedantic(renders, rounds=7, warmup_rounds=1)
    benchmark.extra_info["calls"] = len(LOOP)
