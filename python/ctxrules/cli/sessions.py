"""``ctxrules sessions``: the sessions of the store, oldest first."""

from __future__ import annotations

import argparse

from ._common import add_store_option, open_store_from, print_json


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``sessions`` subcommand."""
    p = sub.add_parser("sessions", help="list the sessions in the store")
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules sessions``; returns the exit code."""
    store = open_store_from(args)
    try:
        infos = store.list_sessions()
    finally:
        store.close()
    rows = [
        {
            "id": s.id,
            "calls": s.calls,
            "head": s.head,
            "source": s.source,
            "format": s.metadata.get("format", ""),
            "base_session": s.base_session,
            "created_at": s.created_at,
        }
        for s in infos
    ]
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print("no sessions (import some with `ctxrules import PATH`)")
    for r in rows:
        origin = f"fork of {r['base_session']}" if r["base_session"] else r["source"]
        print(f"{r['id']}  {r['calls']:>6} calls  head {r['head'] or '-'}  {origin}")
    return 0
