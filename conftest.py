"""Fixtures shared by tests/ and benches/: the corpus of real sessions and a clean plugin state.

Benchmarks run once as correctness checks under ``make test`` (``--benchmark-disable``
is in addopts) and for real under ``make bench``.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent
#: Copies of the recorded sessions the tests and benchmarks read (sources: its SOURCES.md).
CORPUS = REPO / "tests" / "data" / "corpus"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The real recorded sessions in tests/data/corpus (never edited)."""
    return CORPUS


@pytest.fixture(scope="session")
def first_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding copies of the corpus's first files (``tests.corpus.FIRST``) at
    their corpus paths: for tests that import or replay a corpus folder as a whole."""
    from tests.corpus import FIRST

    root = tmp_path_factory.mktemp("first-corpus")
    for rel in FIRST:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CORPUS / rel, root / rel)
    return root


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server of this run's own (tests/postgres_server.py: 127.0.0.1 only, a
    temporary directory), started on first use and stopped when the run ends.

    A server that cannot start fails every test that needs it, with the reason: the
    PostgreSQL store is part of what ``make test`` checks, never skipped.
    """
    from tests.postgres_server import PostgresServer

    server = PostgresServer()
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    yield server
    server.stop()


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch):
    """Reset the plugin manager before and after a test that changes what loads."""
    from ctxrules import plugins

    plugins.reset()
    yield monkeypatch
    plugins.reset()


class PluginSite:
    """A temporary directory that plugin discovery treats as installed (site-packages)."""

    def __init__(self, path: Path):
        self.path = path

    def install(self, dist: str, module: str, body: str, ep_name: str | None = None) -> None:
        """Write distribution ``dist`` (dist-info with one ``ctxrules`` entry point named
        ``ep_name``, default ``dist``) and its module ``module`` with source ``body``."""
        info = self.path / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[ctxrules]\n{ep_name or dist} = {module}\n")
        (self.path / f"{module}.py").write_text(textwrap.dedent(body))


@pytest.fixture
def plugin_site(tmp_path: Path, fresh_plugins: pytest.MonkeyPatch):
    """A fresh plugin state plus a directory whose distributions count as installed.

    Discovery reads only the interpreter's site-packages (``plugins.installed_paths``);
    the fixture adds its directory to that list and to ``sys.path``, every third-party
    plugin allowed.  Modules written there start with ``fake_`` and are unloaded after.
    """
    from ctxrules import plugins

    real = plugins.installed_paths
    fresh_plugins.setattr(plugins, "installed_paths", lambda: [str(tmp_path), *real()])
    fresh_plugins.syspath_prepend(str(tmp_path))
    fresh_plugins.delenv(plugins.ENV_ALLOW_LIST, raising=False)
    yield PluginSite(tmp_path)
    for mod in [m for m in sys.modules if m.startswith("fake_")]:
        del sys.modules[mod]


# -- generated Claude Code transcripts (tests of import cost, benches/bench_import.py) --

_CC_LINE = {
    "isSidechain": False,
    "userType": "external",
    "cwd": "/path/to/Demo",
    "sessionId": "5c0375b4-57a5-4f26-b12d-d022ee4e51b7",
    "version": "1.0.108",
    "gitBranch": "main",
}
_CC_USAGE = {
    "input_tokens": 8,
    "cache_creation_input_tokens": 422,
    "cache_read_input_tokens": 19019,
    "output_tokens": 31,
    "service_tier": "standard",
}


