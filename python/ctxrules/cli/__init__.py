"""The ``ctxrules`` command line.

Each subcommand lives in its own module of this package and exposes
``add_parser(subparsers)``; ``_commands.COMMANDS`` lists them with their one-line
summaries.  Only the module of the command being run is imported (``ctxrules --help``
and ``--version`` import none), so start-up costs what that command needs.  The parser
a module adds (``_common.subcommand``: a description and examples in ``--help``) sets
``func`` to a callable taking the parsed arguments and returning an exit code.  A
``CtxrulesError`` prints one line to stderr and exits 1; a usage error prints one line
and exits 2; no traceback is shown for user errors.

Arguments naming a session or node take the full id or, as in git, a unique prefix of
it.  Only ``import``, ``demo`` and ``store copy`` (its destination) create a store;
every other command needs an existing one and names the location when there is none.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence
from typing import Any, TextIO

from .. import _core
from ..errors import CtxrulesError, CtxrulesWarning
from ._commands import COMMANDS, module_of
from ._common import Parser
from ._terminal import printable

__all__ = ["COMMANDS", "build_parser", "main"]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every subcommand when ``command`` is None, else that one
    in full and the others by name and summary only (their modules are not imported)."""
    parser = Parser(
        prog="ctxrules",
        description="Decide what an LLM is fed on every call.",
        epilog="`ctxrules COMMAND --help` describes a command, with examples.",
    )
    parser.add_argument("--version", action="version", version=f"ctxrules {_core.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in COMMANDS.items():
        if command is None or name == command:
            importlib.import_module(f".{module_of(name)}", __name__).add_parser(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def _command_in(argv: Sequence[str]) -> str:
    """The subcommand ``argv`` names: its first argument that is not an option (the
    top-level parser has no option taking a value), or ``""``."""
    return next((a for a in argv if not a.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (also the process's when run as a script)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_in(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        with warnings.catch_warnings():
            shown = warnings.showwarning
            warnings.showwarning = lambda *a, **k: _one_line_warning(args.command, shown, *a, **k)
            return int(args.func(args) or 0)
    except CtxrulesError as exc:
        print(f"ctxrules {args.command}: error: {printable(exc)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print(f"ctxrules {args.command}: interrupted", file=sys.stderr)
        return 130


def _one_line_warning(
    command: str,
    fallback: Any,
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    # Our own warnings are about the user's setup: one line, like errors, no source line.
    if issubclass(category, CtxrulesWarning):
        print(f"ctxrules {command}: warning: {printable(message)}", file=sys.stderr)
    else:
        fallback(message, category, filename, lineno, file, line)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
