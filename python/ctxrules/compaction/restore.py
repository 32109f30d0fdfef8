"""The restore message: what a compaction gives back to the model right after the boundary.

A summary keeps the gist; some things the model needs exactly.  After a compaction one
user node (metadata ``compaction_restore``) brings back, within ``RestoreLimits``:

* the most recently read files, newest first — re-read from disk when the file is
  under the working directory (what is there now is what the model will edit), else
  the text the read returned; a file whose read result is still shown in full in the
  kept items is skipped (the model has it);
* the plan: the latest todo list (its items not completed, with their status) and
  the latest plan a plan tool was given;
* the skills invoked on the branch (their instructions, cut to the limits);
* the deferred tools (declared with ``defer_loading``): a line naming them, since the
  tool search results that loaded them were folded;
* what ``session_start`` hooks returned.

File and tool contents are untrusted: they become plain text of one user message, so
they can neither change a role nor add a cache marker.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..commit.items import item_for_call
from ..model import ContextCommit, Node, content_text
from ..quality.facts import todo_state
from ..summarizers.facts import is_open
from .types import Restored, RestoreLimits

__all__ = ["READ_TOOLS", "compose_restore"]

#: Tools whose call reads one file, and the argument naming it (lower-case tool names).
READ_TOOLS: dict[str, tuple[str, ...]] = {
    "read": ("file_path", "path"),
    "read_file": ("path", "file_path", "target_file"),
    "view": ("path", "file_path"),
    "view_file": ("path", "file_path"),
    "open": ("path", "file"),
    "open_file": ("path", "file"),
    "str_replace_editor": ("path",),  # only its "view" command reads
    "str_replace_based_edit_tool": ("path",),
}
#: Tools whose call hands over a plan (Claude Code's plan mode), and the argument.
PLAN_TOOLS = {"exitplanmode": "plan", "update_plan": "plan"}
#: Tools that invoke a skill, and the arguments that may name it.
SKILL_TOOLS = {"skill": ("skill", "name", "command")}
#: The text Claude Code opens a loaded skill's instructions with (a user message).
SKILL_PREAMBLE = "Base directory for this skill"
#: Most bytes read from one file on disk (a file larger than this is cut anyway).
MAX_FILE_BYTES = 2_000_000
#: The smallest budget worth a file or skill section: below it a section would hold
#: little besides its heading and the cut marker.
MIN_SECTION_TOKENS = 100


def _args(call: Node) -> Mapping[str, Any]:
    return call.input if isinstance(call.input, Mapping) else {}


def _read_path(call: Node) -> str | None:
    """The file a read call read, or ``None``."""
    name = call.name.lower()
    keys = READ_TOOLS.get(name)
    if keys is None or call.metadata.get("is_error"):
        return None
    args = _args(call)
    if name.startswith("str_replace") and args.get("command") != "view":
        return None
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip() and "\n" not in value:
            return value.strip()
    return None


def _cut(text: str, limit: int, counter: Any) -> tuple[str, int]:
    """``text`` cut to at most ``limit`` tokens (with a marker saying so), and its count;
    ``("", 0)`` when not even a little of it fits.  The longest prefix that fits is found
    by bisection (token density varies too much along a file to guess it)."""
    n = int(counter.count(text))
    if n <= limit:
        return text, n

    def cut(keep: int) -> str:
        return f"{text[:keep]}\n[… cut: {len(text) - keep:,} more characters]"

    lo, hi, best = 1, len(text) - 1, ("", 0)
    while lo <= hi:
        mid = (lo + hi) // 2
        body = cut(mid)
        size = int(counter.count(body))
        if size <= limit:
            best, lo = (body, size), mid + 1
        else:
            hi = mid - 1
    return best


def _from_disk(path: str, working_directory: str | None) -> str | None:
    """The file's text now, when it is a file under ``working_directory``."""
    if working_directory is None:
        return None
    root = Path(working_directory).resolve()
    p = Path(path)
    target = (p if p.is_absolute() else root / p).resolve()
    # Only inside the working directory: a transcript naming /etc/passwd must not
    # make ctxrules read it into a request.
    if os.path.commonpath([root, target]) != str(root) or not target.is_file():
        return None
    try:
        with target.open("rb") as f:
            data = f.read(MAX_FILE_BYTES)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


def _shown_full(kept: ContextCommit) -> set[str]:
    """Ids of the nodes the kept commit still shows in full."""
    return {
        it.source_node_id
        for it in kept.items
        if it.state == "full" and it.attached_from is None and it.role == "tool"
    }


