"""The ``ctxrules`` command line.

Each subcommand lives in its own module of this package and exposes
``add_parser(subparsers)``; the parser it adds (``_common.subcommand``: a description
and examples in ``--help``) sets ``func`` to a callable taking the parsed arguments and
returning an exit code.  A ``CtxrulesError`` prints one line to stderr and exits 1; a
usage error prints one line and exits 2; no traceback is shown for user errors.

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

from ..errors import CtxrulesError, CtxrulesWarning
from ._common import Parser

__all__ = ["COMMANDS", "build_parser", "main"]

#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = (
    "demo",
    "count",
    "plugins",
    "import_",
    "sessions",
    "log",
    "commit",
    "compact",
    "checkout",
    "fork",
    "attach",
    "merge",
    "render",
    "stats",
    "quality",
    "rerender",
    "tune",
    "view",
    "store",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, every subcommand included."""
    from .. import __version__

    parser = Parser(
        prog="ctxrules",
        description="Decide what an LLM is fed on every call.",
        epilog="`ctxrules COMMAND --help` describes a command, with examples.",
    )
    parser.add_argument("--version", action="version", version=f"ctxrules {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f".{name}", __name__)
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (also the process's when run as a script)."""
    parser = build_parser()
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
        print(f"ctxrules {args.command}: error: {exc}", file=sys.stderr)
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
        print(f"ctxrules {command}: warning: {message}", file=sys.stderr)
    else:
        fallback(message, category, filename, lineno, file, line)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
