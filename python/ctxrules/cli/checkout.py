"""``ctxrules checkout SESSION NODE``: move HEAD (display only: nothing is rerun)."""

from __future__ import annotations

import argparse

from ._common import add_store_option, open_store_from, print_json


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``checkout`` subcommand."""
    p = sub.add_parser(
        "checkout",
        help="move a session's HEAD to a node or sibling (never reruns anything)",
    )
    p.add_argument("session")
    p.add_argument("node")
    p.add_argument(
        "--leaf", action="store_true", help="go on to the newest end of the branch below NODE"
    )
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules checkout``; returns the exit code."""
    from .. import dag

    store = open_store_from(args)
    try:
        info = dag.checkout(store, args.session, args.node, to_leaf=args.leaf)
        pos, total = dag.siblings(store, args.session, args.node)
    finally:
        store.close()
    if args.json:
        print_json(
            {"session": info.id, "head": info.head, "node": args.node, "sibling": [pos, total]}
        )
    else:
        print(f"{info.id}: HEAD is {info.head} (node {args.node} is < {pos}/{total} >)")
    return 0