def _files(
    branch: Sequence[Node],
    kept: ContextCommit,
    limits: RestoreLimits,
    working_directory: str | None,
    counter: Any,
) -> tuple[list[str], list[str], list[str], list[str]]:
    """The file sections, the paths restored, those read from disk and those skipped."""
    latest: dict[str, Node] = {}
    for call in branch:
        path = _read_path(call) if call.role == "tool" else None
        if path is not None:
            latest.pop(path, None)
            latest[path] = call  # dict order: oldest read first, re-reads moved last
    shown = _shown_full(kept)
    sections: list[str] = []
    paths: list[str] = []
    disk: list[str] = []
    skipped: list[str] = []
    used = 0
    for path, call in reversed(latest.items()):
        if len(paths) >= limits.max_files:
            break
        if call.id in shown:
            skipped.append(path)
            continue
        text = _from_disk(path, working_directory)
        if text is not None:
            disk.append(path)
        else:
            text = item_for_call(call, anchor=False, lock_system=False, now=0.0).rendered
        limit = min(limits.file_tokens, limits.files_tokens - used)
        if limit < min(MIN_SECTION_TOKENS, limits.file_tokens):
            break
        body, n = _cut(text, limit, counter)
        if not body:
            continue
        used += n
        paths.append(path)
        where = "as it is on disk now" if path in disk else "as last read"
        sections.append(f"### {path} ({where})\n{body}")
    return sections, paths, disk, skipped


def _plan(branch: Sequence[Node]) -> list[str]:
    """The plan sections: the open todos of the latest todo state, the latest plan text."""
    out: list[str] = []
    todos = [(c, s) for c, s, _ in todo_state(branch).values() if is_open(s)]
    if todos:
        out.append("Todo list:\n" + "\n".join(f"- [{s}] {c}" for c, s in todos))
    for call in reversed(branch):
        key = PLAN_TOOLS.get(call.name.lower()) if call.role == "tool" else None
        plan = _args(call).get(key) if key else None
        if isinstance(plan, str) and plan.strip():
            out.append("Plan:\n" + plan.strip())
            break
    return out


def _skills(
    branch: Sequence[Node], limits: RestoreLimits, counter: Any
) -> tuple[list[str], list[str]]:
    """The skill sections and names, most recently invoked first."""
    found: dict[str, str] = {}
    for k, call in enumerate(branch):
        keys = SKILL_TOOLS.get(call.name.lower()) if call.role == "tool" else None
        if not keys:
            continue
        args = _args(call)
        name = next((args[key] for key in keys if isinstance(args.get(key), str)), None)
        if not name:
            continue
        text = item_for_call(call, anchor=False, lock_system=False, now=0.0).rendered
        for later in branch[k + 1 :]:  # Claude Code loads the instructions as a user message
            if later.role == "user" and later.caller is None:
                said = content_text(later.output)
                if said.startswith(SKILL_PREAMBLE):
                    text = said
                break
        found.pop(name, None)
        found[name] = text
    sections: list[str] = []
    names: list[str] = []
    used = 0
    for name, text in reversed(found.items()):
        limit = min(limits.skill_tokens, limits.skills_tokens - used)
        if limit < min(MIN_SECTION_TOKENS, limits.skill_tokens):
            break
        body, n = _cut(text, limit, counter)
        if body:
            used += n
            names.append(name)
            sections.append(f"### {name}\n{body}")
    return sections, names


def _deferred_tools(metadata: Mapping[str, Any]) -> list[str]:
    tools = metadata.get("tools")
    listed = tools if isinstance(tools, list) else []
    return [
        str(t["name"])
        for t in listed
        if isinstance(t, Mapping) and t.get("defer_loading") is True and t.get("name")
    ]


def compose_restore(
    branch: Sequence[Node],
    kept: ContextCommit,
    *,
    metadata: Mapping[str, Any],
    limits: RestoreLimits,
    counter: Any,
    working_directory: str | None = None,
    hook_texts: Sequence[str] = (),
) -> tuple[str, Restored]:
    """The text of the restore message and what it holds (``""``: nothing to restore).

    ``branch`` is the branch up to the compacted HEAD (``dag.branch_path`` order),
    ``kept`` the commit after the fold (what the model still sees), ``metadata`` the
    session's (its ``tools``), ``counter`` the pipeline's tokenizer, ``hook_texts``
    what ``session_start`` hooks returned.
    """
    files, paths, disk, skipped = _files(branch, kept, limits, working_directory, counter)
    plan = _plan(branch)
    skills, skill_names = _skills(branch, limits, counter)
    deferred = _deferred_tools(metadata)
    parts: list[str] = []
    if files:
        parts.append("## Files read before the compaction\n\n" + "\n\n".join(files))
    if plan:
        parts.append("## Plan\n\n" + "\n\n".join(plan))
    if skills:
        parts.append("## Skills invoked before the compaction\n\n" + "\n\n".join(skills))
    if deferred:
        parts.append(
            "## Deferred tools\n\nThese tools are available through tool search: "
            + ", ".join(deferred)
        )
    extra = [t.strip() for t in hook_texts if t and t.strip()]
    parts.extend(extra)
    text = ""
    if parts:
        text = (
            "The conversation above was compacted; this restores what the summary does "
            "not hold exactly.\n\n" + "\n\n".join(parts)
        )
    restored = Restored(
        files=tuple(paths),
        from_disk=tuple(disk),
        skipped_files=tuple(skipped),
        plan=bool(plan),
        skills=tuple(skill_names),
        tools=tuple(deferred),
        hook_context=bool(extra),
    )
    return text, restored
