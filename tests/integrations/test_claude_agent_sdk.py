"""The Claude Agent SDK adapter: the session store passes the SDK's own conformance suite
(every contract, the optional ones included) on every store backend; the PreCompact
hook's instructions name the task and the identifiers of a real Claude Code transcript;
and the bundled Claude Code CLI, run for real against a fake Anthropic API on loopback
inside a network namespace of its own, mirrors its transcript into the graph and sends
the hook's instructions in its compaction request."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import msgspec
import pytest

pytest.importorskip("claude_agent_sdk")

from claude_agent_sdk.testing import run_session_store_conformance

from ctxrules.errors import CtxrulesWarning
from ctxrules.importers import parse_file
from ctxrules.integrations.claude_agent_sdk import (
    CtxrulesSessionStore,
    compaction_instructions,
    pre_compact_hook,
)
from ctxrules.quality.facts import extract_facts
from ctxrules.store import open_store
from ctxrules.store.memory import forget

_names = itertools.count()
RUN = Path(__file__).with_name("_claude_cli_run.py")


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgresql"])
def test_the_store_passes_the_sdks_conformance_suite(backend, tmp_path, request):
    made: list = []

    def make() -> CtxrulesSessionStore:
        n = next(_names)
        if backend == "memory":
            location = f"memory:claude-conformance-{n}"
        elif backend == "sqlite":
            location = str(tmp_path / f"store-{n}")
        else:
            location = request.getfixturevalue("pg_server").new_store()
        store = open_store(location, create=True)
        made.append((store, location))
        return CtxrulesSessionStore(store)

    with warnings.catch_warnings():
        # The suite's lines are not Claude Code's: the graph mirror says it skips them.
        warnings.simplefilter("ignore", CtxrulesWarning)
        asyncio.run(run_session_store_conformance(make))
    for store, location in made:
        store.close()
        if backend == "memory":
            forget(location)


def test_a_real_transcript_is_mirrored_into_the_graph(corpus, store):
    path = corpus / "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ours = CtxrulesSessionStore(store)
    key = {"project_key": "-work-demo", "session_id": lines[0].get("sessionId", "s")}

    async def main() -> None:
        half = len(lines) // 2
        await ours.append(key, lines[:half])
        first = ours.graph_session(key)
        assert first is not None and store.nodes(first)
        before = len(store.nodes(first))
        await ours.append(key, lines[half:])  # the same session, continued
        assert ours.graph_session(key) == first and len(store.nodes(first)) > before
        assert await ours.load(key) == lines  # the mirror: exactly what was appended

    asyncio.run(main())


def test_the_instructions_keep_the_task_and_the_identifiers(corpus):
    path = corpus / "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    _, (session,) = parse_file(str(path), format="claude-code")
    facts = extract_facts(session.nodes, [n for n in session.nodes if n.caller is None])
    task = next(f.text for f in facts if f.category == "task")
    instructions = compaction_instructions(str(path))
    assert instructions.startswith("When you summarise, keep these exactly as written")
    assert f"- the task: {task}" in instructions
    identifiers = [f.text for f in facts if f.category in ("identifiers", "files")]
    assert identifiers and all(i in instructions for i in identifiers[:10])
    hook = pre_compact_hook()
    out = asyncio.run(hook({"transcript_path": str(path), "trigger": "manual"}, None, None))
    assert out == {"systemMessage": instructions}
    assert asyncio.run(hook({"transcript_path": "/nonexistent.jsonl"}, None, None)) == {}


def _isolated() -> str | None:
    """Why the CLI cannot run here isolated from the network (``None``: it can)."""
    import claude_agent_sdk

    bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    if not bundled.exists():
        return (
            "the SDK was installed without its bundled Claude Code CLI (no wheel for this platform)"
        )
    if shutil.which("unshare") is None:
        return "unshare is missing: the CLI would run without a network namespace of its own"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if probe.returncode != 0:
        return "unshare -n is not permitted here (needs root or user namespaces)"
    return None


def test_the_cli_mirrors_its_transcript_and_compacts_with_the_hooks_instructions(tmp_path):
    reason = _isolated()
    if reason is not None:
        pytest.skip(reason)
    store_path = str(tmp_path / "store")
    script = f"ip link set lo up 2>/dev/null; exec {sys.executable} {RUN} {store_path}"
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT ") :])
    (hook,) = result["hooks"]  # the compaction asked the hook once
    assert (
        hook["input"]["trigger"] == "manual" and "parse_config" in hook["output"]["systemMessage"]
    )
    turn, compaction = result["bodies"]  # the turn, then the compaction's request
    marker = "When you summarise, keep these exactly as written (ctxrules)"
    assert marker not in json.dumps(turn)
    assert json.dumps(hook["output"]["systemMessage"])[1:-1] in json.dumps(compaction)
    store = open_store(store_path)
    sessions = store.list_sessions()
    assert sessions, "nothing was mirrored into the graph"
    nodes = [n for s in sessions for n in store.nodes(s.id)]

    def text(node) -> str:
        return msgspec.json.encode(node.output).decode()

    assert any("parse_config" in text(n) for n in nodes if n.role == "user")
    assert any("load_settings" in text(n) for n in nodes if n.role == "assistant")
    store.close()


def test_a_sessions_main_and_sub_agent_lines_appended_concurrently(corpus, tmp_path):
    """The SDK appends a session's main transcript and its sub-agents' side by side:
    each append reads the session into the graph, through one path per session, so the
    readings take turns (they raced: one removed the file another was reading, and the
    graph missed batches with a warning).  The graph is the same as appending one batch
    after another."""
    path = corpus / "claude-code-jsonl/ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    main = [x for x in lines if not x.get("isSidechain")]
    side = [x for x in lines if x.get("isSidechain")]
    key = {"project_key": "-work-race", "session_id": lines[0]["sessionId"]}
    sub = dict(key, subpath="subagents/agent-1")
    batches = [(main[i : i + 2], side[i : i + 2]) for i in range(0, len(main), 2)]

    def graph(concurrently: bool, name: str) -> list:
        store = open_store(str(tmp_path / name), create=True)
        ours = CtxrulesSessionStore(store)

        async def run() -> None:
            for m, s in batches:
                calls = [ours.append(key, m)] + ([ours.append(sub, s)] if s else [])
                if concurrently:
                    await asyncio.gather(*calls)
                else:
                    for call in calls:
                        await call

        with warnings.catch_warnings():
            warnings.simplefilter("error", CtxrulesWarning)  # a reading that failed
            asyncio.run(run())
        session = ours.graph_session(key)
        assert session is not None
        out = sorted(msgspec.json.encode(n.output).decode() for n in store.nodes(session))
        store.close()
        return out

    assert graph(True, "concurrent") == graph(False, "one-by-one")