def write_task_transcript(path: Path, tasks: int) -> Path:
    """A Claude Code 1.0.x transcript with ``tasks`` Task sub-agent calls, each shaped
    like those of the corpus file ccviewer_5c0375b4…: the Task tool_use, its sidechain
    inline (root prompt, one assistant answer), then the Task's tool_result with its
    toolUseResult.  Four lines per Task; ids and timestamps differ per line."""
    import json
    import uuid

    count = 0

    def line(kind: str, parent: str | None, message: dict, **extra: object) -> str:
        nonlocal count
        count += 1
        entry = {
            "parentUuid": parent,
            **_CC_LINE,
            "isSidechain": bool(extra.pop("side", False)),
            "type": kind,
            "message": message,
            "uuid": str(uuid.UUID(int=count)),
            "timestamp": f"2025-09-07T{9 + count // 3600 % 12:02d}:{count // 60 % 60:02d}:"
            f"{count % 60:02d}.{count % 1000:03d}Z",
            **extra,
        }
        return json.dumps(entry)

    def uid(n: int) -> str:
        return str(uuid.UUID(int=n))

    out = [line("user", None, {"role": "user", "content": "Analyse the project in parts."})]
    prev = uid(1)
    for i in range(tasks):
        tid = f"toolu_{i:020d}"
        prompt = f"Examine part {i} of the project and report what you find."
        out.append(
            line(
                "assistant",
                prev,
                {
                    "id": f"msg_{i:020d}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-20250514",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": tid,
                            "name": "Task",
                            "input": {
                                "subagent_type": "general-purpose",
                                "description": f"Part {i}",
                                "prompt": prompt,
                            },
                        }
                    ],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": _CC_USAGE,
                },
                requestId=f"req_{i:020d}",
            )
        )
        task_line = uid(count)
        out.append(line("user", None, {"role": "user", "content": prompt}, side=True))
        answer = [{"type": "text", "text": f"Part {i} is in order; nothing to change."}]
        out.append(
            line(
                "assistant",
                uid(count),
                {
                    "id": f"msg_side_{i:015d}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-20250514",
                    "content": answer,
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": _CC_USAGE,
                },
                side=True,
                requestId=f"req_side_{i:015d}",
            )
        )
        out.append(
            line(
                "user",
                task_line,
                {
                    "role": "user",
                    "content": [{"tool_use_id": tid, "type": "tool_result", "content": answer}],
                },
                toolUseResult={
                    "content": answer,
                    "totalDurationMs": 1200 + i,
                    "totalTokens": 300,
                    "totalToolUseCount": 0,
                    "usage": _CC_USAGE,
                },
            )
        )
        prev = uid(count)
    path.write_text("\n".join(out) + "\n")
    return path


def write_replicated_transcript(path: Path, source: Path, copies: int) -> Path:
    """``copies`` of a real Claude Code transcript, one after the other as one session:
    every uuid, message id and tool id renamed per copy, each copy's first line
    continuing the previous copy's last main-chain line."""
    import json
    import uuid

    entries = [json.loads(raw) for raw in source.read_text().splitlines() if raw.strip()]
    last: str | None = None
    with open(path, "w", encoding="utf-8") as fh:
        for k in range(copies):

            def rename(u: str | None, k: int = k) -> str | None:
                return None if u is None else str(uuid.uuid5(uuid.NAMESPACE_OID, f"{k}:{u}"))

            for original in entries:
                e = json.loads(json.dumps(original))
                if "uuid" in e:
                    e["uuid"] = rename(e["uuid"])
                if "parentUuid" in e:
                    e["parentUuid"] = rename(e["parentUuid"])
                    if e["parentUuid"] is None and not e.get("isSidechain") and k:
                        e["parentUuid"] = last
                msg = e.get("message")
                if isinstance(msg, dict):
                    if "id" in msg:
                        msg["id"] = f"{msg['id']}_{k}"
                    for b in msg.get("content") if isinstance(msg.get("content"), list) else []:
                        if b.get("type") == "tool_use":
                            b["id"] = f"{b['id']}_{k}"
                        if b.get("type") == "tool_result":
                            b["tool_use_id"] = f"{b['tool_use_id']}_{k}"
                if e.get("type") in ("user", "assistant") and not e.get("isSidechain"):
                    last = e["uuid"]
                fh.write(json.dumps(e, ensure_ascii=False) + "\n")
    return path


def write_single_line_transcript(path: Path, size: int) -> Path:
    """A one-line Claude Code transcript: a user message of ``size`` characters of text
    (mixed ASCII with some non-ASCII, so the JSON holds escapes and UTF-8)."""
    import json

    unit = 'The quick brown fox jumps over the lazy dog. Größe: 12 °C. "quoted"\n'
    text = (unit * (size // len(unit) + 1))[:size]
    entry = {
        "parentUuid": None,
        **_CC_LINE,
        "type": "user",
        "message": {"role": "user", "content": text},
        "uuid": "00000000-0000-0000-0000-000000000001",
        "timestamp": "2025-09-07T09:52:03.071Z",
    }
    path.write_text(json.dumps(entry, ensure_ascii=False) + "\n")
    return path


@pytest.fixture(scope="session")
def claude_code_generator() -> Any:
    """The generators of Claude Code transcripts (Task calls, replicated, one line)."""
    import types

    return types.SimpleNamespace(
        tasks=write_task_transcript,
        replicated=write_replicated_transcript,
        single_line=write_single_line_transcript,
    )


def run_package_tests(package: Path) -> tuple[bool, str]:
    """Run a plugin package's own tests as its author would: from its directory (its own
    rootdir), so the kit's fixture can only come from the installed pytest11 entry
    point.  Returns whether they passed and pytest's output."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=package,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.fixture
def package_tests():
    """``run_package_tests``, for the tests that check a plugin package passes its own."""
    return run_package_tests
