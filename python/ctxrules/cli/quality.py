"""``ctxrules quality SESSION``: which key facts of the folded history the request keeps.

The commit at ``--head`` (default HEAD) under ``--config`` / ``--preset`` is found or
made at ``--now`` and rendered for ``--provider`` (default ``anthropic``); the facts of
its folded part (task statement, constraints, identifiers, files touched, open todos)
are looked for in that request (``ctxrules.quality``).  Prints, per category, the facts
found of the total and the missing ones, and the retained-token ratio (the commit's
tokens ÷ the branch's tokens with no rules).  ``--json`` prints the whole
``QualityReport`` (every fact with ``found``).
"""

from __future__ import annotations

import argparse
import sys

from ..quality import CATEGORIES, QualityReport, check_quality
from ._common import add_now_option, now_of, print_json, subcommand
from ._store import add_config_options, add_id_argument, add_store_option, config_of, store_of
from ._terminal import printable

__all__ = ["add_parser", "run"]

#: Missing facts longer than this are shortened in the table (``--json`` has them whole).
SHOWN_CHARS = 160


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``quality`` subcommand."""
    p = subcommand(
        sub,
        "quality",
        run,
        description="Check a compacted commit: which key facts of the folded history "
        "(the task statement, user constraints, exact identifiers, files touched, open "
        "todos) are still in the request rendered for a provider, per category, with "
        "the missing ones and the retained-token ratio.  Deterministic, no model.",
        examples="""
ctxrules quality s_5a9b --preset aggressive           # the table and the missing facts
ctxrules quality s_5a9b --config ctxrules.toml --provider openai-chat
ctxrules quality s_5a9b --preset aggressive --json --now 2026-01-01T00:00:00Z
""",
    )
    add_id_argument(p, "session", kind="session")
    add_id_argument(
        p,
        "--head",
        kind="node",
        default=None,
        metavar="NODE",
        help="check the commit at this node, an id or unique prefix (default HEAD)",
    )
    p.add_argument(
        "--provider",
        default="anthropic",
        help="the provider whose request is checked (default anthropic)",
    )
    p.add_argument(
        "--model", default=None, help="model (default: the session's, else the provider's)"
    )
    add_now_option(p, "clock for the rules (default: now)")
    add_config_options(p)
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules quality``; returns the exit code."""
    config = config_of(args)
    with store_of(args) as store:
        report = check_quality(
            args.session,
            args.head,
            now=now_of(args),
            store=store,
            config=config,
            provider=args.provider,
            model=args.model,
        )
    if args.json:
        print_json(report)
    else:
        _print(report)
    return 0


def _short(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _print(r: QualityReport) -> None:
    lines: list[str] = []
    lines.append(
        f"session {r.session_id} at {r.head_node_id}, commit {r.commit_id}, "
        f"{r.provider} {r.model}\n"
        f"retained tokens: {r.commit_tokens:,} of {r.baseline_tokens:,} "
        f"({r.retained_ratio:.1%}); folded nodes: {r.folded_nodes}\n"
    )
    if not r.folded_nodes:
        lines.append("nothing is folded in this commit: only the task statement is checked\n")
    elif r.retained_ratio > 0.5:
        lines.append("note: the commit keeps more than 50 % of the tokens\n")
    lines.append(f"{'category':<12} {'found':>6} {'total':>6} {'share':>7}\n")
    for name in CATEGORIES:
        c = r.categories[name]
        share = "-" if c.share is None else f"{c.share:.0%}"
        lines.append(f"{name:<12} {c.found:>6} {c.total:>6} {share:>7}\n")
    overall = f"{r.found / r.total:.0%}" if r.total else "-"
    lines.append(f"{'all':<12} {r.found:>6} {r.total:>6} {overall:>7}\n")
    missing = [(name, m) for name in CATEGORIES for m in r.categories[name].missing]
    if missing:
        lines.append(f"missing ({len(missing)}):\n")
        for name, text in missing:
            lines.append(f"  {name}: {_short(text)}\n")
    sys.stdout.write(printable("".join(lines)))
