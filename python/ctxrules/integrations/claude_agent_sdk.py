"""The Claude Agent SDK: a ``SessionStore`` that mirrors Claude Code's transcript into a
ctxrules store as it is written, and a ``PreCompact`` hook whose compaction instructions
keep the task and the identifiers (``pip install ctxrules[claude-agent-sdk]``).

``ClaudeAgentOptions(session_store=CtxrulesSessionStore(store))``: the SDK hands every
transcript line Claude Code writes to ``append`` (in batches, about once per turn).
Each batch is kept exactly as given (``load`` returns the lines deep-equal, the SDK's
contract, checked by its own conformance suite), and the session's transcript so far
is read by ctxrules' Claude Code importer into the graph: a ctxrules session per Claude
Code session, continued batch by batch (the importer's continuation of a growing
transcript), with its sub-agents — so ``ctxrules log`` / ``stats`` / ``view`` /
``rerender`` work on it while the agent runs.  ``graph_session(key)`` names it.  A line
the importer cannot read is left out of the graph (a ``CtxrulesWarning`` says so) and
stays in the mirror.  ``delete`` removes the mirror's lines; the graph keeps the nodes
(its history is append-only).

Claude Code owns the conversation: the rules cannot shape what it sends.  What ctxrules
can give it is what its own compaction should keep: ``pre_compact_hook()`` reads the
transcript at compaction time and answers with instructions naming the task (the
session's first real instruction) and the identifiers, files, constraints and open
todos to keep verbatim (``ctxrules.quality.facts``: what ctxrules checks a compaction
for).  The SDK's hook output has no field for compaction instructions; Claude Code
(CLI 2.1.x) appends a PreCompact hook's ``systemMessage`` to them, which is what the hook
returns — an observed behaviour of the CLI, not a documented contract (the test runs the
real CLI to check it).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

try:
    from claude_agent_sdk import SessionKey, fold_session_summary
except ImportError as exc:  # the extra is not installed: say how to get it
    raise ImportError(
        "ctxrules.integrations.claude_agent_sdk needs the Claude Agent SDK: "
        "pip install 'ctxrules[claude-agent-sdk]'"
    ) from exc

from ..errors import CtxrulesError, CtxrulesWarning
from ..importers import import_paths, parse_file
from ..quality.facts import extract_facts
from ..store import CommitStore

__all__ = ["NAMESPACE", "CtxrulesSessionStore", "compaction_instructions", "pre_compact_hook"]

#: The store's key-value namespace holding the mirrored lines.
NAMESPACE = "claude-agent-sdk"
_SEP = "\x1f"


def _session(key: Any) -> str:
    """The key's project and session (every sub-path of the session starts so)."""
    return key["project_key"] + _SEP + key["session_id"]


def _prefix(key: Any) -> str:
    """The prefix of one key's rows: project, session and sub-path (``""``: the main)."""
    return _session(key) + _SEP + (key.get("subpath") or "") + _SEP


