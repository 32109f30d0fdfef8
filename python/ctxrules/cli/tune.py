"""``ctxrules tune SOURCE... --param RULE.PARAM=VALUES ...``: choose rule parameters by
measurement (``ctxrules.tune``).

Every setting of the swept parameters is replayed over the sessions of the sources
(transcripts, folders, stores) and measured: prompt tokens sent, predicted cache
reads, cost, compactions, older-fact recall (the quality axis), violations.  Prints the table,
writes it with the plots into ``--out`` (which caches measurements for the next run),
and ends with the TOML of the chosen setting.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..outfiles import checked_dir
from ..tune import (
    DEFAULT_BUDGET,
    OBJECTIVES,
    SEARCHES,
    plot,
    print_table,
    report_targets,
    tune,
    write_report,
)
from ..tune.plot import PLOT_HINT
from ._common import add_source_options, print_json, print_left_out, subcommand
from ._store import add_config_options, config_of
from ._terminal import rich_console

__all__ = ["DEFAULT_OUT", "add_parser", "run"]

#: Where results, plots and the cache go without ``--out``.
DEFAULT_OUT = "ctxrules-tune"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``tune`` subcommand."""

    p = subcommand(
        sub,
        "tune",
        run,
        description="Sweep rule parameters over recorded sessions and measure each setting: "
        "prompt tokens sent, predicted cache reads, cost, compactions, older-fact recall (the "
        "quality axis: ctxrules quality) and violations (a setting with any is "
        "excluded).  Prints the table, writes "
        "it as CSV and JSON with the plots of cost against quality (the Pareto-optimal "
        "settings named, the default marked) into --out, and ends with the TOML of the "
        "chosen setting: the cheapest Pareto-optimal one that keeps at least the "
        "default's quality.  Measurements are cached in --out, so a second run measures "
        "only new settings.  VALUES: a..b (integers), a..b:step, v1,v2,... or a JSON "
        "array; every value is checked against the rule before anything runs.",
        examples="""
ctxrules tune runs/ --param tool_aging.tail_turns=1..6 --param result_cap.head_ratio=0.4,0.5,0.6
ctxrules tune runs/ --param result_cap.max_tool_result_chars=1000,2000,4000,8000 --json
ctxrules tune .ctxrules --param summarize.threshold_tokens=2000..16000:2000 --objective tokens
ctxrules tune runs/ --param summarize.target_ratio=0.3..0.8:0.1 --search halving --budget 16
ctxrules tune a.jsonl b.jsonl --param tool_aging.step_turns=1..4 --preset claude-code --out tune-cc
""",
    )
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="transcript files, folders of them, or a store (directory, .db, postgresql:// URL)",
    )
    p.add_argument(
        "--param",
        action="append",
        required=True,
        metavar="RULE.PARAM=VALUES",
        help="a parameter to sweep (repeat for more): a..b, a..b:step, v1,v2,... or [JSON]",
    )
    p.add_argument(
        "--provider",
        default=None,
        help="the provider requests are rendered for (default: each session's own)",
    )
    p.add_argument("--model", default=None, help="model (default: each session's recorded one)")
    p.add_argument(
        "--objective",
        choices=list(OBJECTIVES),
        default="cost",
        help="what to minimise, with quality as the second axis (default cost)",
    )
    p.add_argument(
        "--search",
        choices=list(SEARCHES),
        default="auto",
        help="grid: every setting; random: --budget of them; halving: --budget of them, "
        "measured on more sessions each round while the better half goes on; auto "
        "(default): grid up to --budget settings, else halving",
    )
    p.add_argument(
        "--budget",
        type=int,
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"settings a random or halving search starts from (default {DEFAULT_BUDGET})",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of random and halving (default 0)")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="worker processes of the batch engine (default: every core)",
    )
    p.add_argument(
        "--min-quality",
        type=float,
        default=None,
        metavar="Q",
        help="least quality score (0 to 1) of the chosen setting (default: the default's)",
    )
    p.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"folder for results.csv/json, the plots, chosen.toml and the cache "
        f"(default ./{DEFAULT_OUT}; made if missing); files of an earlier tune there are "
        "replaced, any other file of those names is refused",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace files of --out's names that a tune did not write",
    )
    add_config_options(p)
    add_source_options(p)
    p.add_argument(
        "--json", action="store_true", help="print the whole result as JSON instead of the table"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules tune``; returns the exit code."""

    # deferred: rich costs ~40 ms to import, paid only when a table or bar is drawn

    base = config_of(args)
    # Every output is checked (and locked) before anything is measured.
    made = not Path(args.out).exists()
    targets = report_targets(args.out, force=args.force)
    written: dict[str, Path] = {}
    try:
        cache = checked_dir(Path(args.out) / "cache", option="--out")
        with _progress() as progress:
            result = tune(
                args.sources,
                args.param,
                base=base,
                provider=args.provider,
                model=args.model,
                objective=args.objective,
                search=args.search,
                budget=args.budget,
                seed=args.seed,
                cache_dir=cache,
                min_quality=args.min_quality,
                jobs=args.jobs,
                progress=progress,
                format=args.format,
                exclude=args.exclude_sessions,
            )
        written = write_report(result, args.out, targets)
    finally:
        for target in targets.values():
            target.close()
        if made and not written:  # refused or failed: leave no empty folder behind
            for folder in (Path(args.out) / "cache", Path(args.out)):
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only ever an empty one
    if not plot.available():  # on stderr: --json keeps stdout for the result
        print(f"ctxrules tune: no plots: matplotlib is missing ({PLOT_HINT})", file=sys.stderr)
    if args.json:
        print_json(result)
        return 0
    # Piped output keeps every column: no terminal width to fit.
    console = rich_console(width=None if sys.stdout.isatty() else 200)
    print_table(result, console)
    print_left_out(result.skipped, result.excluded)
    console.print("wrote " + ", ".join(str(p) for p in written.values()), soft_wrap=True)
    if result.chosen is None:
        console.print("no setting is free of violations: nothing chosen")
        return 1
    chosen = result.results[result.chosen]
    sys.stdout.flush()
    sys.stdout.write(f"\n# chosen: {chosen.label} — {written.get('toml', '')}\n{result.toml}")
    return 0


@contextmanager
def _progress() -> Iterator[Any]:
    """A rich progress bar on a terminal's stderr; nothing otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    # deferred: rich costs ~40 ms to import, paid only when a table or bar is drawn
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("measuring", total=None)

        def update(done: int, planned: int, label: str) -> None:
            bar.update(task, completed=done, total=planned, description=label[:40])

        yield update
