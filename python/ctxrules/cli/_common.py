"""Helpers shared by the subcommands: the parser of every command, the common options,
the store (opened, with the ids the arguments name resolved), JSON output and file
reading with clear errors."""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, NoReturn

import msgspec

from .. import dag
from ..config import PRESETS, PipelineConfig, find_config, load_config
from ..errors import CtxrulesError
from ..limits import MAX_EPOCH, MIN_EPOCH
from ..store import CommitStore, open_store
from ._commands import COMMANDS

__all__ = [
    "IdKind",
    "Parser",
    "add_command",
    "add_config_options",
    "add_id_argument",
    "add_now_option",
    "add_store_option",
    "config_of",
    "epoch",
    "now_of",
    "open_store_from",
    "print_json",
    "read_text",
    "resolve_ids",
    "store_of",
    "subcommand",
]

#: What an id argument names: a session, or a node of the command's session.
IdKind = Literal["session", "node"]

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


def add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    run: Callable[[argparse.Namespace], int],
    *,
    help: str | None = None,
    description: str,
    examples: str,
    ids: tuple[tuple[str, IdKind], ...] = (),
    creates_store: bool = False,
) -> argparse.ArgumentParser:
    """Add a subcommand that works on the store: its id positionals, ``--store``, ``--json``.

    ``ids`` lists positionals naming a session, node or commit (see ``add_id_argument``).
    Returns the parser so a command can add its own options.
    """
    p = subcommand(sub, name, run, help=help, description=description, examples=examples)
    for arg, kind in ids:
        add_id_argument(p, arg, kind=kind)
    add_store_option(p, creates=creates_store)
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


_ID_HELP: dict[str, str] = {
    "session": "session id, or a unique start of one (`ctxrules sessions` lists them)",
    "node": "node id, or a unique start of one (`ctxrules log SESSION` lists them)",
}


def add_id_argument(
    parser: argparse.ArgumentParser, *names: str, kind: IdKind, **kwargs: Any
) -> None:
    """Add an argument naming a session, node or commit; the store resolves it (a full id
    or a unique prefix) when the command opens it (``open_store_from``).

    A ``node`` belongs to the command's ``session`` argument.  ``help`` defaults to
    what the kind accepts.
    """
    kwargs.setdefault("help", _ID_HELP[kind])
    action = parser.add_argument(*names, **kwargs)
    ids = dict(parser.get_default("id_args") or {})
    ids[action.dest] = kind
    parser.set_defaults(id_args=ids)


def add_store_option(parser: argparse.ArgumentParser, *, creates: bool = False) -> None:
    """Add ``--store PATH`` (default ``$CTXRULES_STORE``, else ``./.ctxrules``; a
    ``postgresql://`` URL or ``memory:NAME`` too).

    Only a command that ``creates`` (puts sessions in) makes a store where there is
    none; for every other one a location without a store is an error naming it.
    """
    made = "created if missing" if creates else "must exist; `ctxrules import` creates one"
    parser.add_argument(
        "--store",
        metavar="PATH",
        default=None,
        help="store directory or .db file (default: $CTXRULES_STORE, else ./.ctxrules; "
        f"{made}); postgresql://USER@HOST/DB for a PostgreSQL store; memory:NAME for an "
        "in-memory store that lasts as long as the process",
    )
    parser.set_defaults(creates_store=creates)


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--config FILE`` and ``--preset NAME`` (the rule configuration; ``config_of``)."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="rule configuration: ctxrules.toml or pyproject.toml "
        "(default: the nearest one, else the default preset)",
    )

    parser.add_argument(
        "--preset",
        metavar="NAME",
        default=None,
        help=f"a shipped configuration instead of a file ({', '.join(PRESETS)})",
    )


def config_of(args: argparse.Namespace) -> PipelineConfig:
    """The rule configuration ``--config`` / ``--preset`` name (else the nearest file)."""

    if args.config and args.preset:
        raise CtxrulesError("give --config or --preset, not both")
    if args.config:
        return load_config(args.config)
    if args.preset:
        return PipelineConfig.preset(args.preset)
    return find_config()


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


def open_store_from(args: argparse.Namespace) -> CommitStore:
    """Open the store named by ``--store`` (or the environment / default) and resolve the
    ids the arguments name (``resolve_ids``); a store is created only for a command
    that creates one (``add_store_option``)."""

    store = open_store(
        getattr(args, "store", None), create=bool(getattr(args, "creates_store", False))
    )
    try:
        resolve_ids(store, args)
    except BaseException:
        store.close()
        raise
    return store


def resolve_ids(store: CommitStore, args: argparse.Namespace) -> None:
    """Replace each id argument (``add_id_argument``) by the full id it names, in place:
    the session first, then its nodes (``ctxrules.dag.resolve_session`` / ``resolve_node``)."""

    kinds: dict[str, IdKind] = getattr(args, "id_args", None) or {}
    for dest, kind in kinds.items():
        if kind == "session" and getattr(args, dest) is not None:  # None: an optional one
            setattr(args, dest, dag.resolve_session(store, getattr(args, dest)).id)
    for dest, kind in kinds.items():
        value = getattr(args, dest)
        if value is None or kind == "session":
            continue
        setattr(args, dest, dag.resolve_node(store, args.session, value).id)


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
