"""``ctxrules checkout SESSION NODE``: move HEAD (display only: nothing is rerun)."""

from __future__ import annotations

import argparse

from .. import dag
from ._common import print_json
from ._store import add_command, store_of
from ._terminal import echo


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``checkout`` subcommand."""
    p = add_command(
        sub,
        "checkout",
        run,
        description="Move a session's HEAD to NODE (a tool call: show that variant).  "
        "Display only: nothing is rerun, nothing appended, no files are touched.",
        examples="""
ctxrules checkout s_a5a2 n_deff     # HEAD to that node (unique id prefixes are enough)
ctxrules checkout s_a5a2 n_deff --leaf --json   # on to the newest end of its branch
""",
        ids=(("session", "session"), ("node", "node")),
    )
    p.add_argument(
        "--leaf", action="store_true", help="go on to the newest end of the branch below NODE"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules checkout``; returns the exit code."""

    with store_of(args) as store:
        info = dag.checkout(store, args.session, args.node, to_leaf=args.leaf)
        pos, total = dag.siblings(store, args.session, args.node)
    if args.json:
        print_json(
            {"session": info.id, "head": info.head, "node": args.node, "sibling": [pos, total]}
        )
    else:
        echo(f"{info.id}: HEAD is {info.head} (node {args.node} is < {pos}/{total} >)")
    return 0
