"""Helpers shared by the subcommands: the common options, the store, JSON output and
file reading with clear errors."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import CtxrulesError

if TYPE_CHECKING:
    from ..store import Store

__all__ = [
    "add_command",
    "add_store_option",
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
        help="store directory (default: $CTXRULES_STORE, else ./.ctxrules)",
    )


def open_store_from(args: argparse.Namespace) -> Store:
    """Open the store named by ``--store`` (or the environment / default)."""
    from ..store import open_store

    return open_store(getattr(args, "store", None))


@contextmanager
def store_of(args: argparse.Namespace) -> Iterator[Store]:
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
