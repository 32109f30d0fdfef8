"""``ctxrules rerender SOURCE...``: replay recorded sessions under a rule set, in parallel.

Every session of the SOURCEs (stores, or transcript files and folders imported on the
fly) is replayed request by request through the turn engine, with no rules and under
``--config`` / ``--preset`` (``ctxrules.batch``): prompt tokens recorded, replayed with
no rules and under the rules, tokens saved per rule, predicted cache reads and writes,
cost, compactions, quality, violations.  One JSON line per session goes to ``--out``
(resumed when the file exists), a summary table to the terminal.  A progress bar on
a terminal, plain lines otherwise; Ctrl-C stops cleanly and keeps what finished.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import msgspec

from ..batch import BACKENDS, ReplayOptions, rerender
from ..errors import ConfigError, CtxrulesError
from ._common import add_source_options, print_json, print_left_out, subcommand
from ._store import add_config_options, config_of
from ._terminal import rich_console

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``rerender`` subcommand."""

    p = subcommand(
        sub,
        "rerender",
        run,
        description="Replay every session of the SOURCEs request by request through the "
        "turn engine (thresholds and compaction act as they would live), once with no "
        "rules and once under the given rules, every request body rendered.  Per session "
        "and in total: requests; prompt tokens recorded (where the transcript has usage), "
        "replayed with no rules and under the rules; tokens saved per rule; predicted "
        "cache reads and writes; cost from the model profiles' prices; compactions made; "
        "needed-fact recall (ctxrules quality); invariant or pairing violations (there "
        "must be none: "
        "the exit code is 1 otherwise).  SOURCE is a store (a directory or .db file, "
        "postgresql://…) or transcript files and folders, imported on the fly.  Runs on "
        "every core; --out FILE gets one JSON line per session and is resumed when "
        "it exists; the same input and options give the same bytes whatever --jobs or "
        "--backend.",
        examples="""
ctxrules rerender tests/data/corpus --preset aggressive --out rerun.jsonl
ctxrules rerender .ctxrules --config ctxrules.toml --jobs 2 --json
ctxrules rerender postgresql://me@db/agents --param tool_aging.tail_turns=2 --out a.jsonl
ctxrules rerender runs/ --provider openai-chat --model gpt-4o --backend dask
ctxrules rerender runs/ --backend dask --scheduler tcp://10.0.0.5:8786 --out a.jsonl
""",
    )
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="a store (directory, .db file, postgresql:// URL, memory:NAME) or transcript "
        "files and folders",
    )
    add_config_options(p)
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="RULE.KEY=VALUE",
        help="set a rule parameter of the configuration (repeatable); VALUE is read as "
        'JSON when it parses (3, 0.5, true, ["a"]), else as text',
    )
    p.add_argument(
        "--provider",
        default=None,
        help="render for this provider (default: each session's own, else its model's)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="model (default: the session's when it is of the provider's family)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="worker processes (default: every core)",
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help="local: a process pool; dask: a Dask cluster (pip install 'ctxrules[dask]')",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="the Dask scheduler to use (default: a local cluster of --jobs workers)",
    )
    p.add_argument(
        "--out",
        metavar="FILE",
        default=None,
        help="write one JSON line per session here; an existing results file is resumed "
        "(replaced whole when the run ends); any other existing file is refused",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out that is not a rerender results file",
    )
    p.add_argument(
        "--session",
        action="append",
        default=[],
        dest="sessions",
        metavar="ID",
        help="only this session (a full id; repeatable)",
    )
    add_source_options(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar or lines")
    p.add_argument("--json", action="store_true", help="print the totals as JSON")


def params_of(args: argparse.Namespace) -> Any:
    """The configuration with every ``--param RULE.KEY=VALUE`` applied."""
    config = config_of(args)
    for text in args.param:
        target, eq, raw = text.partition("=")
        rule, dot, key = target.partition(".")
        if not eq or not dot or not rule or not key:
            raise ConfigError(
                f"--param takes RULE.KEY=VALUE, got {text!r}",
                where="--param",
                hint="e.g. --param tool_aging.tail_turns=2",
            )
        if rule not in config.pipeline:
            raise ConfigError(
                f"rule {rule!r} is not in the pipeline ({', '.join(config.pipeline) or 'empty'})",
                where=f"--param {text}",
            )
        try:
            value = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            value = raw
        config = config.with_params(rule, **{key: value})
    return config


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules rerender``; returns the exit code."""

    options = ReplayOptions.of(params_of(args), provider=args.provider, model=args.model)
    bar = _Progress(sys.stderr)
    try:
        result = rerender(
            args.sources,
            options,
            jobs=args.jobs,
            backend=args.backend,
            scheduler=args.scheduler,
            out=args.out,
            sessions=args.sessions,
            progress=None if args.quiet else bar.update,
            force=args.force,
            format=args.format,
            exclude=args.exclude_sessions,
        )
    finally:
        bar.close()
    t = result.totals
    if args.json:
        shown: dict[str, Any] = {
            "totals": t,
            "replayed": result.replayed,
            "resumed": result.resumed,
            "interrupted": result.interrupted,
            "skipped": result.skipped,
            "excluded": result.excluded,
        }
        if args.out is None:
            shown["sessions"] = result.records
        print_json(shown)
    else:
        _table(t, result.replayed, result.resumed)
        print_left_out(result.skipped, result.excluded)
    if result.interrupted:
        done = f"{result.replayed + result.resumed} of {result.sessions} sessions"
        again = (
            "run the same command again to resume"
            if args.out
            else "give --out FILE to keep results"
        )
        print(f"ctxrules rerender: interrupted after {done}; {again}", file=sys.stderr)
        return 130
    if t["errors"] or t["violations"]:
        raise CtxrulesError(
            f"{t['errors']} session(s) could not be replayed, {t['violations']} "
            "violation(s) of the invariants",
            hint="their records say which and why" + (f" ({args.out})" if args.out else ""),
        )
    return 0


class _Progress:
    """Sessions done: a rich bar with sessions/s and ETA on a terminal, else a plain
    line at every tenth of the work."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.bar: Any = None
        self.task: Any = None
        self.started = time.monotonic()
        self.shown = -1

    def update(self, done: int, total: int) -> None:
        if self.tty:
            self._rich(done, total)
            return
        step = done * 10 // total if total else 10
        if step == self.shown:
            return
        self.shown = step
        spent = time.monotonic() - self.started
        rate = done / spent if spent > 0 else 0.0
        eta = f", ETA {(total - done) / rate:.0f} s" if rate and done < total else ""
        self.stream.write(
            f"rerender: {done}/{total} sessions ({step * 10}%), {rate:.1f} sessions/s{eta}\n"
        )
        self.stream.flush()

    def _rich(self, done: int, total: int) -> None:
        # deferred: rich costs ~40 ms to import, paid only when a table or bar is drawn
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )

        if self.bar is None:
            self.bar = Progress(
                TextColumn("rerender"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task("sessions", total=total, rate="")
        spent = time.monotonic() - self.started
        rate = f"{done / spent:.1f} sessions/s" if spent > 0 and done else ""
        self.bar.update(self.task, completed=done, total=total, rate=rate)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.4f}"
    return f"{value:,}"


def _table(t: dict[str, Any], replayed: int, resumed: int) -> None:
    # deferred: rich costs ~40 ms to import, paid only when a table or bar is drawn
    from rich.table import Table

    rec, plain, rules = t.get("recorded", {}), t.get("plain", {}), t.get("rules", {})
    console = rich_console()
    table = Table(title=f"rerender: {t['sessions']} sessions, {t.get('requests', 0):,} requests")
    for col in ("", "recorded", "no rules", "rules"):
        table.add_column(col, justify="left" if not col else "right")
    table.add_row(
        "prompt tokens",
        _num(rec.get("prompt_tokens")),
        _num(plain.get("prompt_tokens")),
        _num(rules.get("prompt_tokens")),
    )
    table.add_row(
        "  where recorded",
        _num(rec.get("prompt_tokens")),
        _num(plain.get("prompt_tokens_where_recorded")),
        _num(rules.get("prompt_tokens_where_recorded")),
    )
    for key, label in (
        ("cache_read_tokens", "cache reads"),
        ("cache_write_tokens", "cache writes"),
        ("cost_usd", "cost (USD)"),
        ("input_cost_usd", "  of it the prompts"),
    ):
        table.add_row(label, _num(rec.get(key)), _num(plain.get(key)), _num(rules.get(key)))
    table.add_row("item tokens", "", _num(plain.get("item_tokens")), _num(rules.get("item_tokens")))
    table.add_row("body bytes", "", _num(plain.get("body_bytes")), _num(rules.get("body_bytes")))
    table.add_row(
        "compactions", _num(t.get("recorded_compactions")), "", _num(rules.get("compactions"))
    )
    console.print(table)
    unpriced = max(g.get("cost_unpriced_sessions", 0) for g in (rec, plain, rules))
    if unpriced:
        console.print(f"cost: {unpriced} session(s) left out, their models have no prices")
    saved = rules.get("saved_by_rule") or {}
    if saved:
        console.print("tokens saved per rule: " + ", ".join(f"{k} {v:,}" for k, v in saved.items()))
    q = rules.get("quality") or {}
    if q.get("needed"):
        older = f"{q['older_recall']:.1%}" if q.get("older_recall") is not None else "-"
        console.print(
            f"needed facts kept: {q['kept']:,} of {q['needed']:,} ({q['recall']:.1%}); "
            f"older facts: {q['older_kept']:,} of {q['older_needed']:,} ({older})"
        )
    checks = q.get("checks") or {}
    if checks.get("total"):
        console.print(
            f"folded history's key facts in the last requests: {checks['found']:,} of "
            f"{checks['total']:,} ({checks['share']:.1%})"
        )
    console.print(
        f"replayed {replayed}, resumed {resumed}, errors {t['errors']}, "
        f"violations {t['violations']}"
    )
