"""``ctxrules store``: work on whole stores.  ``store copy SRC DST`` copies every session
and commit from one store to another (SQLite, PostgreSQL or memory; see
``ctxrules.store.copy``), verified by their ids, idempotent, refusing different
content under the same id.  A progress bar goes to stderr when it is a terminal.

``--json`` prints the report::

    {"source": str, "destination": str, "sessions": int, "created": int,
     "nodes_copied": int, "commits_copied": int, "nodes_verified": int,
     "commits_verified": int}
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import msgspec

from .. import store as stores
from ..errors import CtxrulesError
from ..store.copy import copy_store
from ._common import print_json, subcommand
from ._terminal import echo

__all__ = ["add_parser", "run_copy"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``store`` subcommand group and its ``copy`` command."""
    group = subcommand(
        sub,
        "store",
        _usage,
        description="Commands on whole stores.  `store copy SRC DST` copies every session "
        "and commit of one store into another: a SQLite store (a directory or .db file), a "
        "PostgreSQL database (postgresql://USER@HOST:PORT/DB) or memory:NAME.",
        examples="""
ctxrules store copy .ctxrules postgresql://me@db.internal/agents   # SQLite to PostgreSQL
ctxrules store copy postgresql://me@db.internal/agents backup.db   # and back
""",
    )
    commands = group.add_subparsers(dest="store_command", metavar="COMMAND")
    p = subcommand(
        commands,
        "copy",
        run_copy,
        help="copy every session and commit of SRC into DST, verified",
        description="Copy every session (its nodes, HEAD and metadata) and every commit of "
        "SRC into DST, then read them back from DST and compare them by id.  What DST has "
        "already is checked, not written again, so running it twice is harmless; a node "
        "or commit that DST holds with other content under the same id stops the copy "
        "before anything is written.  DST is created if missing; SRC must exist.",
        examples="""
ctxrules store copy .ctxrules postgresql://me@db.internal/agents
ctxrules store copy postgresql://me@db.internal/agents ./backup.db --json
ctxrules store copy old-store new-store          # two SQLite stores
""",
    )
    p.add_argument("src", metavar="SRC", help="the store to copy from (must exist)")
    p.add_argument("dst", metavar="DST", help="the store to copy into (created if missing)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _usage(args: argparse.Namespace) -> int:
    raise CtxrulesError(
        "name a store command", hint="`ctxrules store copy SRC DST`; see `ctxrules store --help`"
    )


@contextmanager
def _progress() -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback drawing a bar on stderr when it is a terminal (else ``None``)."""
    if not sys.stderr.isatty():
        yield None
        return
    # deferred: rich costs ~40 ms to import, paid only when a table or bar is drawn
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "copying sessions",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
    ) as bar:
        task = bar.add_task("copy", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def run_copy(args: argparse.Namespace) -> int:
    """Run ``ctxrules store copy``; returns the exit code."""
    src = stores.open_store(args.src, create=False)
    try:
        dst = stores.open_store(args.dst)
        try:
            if dst.location == src.location:
                raise CtxrulesError(
                    "SRC and DST are the same store", where=src.location, hint="name two stores"
                )
            with _progress() as progress:
                report = copy_store(src, dst, progress=progress)
        finally:
            dst.close()
    finally:
        src.close()
    if args.json:
        print_json(
            {"source": src.location, "destination": dst.location, **msgspec.to_builtins(report)}
        )
        return 0
    echo(
        f"{report.sessions} sessions from {src.location} are in {dst.location}: "
        f"{report.created} created, {report.nodes_copied} nodes and "
        f"{report.commits_copied} commits copied; {report.nodes_verified} nodes and "
        f"{report.commits_verified} commits verified by id"
    )
    return 0
