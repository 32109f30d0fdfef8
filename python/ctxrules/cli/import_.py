"""``ctxrules import PATH...``: read transcripts into the store (idempotent, all-or-nothing)."""

from __future__ import annotations

import argparse

from ._common import add_store_option, open_store_from, print_json


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``import`` subcommand."""
    p = sub.add_parser(
        "import",
        help="import transcripts (Claude Code, OpenAI / Anthropic messages, SWE-agent, …)",
        description="Import transcript files into the store.  Every file is parsed before "
        "anything is written; a file already imported (same bytes) is found, not duplicated.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument(
        "--format",
        default="auto",
        help="importer name (see `ctxrules plugins`), or auto to detect (default)",
    )
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules import``; returns the exit code."""
    from ..importers import import_paths

    store = open_store_from(args)
    try:
        results = import_paths(store, args.paths, format=args.format)
    finally:
        store.close()
    if args.json:
        print_json(
            {
                "sessions": [
                    {
                        "id": r.id,
                        "calls": r.calls,
                        "source": r.source,
                        "format": r.format,
                        "created": r.created,
                    }
                    for r in results
                ]
            }
        )
        return 0
    for r in results:
        verb = "imported" if r.created else "already imported"
        print(f"{verb} {r.id}: {r.calls} calls from {r.source} ({r.format})")
    return 0
