"""Run by test_claude_agent_sdk.py inside a network namespace of its own (``unshare -n``):
a fake Anthropic API on loopback, the Claude Agent SDK driving its bundled Claude Code
CLI against it with ctxrules' session store and PreCompact hook, one turn and a manual
compaction.  Prints one JSON line: what the fake API received and what was mirrored."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, HookMatcher

from ctxrules.integrations.claude_agent_sdk import CtxrulesSessionStore, pre_compact_hook
from ctxrules.store import open_store
from fake_vendors import anthropic_events
from loopback import Loopback, Reply

TASK = "Rename the function parse_config in src/settings.py to load_settings."


def answer(seen) -> Reply:
    body = seen.body if isinstance(seen.body, dict) else {}
    if "count_tokens" in seen.path:
        return Reply({"input_tokens": 42})
    if not seen.path.startswith("/v1/messages"):
        return Reply({}, status=404)
    # The compaction's request asks, in its last user message, for a summary.
    last = (body.get("messages") or [{}])[-1]
    compacting = "summary" in json.dumps(last.get("content")).lower()
    text = "<summary>Renaming parse_config.</summary>" if compacting else "Done: load_settings."
    msg = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-sonnet-4-5"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 120,
            "output_tokens": 9,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    return Reply(events=anthropic_events(msg)) if body.get("stream") else Reply(msg)


HOOKS: list = []


def _traced(hook):
    async def traced(hook_input, tool_use_id, context):
        out = await hook(hook_input, tool_use_id, context)
        HOOKS.append({"input": dict(hook_input), "output": out})
        return out

    return traced


async def main(store_path: str) -> dict:
    ours = CtxrulesSessionStore(open_store(store_path, create=True))
    with Loopback() as server:
        server.responder = answer
        os.environ.update(
            ANTHROPIC_BASE_URL=server.url,
            ANTHROPIC_API_KEY="sk-test",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            DISABLE_AUTOUPDATER="1",
            CLAUDE_CONFIG_DIR=tempfile.mkdtemp(prefix="ccfg"),
            HOME=tempfile.mkdtemp(prefix="home"),
        )
        options = ClaudeAgentOptions(
            model="claude-sonnet-4-5",
            hooks={"PreCompact": [HookMatcher(hooks=[_traced(pre_compact_hook())])]},
            session_store=ours,
            session_store_flush="eager",
            cwd=tempfile.mkdtemp(prefix="cwd"),
            max_turns=2,
        )
        session_id = None
        async with ClaudeSDKClient(options=options) as client:
            await client.query(TASK)
            async for message in client.receive_response():
                session_id = getattr(message, "session_id", None) or session_id
            await client.query("/compact")
            async for _ in client.receive_response():
                pass
        bodies = [s.body for s in server.seen if isinstance(s.body, dict)]
    return {"bodies": bodies, "session_id": session_id, "hooks": HOOKS}


if __name__ == "__main__":
    out = asyncio.run(main(sys.argv[1]))
    print("RESULT " + json.dumps(out))
