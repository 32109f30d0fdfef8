"""The options of commands that work on a store: the store location, the ids of
sessions and nodes (a full id or a unique prefix), the rule configuration; opening the
store and resolving the ids.  Kept apart from ``_common`` so that commands which need
no store (``count``, ``plugins``, ``--help``) never import the store, the graph or the
configuration."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from .. import dag
from ..config import PRESETS, PipelineConfig, find_config, load_config
from ..errors import CtxrulesError
from ..store import CommitStore, open_store
from ._common import subcommand

__all__ = [
    "IdKind",
    "add_command",
    "add_config_options",
    "add_id_argument",
    "add_store_option",
    "config_of",
    "open_store_from",
    "resolve_ids",
    "store_of",
]

#: What an id argument names: a session, or a node of the command's session.
IdKind = Literal["session", "node"]


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
