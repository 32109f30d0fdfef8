"""``ctxrules sessions``: the sessions of the store, oldest first.

One line per session: id, when it was created (UTC: when an imported session was
recorded, its first node's time; else when it was stored), how many calls it owns, its
model, the importer's format, the file it came from (or the session it was forked from)
and a title.  The model is the recorded one
(``ctxrules.render.recorded_request``: set by the importer, or the recorded
request's).  The title is the session's ``title`` metadata, else the summary Claude
Code recorded, else the first user message, cut to ``TITLE`` characters.

``--json`` prints a list with one object per session holding every ``SessionInfo``
field (``id``, ``created_at``, ``head``, ``source``, ``import_key``,
``base_session``, ``base_node``, ``base_seq``, ``metadata``, ``calls``; ``created_at`` is
when the store got it) and the derived ``created`` (ISO 8601, UTC, as listed), ``model``
and ``title`` (``null`` when unknown).  ``calls``
counts the nodes a session owns (a fork's inherited history is its base's).
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from ..model import content_text
from ..render import recorded_request
from ..store import SessionInfo, Store
from ._common import print_json
from ._store import add_command, store_of
from ._terminal import echo

__all__ = ["TITLE", "add_parser", "created_at", "run", "session_title"]

#: How many characters of a title the listing shows.
TITLE = 60
#: How many characters of the source file name the listing shows (the start is cut).
SOURCE = 40


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``sessions`` subcommand."""
    add_command(
        sub,
        "sessions",
        run,
        description="List the sessions of the store, oldest first: id, created (UTC), "
        "calls owned, model, source and title.  Reads only: a store that does not "
        "exist is an error.",
        examples="""
ctxrules sessions
ctxrules sessions --json            # every field of every session, metadata included
ctxrules sessions --store memory:x  # an in-memory store of this process
""",
    )


def _first_user_text(store: Store, info: SessionInfo) -> str:
    """The first user message of the session's history (a fork's is its base's)."""
    root = info
    while root.base_session is not None:
        root = store.get_session(root.base_session)
    fallback = ""
    for node in store.iter_nodes(root.id):  # streamed: stops at the first request
        if node.role != "user" or node.caller is not None:
            continue
        text = " ".join(content_text(node.output).split())
        if text and not text.startswith("<"):  # <command-message>… wraps, it is not the ask
            return text
        fallback = fallback or text
    return fallback


def session_title(store: Store, info: SessionInfo) -> str | None:
    """A session's title: its ``title`` metadata, a Claude Code summary line, else its
    first user message (whitespace collapsed, not cut); ``None`` when it has none."""
    title = info.metadata.get("title")
    if isinstance(title, str) and title.strip():
        return " ".join(title.split())
    extra = info.metadata.get("extra_lines")
    summaries = [
        e["summary"]
        for e in (extra if isinstance(extra, list) else [])
        if isinstance(e, dict) and e.get("type") == "summary" and isinstance(e.get("summary"), str)
    ]
    if summaries and summaries[-1].strip():
        return " ".join(summaries[-1].split())
    return _first_user_text(store, info) or None


def _model(info: SessionInfo) -> str | None:

    return recorded_request(info.metadata).model


def created_at(info: SessionInfo) -> float:
    """When a session was created: when it was recorded (metadata ``recorded_at``, the
    first node's time, set at import) for an imported session, else when it was stored."""
    when = info.metadata.get("recorded_at")
    if info.base_session is None and isinstance(when, (int, float)) and not isinstance(when, bool):
        if 0 < when < 1e11:  # a time datetime can show (year < 5138)
            return float(when)
    return info.created_at


def _created(info: SessionInfo) -> str:
    return datetime.fromtimestamp(created_at(info), timezone.utc).isoformat()


def _cut(text: str, width: int, *, keep_end: bool = False) -> str:
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1) :] if keep_end else text[: width - 1] + "…"


def session_json(info: SessionInfo, title: str | None) -> dict[str, Any]:
    """The ``--json`` object of a session (see the module docstring)."""
    out = {f: msgspec.to_builtins(getattr(info, f)) for f in SessionInfo.__struct_fields__}
    out.update(created=_created(info), model=_model(info), title=title)
    return out


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules sessions``; returns the exit code."""
    with store_of(args) as store:
        infos = store.list_sessions()
        titles = [session_title(store, s) for s in infos]
    if args.json:
        print_json([session_json(s, t) for s, t in zip(infos, titles)])
        return 0
    if not infos:
        print("no sessions (import some with `ctxrules import PATH`)")
        return 0
    rows = [("ID", "CREATED (UTC)", "CALLS", "MODEL", "FORMAT", "SOURCE", "TITLE")]
    for s, title in zip(infos, titles):
        origin = f"fork of {s.base_session}" if s.base_session else Path(s.source).name
        fmt = s.metadata.get("format")
        when = datetime.fromtimestamp(created_at(s), timezone.utc).strftime("%Y-%m-%d %H:%M")
        rows.append(
            (
                s.id,
                when,
                str(s.calls),
                _model(s) or "-",
                fmt if isinstance(fmt, str) and fmt else "-",
                _cut(origin or "-", SOURCE, keep_end=True),
                _cut(title or "-", TITLE),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        cells = [c.rjust(w) if i == 2 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        echo("  ".join([*cells, r[-1]]).rstrip())
    return 0
