"""``ctxrules sessions``: the sessions of the store, oldest first.

``--json`` prints ``[{"id", "calls", "head", "source"}]``; ``calls`` counts the nodes a
session owns (a fork's inherited history is its base's).
"""

from __future__ import annotations

import argparse

from ._common import add_command, print_json, store_of


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``sessions`` subcommand."""
    add_command(sub, "sessions", run, help="list the sessions in the store")


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules sessions``; returns the exit code."""
    with store_of(args) as store:
        infos = store.list_sessions()
    if args.json:
        print_json(
            [{"id": s.id, "calls": s.calls, "head": s.head, "source": s.source} for s in infos]
        )
        return 0
    if not infos:
        print("no sessions (import some with `ctxrules import PATH`)")
    for s in infos:
        origin = f"fork of {s.base_session}" if s.base_session else s.source
        print(f"{s.id}  {s.calls:>6} calls  head {s.head or '-'}  {origin}")
    return 0