class CtxrulesSessionStore:
    """A ``SessionStore`` mirroring transcripts into ``store`` (see the module docstring)."""

    def __init__(self, store: CommitStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._last_mtime = 0

    # -- the SessionStore protocol -----------------------------------------------------

    async def append(self, key: Any, entries: list[Any]) -> None:
        """Keep ``entries`` after the key's earlier ones; read the session's transcript
        into the graph (a main transcript or a sub-agent's)."""
        if not entries:
            return
        await asyncio.to_thread(self._append, dict(key), list(entries))

    async def load(self, key: Any) -> list[Any] | None:
        """The key's lines as appended (``None``: never appended)."""
        return await asyncio.to_thread(self._load, dict(key))

    async def list_sessions(self, project_key: str) -> list[Any]:
        """The project's main transcripts with their last write time (ms)."""
        return await asyncio.to_thread(self._list, project_key)

    async def list_session_summaries(self, project_key: str) -> list[Any]:
        """The SDK's summary of each of the project's sessions, kept as they were folded."""
        return await asyncio.to_thread(self._summaries, project_key)

    async def delete(self, key: Any) -> None:
        """Forget the key's lines (a main transcript: its sub-agents' too)."""
        await asyncio.to_thread(self._delete, dict(key))

    async def list_subkeys(self, key: Any) -> list[str]:
        """The sub-paths stored under a session (``subagents/agent-…``)."""
        return await asyncio.to_thread(self._subkeys, dict(key))

    def graph_session(self, key: Any) -> str | None:
        """The ctxrules session a Claude Code session's transcript is read into."""
        raw = self.store.kv_get(NAMESPACE, "graph" + _SEP + _prefix(dict(key, subpath="")))
        return raw.decode() if raw else None

    # -- the work, off the event loop --------------------------------------------------

    def _mtime(self) -> int:
        with self._lock:
            now = max(int(time.time() * 1000), self._last_mtime + 1)
            self._last_mtime = now
            return now

    def _append(self, key: dict[str, Any], entries: list[Any]) -> None:
        prefix = _prefix(key)
        with self.store.transaction():
            n = len(self.store.kv_keys(NAMESPACE, "lines" + _SEP + prefix))
            self.store.kv_put(
                NAMESPACE, f"lines{_SEP}{prefix}{n:012d}", json.dumps(entries).encode()
            )
            mtime = self._mtime()
            self.store.kv_put(NAMESPACE, "mtime" + _SEP + prefix, str(mtime).encode())
            if not key.get("subpath"):
                skey = "summary" + _SEP + prefix
                raw = self.store.kv_get(NAMESPACE, skey)
                previous = json.loads(raw) if raw else None
                folded = fold_session_summary(previous, cast("SessionKey", key), entries)
                folded["mtime"] = mtime
                self.store.kv_put(NAMESPACE, skey, json.dumps(folded).encode())
        self._mirror(key)

    def _load(self, key: dict[str, Any]) -> list[Any] | None:
        keys = self.store.kv_keys(NAMESPACE, "lines" + _SEP + _prefix(key))
        if not keys:
            return None
        out: list[Any] = []
        live = False
        for k in sorted(keys):
            raw = self.store.kv_get(NAMESPACE, k)
            if raw:
                live = True
                out.extend(json.loads(raw))
        return out if live else None

    def _list(self, project_key: str) -> list[Any]:
        out = []
        for k in self.store.kv_keys(NAMESPACE, "mtime" + _SEP + project_key + _SEP):
            _, _, session, sub, _ = k.split(_SEP)
            raw = self.store.kv_get(NAMESPACE, k)
            if not sub and raw:  # an empty value: deleted
                out.append({"session_id": session, "mtime": int(raw)})
        return out

    def _summaries(self, project_key: str) -> list[Any]:
        out = []
        for k in self.store.kv_keys(NAMESPACE, "summary" + _SEP + project_key + _SEP):
            raw = self.store.kv_get(NAMESPACE, k)
            if raw:
                out.append(json.loads(raw))
        return out

    def _delete(self, key: dict[str, Any]) -> None:
        # The key-value table has no delete: an empty value is a deleted one.
        base = _session(key)
        whole = not key.get("subpath")
        with self.store.transaction():
            for kind in ("lines", "mtime", "summary"):
                for k in self.store.kv_keys(NAMESPACE, kind + _SEP + base + _SEP):
                    sub = k[len(kind + _SEP + base + _SEP) :].split(_SEP, 1)[0]
                    if whole or sub == key.get("subpath"):
                        self.store.kv_put(NAMESPACE, k, b"")

    def _subkeys(self, key: dict[str, Any]) -> list[str]:
        base = "mtime" + _SEP + _session(key) + _SEP
        subs = {
            k[len(base) :].split(_SEP, 1)[0]
            for k in self.store.kv_keys(NAMESPACE, base)
            if self.store.kv_get(NAMESPACE, k)
        }
        return sorted(s for s in subs if s)

    def _mirror(self, key: dict[str, Any]) -> None:
        """Read the session's transcript so far (and its sub-agents') into the graph."""
        # The importer continues a transcript it read before when it finds it under the
        # same path: one path per session (the files are removed after each reading),
        # so one reading of a session at a time (the SDK appends a session's main and
        # sub-agent lines concurrently).
        root = MIRROR_DIR / _safe(key["project_key"])
        path = root / f"{_safe(key['session_id'])}.jsonl"
        with _path_lock(path):
            self._read_into_graph(key, root, path)

    def _read_into_graph(self, key: dict[str, Any], root: Path, path: Path) -> None:
        main = dict(key, subpath="")
        lines = self._load(main)
        if not lines:
            return  # a sub-agent's lines before its session's: read with the session
        written = [path]
        try:
            _write(path, lines)
            for sub in self._subkeys(main):
                target = root / _safe(key["session_id"]) / f"{sub}.jsonl"
                _write(target, self._load(dict(main, subpath=sub)) or [])
                written.append(target)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CtxrulesWarning)  # a cut-off last line
                results = import_paths(self.store, [str(path)], format="claude-code")
        except CtxrulesError as exc:
            warnings.warn(
                f"ctxrules: the transcript of {key['session_id']} could not be read into "
                f"the graph ({exc}); its lines are kept",
                CtxrulesWarning,
                stacklevel=2,
            )
            return
        finally:
            for done in written:
                done.unlink(missing_ok=True)
        if results:
            self.store.kv_put(NAMESPACE, "graph" + _SEP + _prefix(main), results[0].id.encode())


