"""Helpers shared by the subcommands: the parser of every command, ``--now``, JSON
output and file reading with clear errors.  What works on a store (``--store``, ids,
``--config`` / ``--preset``) is in ``_store``."""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from ..errors import CtxrulesError
from ..limits import MAX_EPOCH, MIN_EPOCH
from ._commands import COMMANDS
from ._terminal import echo

__all__ = [
    "Parser",
    "add_now_option",
    "add_source_options",
    "epoch",
    "now_of",
    "port_number",
    "print_json",
    "print_left_out",
    "read_text",
    "subcommand",
]

NOW_FORMS = (
    "seconds since the epoch (1767225600) or an ISO 8601 time "
    "(2026-01-01T00:00:00Z, 2026-01-01T01:00:00+01:00); a time without an offset is UTC"
)


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` shows the usage)\n")


def subcommand(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    run: Callable[[argparse.Namespace], int],
    *,
    help: str | None = None,
    description: str,
    examples: str,
) -> argparse.ArgumentParser:
    """Add a subcommand with its one-line ``help``, a ``description`` and ``examples``.

    A top-level command's ``help`` is its summary in ``ctxrules.cli._commands.COMMANDS``
    (the one place it is written); a nested command (``store copy``) passes its own.

    ``examples`` is shown verbatim under "examples:" at the end of ``--help``
    (command lines, each optionally followed by ``# what it does``).
    """
    p = sub.add_parser(
        name,
        help=COMMANDS[name] if help is None else help,
        description=textwrap.fill(" ".join(description.split()), width=88),
        epilog="examples:\n" + "\n".join(f"  {line}" for line in examples.strip().splitlines()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=run)
    return p


def port_number(text: str) -> int:
    """A ``--port`` value: 0 to 65535 (0: any free port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535)")
    return value


def epoch(text: str) -> float:
    """An argparse type: a time, as seconds since the epoch or ISO 8601 (see ``NOW_FORMS``).

    A time without an offset is UTC (as the importers read transcript timestamps).
    Non-finite numbers and times outside the years 1 to 9999 are refused.
    """
    value = _epoch(text.strip())
    if value is None or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite time: {NOW_FORMS}; got {text!r}")
    if not MIN_EPOCH <= value <= MAX_EPOCH:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time between the years 1 and 9999 (UTC); expected {NOW_FORMS}"
        )
    return value


def _epoch(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        pass
    iso = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text  # 3.10 reads no "Z"
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def add_now_option(parser: argparse.ArgumentParser, help: str) -> None:
    """Add ``--now TIME`` (see ``epoch``; the commands default it to the wall clock)."""
    parser.add_argument(
        "--now",
        metavar="TIME",
        type=epoch,
        default=None,
        help=f"{help}; {NOW_FORMS}",
    )


def now_of(args: argparse.Namespace) -> float:
    """``--now``, or the wall clock: the command line is where the clock is read."""
    return time.time() if args.now is None else float(args.now)


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


def add_source_options(p: argparse.ArgumentParser) -> None:
    """``--format`` and ``--exclude-session`` of the commands that read transcripts
    (``rerender``, ``tune``)."""
    p.add_argument(
        "--format",
        default="auto",
        help="importer of the transcript SOURCEs (see `ctxrules plugins`), or auto to "
        "detect (default)",
    )
    p.add_argument(
        "--exclude-session",
        action="append",
        default=[],
        dest="exclude_sessions",
        metavar="ID|FILE",
        help="leave out this session: its full id, or the transcript file it came from "
        "(repeatable)",
    )


def print_left_out(skipped: Any, excluded: Any, file: Any = None) -> None:
    """One line per file of the SOURCE folders that no importer read (with why) and per
    session ``--exclude-session`` left out."""
    for s in skipped:
        echo(f"skipped {s.path}: {s.reason}", file=file)
    for sid in excluded:
        echo(f"excluded {sid}", file=file)
