"""``ctxrules fork SESSION NODE``: a new session whose HEAD is NODE, sharing its history."""

from __future__ import annotations

import argparse

from ._common import add_store_option, open_store_from, print_json


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``fork`` subcommand."""
    p = sub.add_parser("fork", help="start a new session at a node (history shared, not copied)")
    p.add_argument("session")
    p.add_argument("node")
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules fork``; returns the exit code."""
    from .. import dag

    store = open_store_from(args)
    try:
        info = dag.fork(store, args.session, args.node)
    finally:
        store.close()
    out = {
        "id": info.id,
        "head": info.head,
        "base_session": info.base_session,
        "base_node": info.base_node,
    }
    if args.json:
        print_json(out)
    else:
        print(f"forked {args.session} at {args.node}: new session {info.id}")
    return 0