#: Where a transcript is written for the importer to read (and removed after).
MIRROR_DIR = Path(tempfile.gettempdir()) / "ctxrules-claude-agent-sdk"
_path_locks: dict[Path, threading.Lock] = {}
_path_locks_guard = threading.Lock()


def _path_lock(path: Path) -> threading.Lock:
    """The lock of one session's mirror path (in this process)."""
    with _path_locks_guard:
        return _path_locks.setdefault(path, threading.Lock())


def _safe(name: str) -> str:
    """A path component for a key's name (no separator, no way up)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).lstrip(".") or "_"


def _write(path: Path, lines: list[Any]) -> None:
    """Write ``lines`` as JSONL at ``path`` whole (a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(e) + "\n" for e in lines)
    os.replace(tmp, path)


def compaction_instructions(transcript_path: str, *, max_items: int = 40) -> str:
    """The instructions for compacting the Claude Code transcript at ``transcript_path``:
    its task and the identifiers, files, constraints and open todos to keep verbatim
    (``ctxrules.quality.facts`` over the whole transcript); ``""`` when the file holds
    no session ctxrules can read."""
    try:
        _, sessions = parse_file(transcript_path, format="claude-code")
    except (CtxrulesError, OSError):
        return ""
    if not sessions:
        return ""
    graph_nodes = sessions[0].nodes
    branch = [n for n in graph_nodes if n.caller is None]
    facts = extract_facts(graph_nodes, branch)
    by: dict[str, list[str]] = {}
    for f in facts:
        seen = by.setdefault(f.category, [])
        if f.text not in seen and len(seen) < max_items:
            seen.append(f.text)
    lines = ["When you summarise, keep these exactly as written (ctxrules):"]
    if by.get("task"):
        lines.append(f"- the task: {by['task'][0]}")
    for category, title in (
        ("constraints", "the user's constraints"),
        ("files", "the files"),
        ("identifiers", "the identifiers and error lines"),
        ("todos", "the open todos"),
    ):
        if by.get(category):
            lines.append(f"- {title}: " + "; ".join(by[category]))
    return "\n".join(lines) if len(lines) > 1 else ""


def pre_compact_hook(
    *, max_items: int = 40
) -> Callable[[Any, str | None, Any], Awaitable[dict[str, Any]]]:
    """A ``PreCompact`` hook callback (``HookMatcher(hooks=[pre_compact_hook()])``)
    answering ``{"systemMessage": compaction_instructions(transcript)}`` — which Claude
    Code adds to the compaction's instructions — or ``{}`` when there is nothing to say.
    It never blocks a compaction."""

    async def hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        path = hook_input.get("transcript_path") if isinstance(hook_input, dict) else None
        if not path:
            return {}
        text = await asyncio.to_thread(compaction_instructions, path, max_items=max_items)
        return {"systemMessage": text} if text else {}

    return hook
