"""What the engine keeps per session between requests (the render defaults, the request
layer: options, tools, model profile, header estimates) never goes stale: after each
change to what they are made of, the request an engine that served the session all
along prepares is the one a new engine prepares at the same point.

The changes: the model of the answers (a model switch), the tools the session called,
its recorded parameters, the engine's configuration, a branch switch back to an earlier
head, a fork, a model registered since.
"""

from __future__ import annotations

import msgspec
import pytest

from ctxrules import dag, plugins
from ctxrules.context_sources import SourcesConfig
from ctxrules.engine import Engine, EngineConfig, TurnPrep
from ctxrules.model import TextBlock, ToolUseBlock
from ctxrules.store import MemoryStore

#: No model and no tools configured: both come from the session (what rerender does).
CONFIG = EngineConfig(
    provider="anthropic",
    sources=SourcesConfig(git_status=False, instruction_files=False, date=False),
    references=False,
)


def _same(kept: Engine, store: MemoryStore, sid: str, now: float) -> TurnPrep:
    """``kept``'s request at HEAD, checked against a new engine's."""
    got = kept.prepare(sid, now=now)
    fresh = Engine(store, kept.config, pipeline=kept.pipeline).prepare(sid, now=now)
    assert got.request.body == fresh.request.body
    assert got.model == fresh.model
    assert got.tools == fresh.tools
    assert got.tokens == fresh.tokens
    assert got.budget == fresh.budget
    assert got.commit.id == fresh.commit.id
    return got


def _answer(store: MemoryStore, sid: str, model: str, text: str, call: str | None = None) -> str:
    content: list = [TextBlock(text=text)]
    if call is not None:
        content.append(ToolUseBlock(id=f"t_{text}", name=call, input={"path": text}))
    node = dag.append(store, sid, "assistant", content, name=model)
    if call is not None:
        dag.append(
            store,
            sid,
            "tool",
            f"contents of {text}",
            name=call,
            caller=node.id,
            metadata={"tool_use_id": f"t_{text}"},
        )
    return node.id


@pytest.fixture
def session() -> tuple[MemoryStore, str]:
    store = MemoryStore()
    sid = store.create_session(metadata={"provider": "anthropic", "model": "claude-sonnet-4-5"}).id
    dag.append(store, sid, "user", "look at the project")
    return store, sid


def test_a_model_switch_the_tools_called_and_a_branch_switch_are_followed(session):
    store, sid = session
    engine = Engine(store, CONFIG)
    first = _same(engine, store, sid, 1e9)
    assert first.model == "claude-sonnet-4-5" and first.tools == ()
    _answer(store, sid, "claude-opus-4-1", "a.py", call="Read")
    after_call = _same(engine, store, sid, 1e9 + 1)
    # The answer's model, and the tool it called declared (inferred from the calls).
    assert after_call.model == "claude-opus-4-1"
    assert [t.name for t in after_call.tools] == ["Read"]
    _answer(store, sid, "claude-opus-4-1", "done")
    asked = dag.append(store, sid, "user", "now the tests").id
    _answer(store, sid, "claude-haiku-4-5", "b.py", call="Grep")
    later = _same(engine, store, sid, 1e9 + 2)
    assert later.model == "claude-haiku-4-5"
    assert [t.name for t in later.tools] == ["Grep", "Read"]
    # Back to an earlier head: the model answering there, the tools the session called.
    dag.checkout(store, sid, asked)
    back = _same(engine, store, sid, 1e9 + 3)
    assert back.model == "claude-opus-4-1"


def test_recorded_parameters_and_the_configuration_are_followed(session):
    store, sid = session
    engine = Engine(store, CONFIG)
    _same(engine, store, sid, 1e9)
    store.update_metadata(sid, {"params": {"max_tokens": 777}})
    recorded = _same(engine, store, sid, 1e9 + 1)
    assert msgspec.json.decode(recorded.request.body)["max_tokens"] == 777
    engine.config = msgspec.structs.replace(CONFIG, max_tokens=555, system="Be brief.")
    configured = _same(engine, store, sid, 1e9 + 2)
    body = msgspec.json.decode(configured.request.body)
    assert body["max_tokens"] == 555
    assert "Be brief." in msgspec.json.encode(body["system"]).decode()
    engine.config = msgspec.structs.replace(CONFIG, model="claude-opus-4-1")
    assert _same(engine, store, sid, 1e9 + 3).model == "claude-opus-4-1"


def test_a_fork_is_its_own_session(session):
    store, sid = session
    engine = Engine(store, CONFIG)
    _answer(store, sid, "claude-opus-4-1", "a.py", call="Read")
    _same(engine, store, sid, 1e9)
    fork = dag.fork(store, sid)
    dag.append(store, fork.id, "user", "another way")
    forked = _same(engine, store, fork.id, 1e9 + 1)
    assert [t.name for t in forked.tools] == ["Read"]


#: A plugin's profile of the Opus 4 models (the built-in entry's pattern): a lower
#: output limit, which the request's ``max_tokens`` follows.
PLUGIN = """
from ctxrules.hookspecs import hookimpl
from ctxrules.providers import ModelInfo


@hookimpl
def register_models(register):
    register(ModelInfo(name="fake-opus", pattern="anthropic:claude-opus-4*",
                       max_output_tokens=1_234))
"""


def test_a_model_registered_since_is_used(plugin_site):
    store = MemoryStore()
    sid = store.create_session(metadata={"provider": "anthropic", "model": "claude-opus-4-1"}).id
    dag.append(store, sid, "user", "look at the project")
    engine = Engine(store, CONFIG)
    before = _same(engine, store, sid, 1e9)
    assert msgspec.json.decode(before.request.body)["max_tokens"] != 1_234
    plugin_site.install("fake-opus", "fake_opus", PLUGIN)
    plugins.reset()  # the plugin is loaded: the registries are made again
    after = _same(engine, store, sid, 1e9 + 1)
    assert msgspec.json.decode(after.request.body)["max_tokens"] == 1_234
