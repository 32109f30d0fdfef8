"""``ctxrules compact SESSION``: compact a session now, in full or around a pivot.

Appends a compaction boundary at HEAD (and the restore message after it) through
``ctxrules.compaction.compact`` and prints the boundary record: trigger, direction,
tokens before → after (the billed-prompt estimate for ``--provider`` / ``--model``),
items folded, what was restored, the boundary node and the commit now at HEAD.
``--from NODE`` folds from that node on and keeps the prefix (and its prompt cache);
``--up-to NODE`` folds what comes before it and keeps the tail.  A failure (the summary
failed, nothing to fold, no smaller) is one line on stderr and stores nothing but the
failure (``compaction_failures`` in the session metadata).
"""

from __future__ import annotations

import argparse
import sys

import msgspec

from ..compaction import CompactOptions, CompactResult, compact
from ._common import add_now_option, now_of, print_json, subcommand
from ._store import add_config_options, add_id_argument, add_store_option, config_of, store_of
from ._terminal import printable

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``compact`` subcommand."""
    p = subcommand(
        sub,
        "compact",
        run,
        description="Compact a session at its HEAD: fold the history into a summary at a "
        "new boundary node (the task statement, locked and system items and the open "
        "turn stay), restore the recently read files, the plan and the skills in the "
        "message after it, and print the boundary record with the tokens before and "
        "after.  --from NODE folds NODE and what follows and keeps the prefix and its "
        "prompt cache; --up-to NODE folds what precedes NODE and keeps the rest.",
        examples="""
ctxrules compact s_67f3                                   # full compaction, manual
ctxrules compact s_67f3 --instructions "keep the API decisions verbatim"
ctxrules compact s_67f3 --from n_b930 --json              # keep the prefix before n_b930
ctxrules compact s_67f3 --up-to n_c411 --now 2026-01-01T00:00:00Z --preset aggressive
""",
    )
    add_id_argument(p, "session", kind="session")
    pivot = p.add_mutually_exclusive_group()
    add_id_argument(
        pivot,  # type: ignore[arg-type]  # a group adds arguments like its parser
        "--from",
        dest="from_node",
        kind="node",
        default=None,
        metavar="NODE",
        help="fold NODE and everything after it; keep the prefix",
    )
    add_id_argument(
        pivot,  # type: ignore[arg-type]
        "--up-to",
        dest="up_to_node",
        kind="node",
        default=None,
        metavar="NODE",
        help="fold everything before NODE; keep NODE and the rest",
    )
    p.add_argument(
        "--instructions", default="", metavar="TEXT", help="what the summary should keep"
    )
    p.add_argument(
        "--summarizer",
        default=None,
        metavar="NAME",
        help="a registered summarizer (default: extractive; `ctxrules plugins` lists them)",
    )
    p.add_argument(
        "--provider",
        default="anthropic",
        help="the provider whose billed prompt the tokens estimate (default anthropic)",
    )
    p.add_argument(
        "--model", default=None, help="model (default: the session's, else the provider's)"
    )
    p.add_argument(
        "--cwd",
        default=None,
        metavar="DIR",
        help="working directory to re-read restored files from (default: none, the "
        "recorded reads are used)",
    )
    add_now_option(p, "clock for the rules and the boundary's time (default: now)")
    add_config_options(p)
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules compact``; returns the exit code."""
    options = CompactOptions(summarizer=args.summarizer) if args.summarizer else None
    config = config_of(args)
    with store_of(args) as store:  # resolves the id prefixes the arguments name
        direction, pivot = "full", None
        if args.from_node is not None:
            direction, pivot = "from", args.from_node
        elif args.up_to_node is not None:
            direction, pivot = "up_to", args.up_to_node
        result = compact(
            store,
            args.session,
            now=now_of(args),
            direction=direction,
            pivot=pivot,
            instructions=args.instructions,
            config=config,
            options=options,
            provider=args.provider,
            model=args.model,
            working_directory=args.cwd,
        )
    if args.json:
        print_json(msgspec.to_builtins(result))
    else:
        sys.stdout.write(printable(describe(result)))
    return 0


def describe(result: CompactResult) -> str:
    """The readable lines ``ctxrules compact`` prints for a compaction."""
    r = result.record
    where = f" {r.direction} {r.pivot}" if r.pivot else ""
    lines = [
        f"compacted session {result.session_id} ({r.trigger}{where}): "
        f"{r.tokens_before:,} → {r.tokens_after:,} tokens ({r.measured}), "
        f"{r.folded_items} items folded",
        f"boundary {result.boundary} after {r.previous}; commit {result.commit}",
    ]
    s = result.restored
    kept = [
        f"{len(s.files)} file(s)" if s.files else "",
        "the plan" if s.plan else "",
        f"{len(s.skills)} skill(s)" if s.skills else "",
        f"{len(s.tools)} deferred tool(s)" if s.tools else "",
        "hook context" if s.hook_context else "",
    ]
    if result.restore:
        lines.append(f"restored in {result.restore}: {', '.join(k for k in kept if k)}")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines) + "\n"
