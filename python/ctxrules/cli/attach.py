"""``ctxrules attach SESSION SOURCE``: stage another session's context for the next request.

Appends an attach pointer at SESSION's HEAD naming SOURCE at ``--head`` (default its
HEAD) and the commit there (made under the rule configuration if there is none, its
rules priced at the model of SESSION's next request — ``--model``, else the one its
recording names at HEAD — as ``attach(config=engine)`` does).  The next request of
SESSION carries SOURCE's items between ``<attached …>`` markers, once; the rules treat
them like SESSION's own unless ``--locked``.
"""

from __future__ import annotations

import argparse

from ..context_sources import SourcesConfig
from ..engine import Engine, EngineConfig, attach
from ..render.defaults import recorded_request
from ._common import add_now_option, now_of, print_json, subcommand
from ._store import add_config_options, add_id_argument, add_store_option, config_of, store_of
from ._terminal import echo

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``attach`` subcommand."""
    p = subcommand(
        sub,
        "attach",
        run,
        description="Append an attach pointer at SESSION's HEAD: the next request of "
        "SESSION carries SOURCE's context at --head (default its HEAD) between "
        "<attached …> markers, expanded once however often it is attached.  The rules "
        "may compress those items like SESSION's own unless --locked.  Nothing is sent "
        "now; what SESSION already shows (history a fork shares) is left out.",
        examples="""
ctxrules attach s_67f3 s_d85c                  # s_d85c as it is now
ctxrules attach s_67f3 s_d85c --head n_29fd --locked --json
""",
    )
    add_id_argument(p, "session", kind="session")
    add_id_argument(
        p, "source", kind="session", help="the session to attach, an id or unique prefix"
    )
    p.add_argument(
        "--head",
        metavar="NODE",
        default=None,
        help="the node of SOURCE to attach, an id or unique prefix (default SOURCE's HEAD)",
    )
    p.add_argument(
        "--locked",
        action="store_true",
        help="lock the attached items: no rule ages, clears or folds them",
    )
    p.add_argument(
        "--provider",
        default=None,
        help="the provider SESSION's next request goes to (default: the session's, else "
        "anthropic); SOURCE's commit is priced at its cache",
    )
    p.add_argument(
        "--model",
        default=None,
        help="the model SESSION's next request goes to (default: the session's at HEAD, "
        "else the provider's); SOURCE's commit is priced at it",
    )
    add_now_option(p, "clock for the rules making SOURCE's commit (default: now)")
    add_config_options(p)
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print the pointer as JSON")


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules attach``; returns the exit code."""

    config = config_of(args)
    with store_of(args) as store:
        info = store.get_session(args.session)
        provider = args.provider or recorded_request(info.metadata).provider or "anthropic"
        # The engine prices the rules at the model of the session's next request, the
        # request the block is attached for (a bare config would take the provider's
        # default model's cache prices).  Nothing is rendered: no context sources.
        engine = Engine(
            store,
            EngineConfig(
                provider=provider,
                model=args.model,
                sources=SourcesConfig(git_status=False, instruction_files=False, date=False),
            ),
            pipeline=config,
        )
        node = attach(
            store,
            info.id,
            args.source,
            args.head,
            locked=args.locked,
            config=engine,
            now=now_of(args),
        )
    ref = node.metadata["attach"]
    if args.json:
        print_json({"node": node.id, **ref, "locked": args.locked, "session_id": args.session})
    else:
        echo(
            f"attached {ref['session']} at {ref['head']} (commit {ref['commit']}) to "
            f"{args.session} as {node.id}{' (locked)' if args.locked else ''}; the next "
            "request carries it"
        )
    return 0
