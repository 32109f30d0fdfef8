"""``ctxrules merge TARGET PEER...``: merge other heads into a session with one turn.

Each PEER (``SESSION`` or ``SESSION@NODE``, ids or unique prefixes) is attached to
TARGET's HEAD — the ``--base`` one locked — followed by the ``--instruction``; the
request at that instruction is the merge turn, and its commit names TARGET's previous
commit and the peers' commits as its parents.  ``--answer FILE`` is the model's answer
to that request (a response body as the provider returns it, JSON): it is recorded and
the peers are marked merged.  ``--dry-run`` prints the request instead and stores
nothing.  No model is called: send the ``--dry-run`` request yourself, then merge again
with its answer.
"""

from __future__ import annotations

import argparse
import sys

import msgspec

from ..context_sources import SourcesConfig
from ..dag import resolve_node, resolve_session
from ..engine import Engine, EngineConfig, check_answer, merge
from ..errors import ValidationError
from ..store import CommitStore
from ._common import add_now_option, now_of, print_json, read_text, subcommand
from ._store import add_config_options, add_id_argument, add_store_option, config_of, store_of
from ._terminal import echo

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``merge`` subcommand."""
    p = subcommand(
        sub,
        "merge",
        run,
        description="Attach each PEER (SESSION or SESSION@NODE) to TARGET's HEAD, the "
        "--base one locked so the model sees it in full, then the --instruction; the "
        "request there is the merge turn, and its commit has TARGET's previous commit "
        "and the peers' commits as parents.  With --answer FILE (the model's response "
        "body, JSON) the answer is recorded and the peers are marked merged; with "
        "--dry-run the request is printed and nothing is stored.",
        examples="""
ctxrules merge s_67f3 s_d85c s_18ed --instruction "Combine both" --dry-run  # the request
ctxrules merge s_67f3 s_d85c s_18ed --instruction "Combine both" --answer answer.json
ctxrules merge s_67f3 s_d85c s_18ed@n_29fd --base s_18ed --instruction "Merge" --answer a.json
ctxrules merge s_67f3 s_d85c --instruction "Pick one" --provider openai-chat --dry-run --json
""",
    )
    add_id_argument(p, "target", kind="session", help="the session to merge into (id or prefix)")
    p.add_argument(
        "peers",
        nargs="+",
        metavar="PEER",
        help="a session to merge (its HEAD), or SESSION@NODE; ids or unique prefixes",
    )
    p.add_argument("--instruction", required=True, help="what the model should do with them")
    p.add_argument(
        "--base",
        metavar="PEER",
        default=None,
        help="the peer attached locked, sent in full (default: the first PEER)",
    )
    p.add_argument(
        "--provider",
        default=None,
        help="the provider whose request is made (default: the session's, else anthropic)",
    )
    p.add_argument(
        "--model", default=None, help="model (default: the session's, else the provider's)"
    )
    p.add_argument(
        "--sources",
        action="store_true",
        help="collect the context sources (instruction files, git status, date) of the "
        "working directory as a live agent would",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--answer",
        metavar="FILE",
        help="the model's response to the merge request (JSON, as the provider returns it; "
        "- reads stdin)",
    )
    what.add_argument("--dry-run", action="store_true", help="print the request and store nothing")
    add_now_option(p, "clock for the rules and the nodes' time (default: now)")
    add_config_options(p)
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def _peer(store: CommitStore, text: str) -> tuple[str, str | None]:
    """``SESSION`` or ``SESSION@NODE`` (ids or unique prefixes) → full ids."""

    session, sep, node = text.partition("@")
    if sep and not node:
        raise ValidationError(f"{text!r} names no node after '@'", hint="SESSION or SESSION@NODE")
    sid = resolve_session(store, session).id
    return sid, resolve_node(store, sid, node).id if node else None


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules merge``; returns the exit code."""

    config = config_of(args)
    answer = None
    if args.answer is not None:
        try:
            answer = msgspec.json.decode(read_text(args.answer))
        except msgspec.DecodeError as exc:
            raise ValidationError(f"not JSON: {exc}", where=args.answer) from None
    with store_of(args) as store:
        info = store.get_session(args.target)
        recorded = info.metadata.get("provider")
        provider = args.provider or (
            recorded if isinstance(recorded, str) and recorded else "anthropic"
        )
        sources = (
            SourcesConfig()
            if args.sources
            else SourcesConfig(git_status=False, instruction_files=False, date=False)
        )
        engine = Engine(
            store,
            EngineConfig(provider=provider, model=args.model, sources=sources),
            pipeline=config,
        )
        if answer is not None:
            check_answer(engine, answer)  # refused before anything is staged
        peers = [_peer(store, p) for p in args.peers]
        base = _peer(store, args.base) if args.base else None
        result = merge(
            engine,
            info.id,
            peers,
            instruction=args.instruction,
            base=base,
            call=None if answer is None else (lambda prep: answer),
            now=now_of(args),
            dry_run=args.dry_run,
        )
    rendered = result.prep.request
    if args.dry_run and not args.json:
        sys.stdout.buffer.write(rendered.body + b"\n")
    elif args.dry_run:
        print_json(
            {
                **result.as_dict(),
                "provider": rendered.provider,
                "model": rendered.model,
                "endpoint": rendered.endpoint,
                "body": msgspec.json.decode(rendered.body),
            }
        )
    elif args.json:
        print_json(result.as_dict())
    else:
        echo(
            f"merged {', '.join(f'{p.session} at {p.head}' for p in result.peers)} into "
            f"{result.target}: instruction {result.node}, answer "
            f"{result.recorded.node.id if result.recorded else '-'}"
        )
        echo(f"merge commit {result.commit}, parents {', '.join(result.parent_ids)}")
    return 0
