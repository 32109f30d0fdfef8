"""``ctxrules import PATH...``: read transcripts into the store (idempotent, all-or-nothing).

A PATH may be a directory: every transcript under it is imported, and the files no
importer knows are listed as skipped.  One line per session says whether it was
imported now, grew (a transcript appended to since: the calls it added) or was there
already.  ``--json`` prints ``{"sessions": [{"id", "calls", "source"}], "skipped":
[{"path", "reason"}]}``, one entry per session the files hold, whether it was created
now, grew or was found already imported.
"""

from __future__ import annotations

import argparse

from ..importers import import_report
from ._common import print_json, print_left_out
from ._store import add_command, store_of
from ._terminal import echo


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``import`` subcommand."""
    p = add_command(
        sub,
        "import",
        run,
        description="Import transcript files, or every transcript under a directory, into "
        "the store (created if missing).  Every file is parsed before anything is "
        "written; a file already imported (same bytes) is found, not duplicated, and a "
        "Claude Code session that grew since is appended to.",
        examples="""
ctxrules import ~/.claude/projects                    # every Claude Code session, sub-agents too
ctxrules import run.traj --format swe-agent --json    # name the format, print the ids
ctxrules import eval/output.jsonl                     # OpenHands evaluation: a session per instance
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

    with store_of(args) as store:
        report = import_report(store, args.paths, format=args.format)
    if args.json:
        sessions = [{"id": r.id, "calls": r.calls, "source": r.source} for r in report.sessions]
        print_json({"sessions": sessions, "skipped": report.skipped})
        return 0
    for r in report.sessions:
        if r.created:
            echo(f"imported {r.id}: {r.calls} calls from {r.source} ({r.format})")
        elif r.added:
            echo(
                f"appended {r.added} calls to {r.id}: {r.calls} calls from {r.source} ({r.format})"
            )
        else:
            echo(f"already imported {r.id}: {r.calls} calls from {r.source} ({r.format})")
    print_left_out(report.skipped, ())
    return 0
