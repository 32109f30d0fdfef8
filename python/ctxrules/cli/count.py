"""``ctxrules count``: count the tokens of files or stdin."""

from __future__ import annotations

import argparse
import sys

from ..tokenizers import DEFAULT_ENCODING, count_batch
from ._common import print_json, read_text, subcommand


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``count`` subcommand."""
    p = subcommand(
        sub,
        "count",
        run,
        description="Count the tokens of UTF-8 text files (or stdin) with a registered "
        "tokenizer; several files print one line each and the total.",
        examples="""
ctxrules count README.md docs/*.md
echo "hello world" | ctxrules count --json
ctxrules count --encoding tiktoken:cl100k_base notes.txt   # the tiktoken oracle
""",
    )
    p.add_argument("files", nargs="*", metavar="FILE")
    p.add_argument(
        "--encoding",
        default=DEFAULT_ENCODING,
        help=f"a registered tokenizer (default {DEFAULT_ENCODING}; tiktoken:NAME for the oracle)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules count``; returns the exit code."""
    paths = args.files or ["-"]
    texts = [read_text(p) for p in paths]
    # The public count: the core's encodings without a registry lookup, others through it.
    counts = count_batch(texts, args.encoding)
    total = sum(counts)
    if args.json:
        print_json(
            {
                "encoding": args.encoding,
                "tokens": total,
                "files": [
                    {"path": "<stdin>" if p == "-" else p, "tokens": n}
                    for p, n in zip(paths, counts)
                ],
            }
        )
    else:
        if len(paths) > 1:
            for p, n in zip(paths, counts):
                sys.stdout.write(f"{n:>10}  {p}\n")
        sys.stdout.write(f"{total}\n")
    return 0
