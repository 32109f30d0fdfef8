"""``ctxrules fork SESSION NODE``: a new session whose HEAD is NODE, sharing its history."""

from __future__ import annotations

import argparse

from .. import dag
from ._common import print_json
from ._store import add_command, store_of
from ._terminal import echo


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``fork`` subcommand."""
    add_command(
        sub,
        "fork",
        run,
        description="Start a new session whose HEAD is NODE of SESSION.  The history up "
        "to there is shared, not copied; what either session appends later is its own.",
        examples="""
ctxrules fork s_a5a2 n_deff         # prints the new session's id
ctxrules fork s_a5a2 n_deff --json  # id, head, base_session, base_node
""",
        ids=(("session", "session"), ("node", "node")),
    )


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules fork``; returns the exit code."""

    with store_of(args) as store:
        info = dag.fork(store, args.session, args.node)
    if args.json:
        print_json(
            {
                "id": info.id,
                "head": info.head,
                "base_session": info.base_session,
                "base_node": info.base_node,
            }
        )
    else:
        echo(f"forked {args.session} at {args.node}: new session {info.id}")
    return 0
