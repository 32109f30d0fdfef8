"""``ctxrules import PATH...``: read transcripts into the store (idempotent, all-or-nothing).

``--json`` prints ``{"sessions": [{"id", "calls", "source"}]}``, one entry per session
the files hold, whether it was created now or found already imported.
"""

from __future__ import annotations

import argparse

from ._common import add_command, print_json, store_of


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``import`` subcommand."""
    p = add_command(
        sub,
        "import",
        run,
        help="import transcripts (Claude Code, OpenAI / Anthropic messages, SWE-agent, …)",
        description="Import transcript files into the store (created if missing).  Every "
        "file is parsed before anything is written; a file already imported (same bytes) "
        "is found, not duplicated.",
        examples="""
ctxrules import ~/.claude/projects/*/*.jsonl          # Claude Code sessions
ctxrules import run.traj --format swe-agent --json    # name the format, print the ids
ctxrules import cassettes/*.yaml --store ./replay     # recorded provider traffic
""",
        creates_store=True,
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument(
        "--format",
        default="auto",
        help="importer name (see `ctxrules plugins`), or auto to detect (default)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules import``; returns the exit code."""
    from ..importers import import_paths

    with store_of(args) as store:
        results = import_paths(store, args.paths, format=args.format)
    if args.json:
        print_json(
            {"sessions": [{"id": r.id, "calls": r.calls, "source": r.source} for r in results]}
        )
        return 0
    for r in results:
        verb = "imported" if r.created else "already imported"
        print(f"{verb} {r.id}: {r.calls} calls from {r.source} ({r.format})")
    return 0
