"""Helpers shared by the subcommands: the common options, the store, JSON output and
file reading with clear errors."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import CtxrulesError

if TYPE_CHECKING:
    from ..store import CommitStore

__all__ = [
    "add_command",
    "add_now_option",
    "add_store_option",
    "epoch",
    "now_of",
    "open_store_from",
    "print_json",
    "read_text",
    "store_of",
]


def add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    run: Callable[[argparse.Namespace], int],
    *,
    help: str,
    description: str | None = None,
    positionals: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
    """Add a subcommand that works on the store: positionals, ``--store``, ``--json``.

    Returns the parser so a command can add its own options.
    """
    p = sub.add_parser(name, help=help, description=description)
    for arg in positionals:
        p.add_argument(arg)
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)
    return p


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--store PATH`` (default ``$CTXRULES_STORE``, else ``./.ctxrules``)."""
    parser.add_argument(
        "--store",
        metavar="PATH",
        default=None,
        help="store directory or .db file (default: $CTXRULES_STORE, else ./.ctxrules); "
        "memory:NAME for an in-memory store that lasts as long as the process",
    )


def epoch(text: str) -> float:
    """An argparse type: a finite time in seconds since the epoch."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(
            f"expected a finite number of seconds since the epoch, got {text!r}"
        )
    return value


def add_now_option(parser: argparse.ArgumentParser, help: str) -> None:
    """Add ``--now EPOCH`` (a finite time; the commands default it to the wall clock)."""
    parser.add_argument("--now", metavar="EPOCH", type=epoch, default=None, help=help)


def now_of(args: argparse.Namespace) -> float:
    """``--now``, or the wall clock: the command line is where the clock is read."""
    return time.time() if args.now is None else float(args.now)


def open_store_from(args: argparse.Namespace) -> CommitStore:
    """Open the store named by ``--store`` (or the environment / default)."""
    from ..store import open_store

    return open_store(getattr(args, "store", None))


@contextmanager
def store_of(args: argparse.Namespace) -> Iterator[CommitStore]:
    """The store named by ``--store``, closed when the block ends (also on errors)."""
    store = open_store_from(args)
    try:
        yield store
    finally:
        store.close()


def print_json(obj: Any) -> None:
    """Write ``obj`` as indented JSON to stdout."""
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(obj), indent=2).decode() + "\n")


def read_text(path: str) -> str:
    """Read a UTF-8 text file (``-`` is stdin); bad bytes and missing files are clear errors."""
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise CtxrulesError("no such file", where=path) from None
    except IsADirectoryError:
        raise CtxrulesError("is a directory, not a file", where=path) from None
    except PermissionError:
        raise CtxrulesError("permission denied", where=path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CtxrulesError(
            f"not UTF-8 text (bad byte at offset {exc.start})", where=path
        ) from None
