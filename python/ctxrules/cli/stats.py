"""``ctxrules stats SESSION``: how full the session's window is, and with what.

The usage record (``measured`` when HEAD is an answer whose request the provider
billed, else ``estimated``), the level against the thresholds, and the window split by
category — system prompt, instruction files, other context sources, skills, memory,
tool declarations, messages by item state, output reserve, compaction buffer, free —
adding up to the window exactly; then the compaction boundaries on the branch.  On a
terminal the split is drawn as a bar; ``--json`` prints the same numbers as data.
The request is the one the engine would send next with the session's recorded provider,
model, system prompt, tools and parameters (an engine records them for the sessions it
serves); context sources are not collected unless ``--sources`` is given.
"""

from __future__ import annotations

import argparse
import sys

from ..config import PipelineConfig
from ..context_sources import SourcesConfig
from ..engine import Engine, EngineConfig, SessionStats
from ..errors import ConfigError
from ..render import recorded_request
from ..store import CommitStore
from ._common import add_now_option, now_of, print_json, subcommand
from ._store import add_config_options, add_id_argument, add_store_option, config_of, store_of
from ._terminal import rich_console

__all__ = ["add_parser", "run", "session_stats"]

#: Bar characters per category kind (the used categories cycle through the shades).
_SHADES = "█▓▒"
BAR_WIDTH = 60


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``stats`` subcommand."""
    p = subcommand(
        sub,
        "stats",
        run,
        description="Show a session's window occupancy: the usage record (measured by "
        "the provider right after a request, else our estimate of the next request), "
        "the level against the compaction thresholds, and the window split by category "
        "— adding up to the window exactly — plus the compactions on the branch.",
        examples="""
ctxrules stats s_a5a2                                 # a table and a usage bar
ctxrules stats s_a5a2 --model anthropic:claude-sonnet-4-5 --json
ctxrules stats s_a5a2 --head n_90ae --preset aggressive
""",
    )
    add_id_argument(p, "session", kind="session")
    add_id_argument(
        p,
        "--head",
        kind="node",
        default=None,
        metavar="NODE",
        help="the node to measure at, an id or unique prefix (default HEAD)",
    )
    p.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        default=None,
        help="the provider and model whose window is measured "
        "(default: the session's recorded provider and model, else anthropic's default)",
    )
    p.add_argument(
        "--sources",
        action="store_true",
        help="collect the context sources (instruction files, git status, date) of the "
        "working directory as a live agent would",
    )
    add_now_option(p, "clock for the rules (default: now)")
    add_config_options(p)
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print the record and breakdown as JSON")


def _provider_model(spec: str | None, metadata: dict[str, object]) -> tuple[str, str | None]:
    if spec:
        provider, sep, model = spec.partition(":")
        if not sep or not provider or not model:
            raise ConfigError(
                f"--model must be PROVIDER:MODEL, got {spec!r}",
                hint="e.g. anthropic:claude-sonnet-4-5 or openai-chat:gpt-4o",
            )
        return provider, model
    recorded = metadata.get("provider")
    return (recorded if isinstance(recorded, str) and recorded else "anthropic"), None


def session_stats(
    store: CommitStore,
    session: str,
    *,
    head: str | None = None,
    model: str | None = None,
    sources: bool = False,
    config: PipelineConfig | None = None,
    now: float,
) -> SessionStats:
    """The statistics ``ctxrules stats`` shows (``.as_dict()`` is what ``--json`` prints).

    ``model`` is ``PROVIDER:MODEL`` (default: the session's recorded provider, else
    anthropic, with its model); ``sources`` collects the working directory's context
    sources as a live agent would.  The commit at ``head`` is found or made at ``now``.
    """
    info = store.get_session(session)
    provider, name = _provider_model(model, info.metadata)
    collect = (
        SourcesConfig()
        if sources
        else SourcesConfig(git_status=False, instruction_files=False, date=False)
    )
    # A session an engine served recorded its system prompt as sent (its history holds
    # none): the next request carries it, so the window counts it.
    sent = recorded_request(info.metadata).system_sent
    engine = Engine(
        store,
        EngineConfig(
            provider=provider, model=name, sources=collect, system="\n\n".join(sent or ())
        ),
        pipeline=config,
    )
    return engine.stats(session, head=head, now=now)


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules stats``; returns the exit code."""
    pipeline = config_of(args)
    with store_of(args) as store:
        stats = session_stats(
            store,
            args.session,
            head=args.head,
            model=args.model,
            sources=args.sources,
            config=pipeline,
            now=now_of(args),
        )
    if args.json:
        print_json(stats.as_dict())
    else:
        _print(stats)
    return 0


def _print(s: SessionStats) -> None:
    # deferred: rich costs ~40 ms to import, paid only when a table or bar is drawn
    from rich.table import Table

    console = rich_console(file=sys.stdout, highlight=False, soft_wrap=True)
    u = s.usage
    share = u.total_used / u.window if u.window else 0.0
    console.print(
        f"session {s.session_id} at {s.head}, {s.provider} {s.model}: "
        f"{u.total_used:,} of {u.window:,} tokens ({share:.1%}), {u.basis}"
        + (f", calibration {u.calibration:.3f}" if u.calibration is not None else "")
        + f"; level {s.budget.level}",
        markup=False,
    )
    if console.is_terminal:
        console.print(_bar(s), markup=False)
    table = Table(box=None, pad_edge=False)
    table.add_column("category")
    table.add_column("tokens", justify="right")
    table.add_column("share", justify="right")
    for c in s.breakdown.categories:
        if c.tokens or c.kind != "used":
            table.add_row(
                c.name, f"{c.tokens:,}", f"{c.tokens / u.window:.1%}" if u.window else "-"
            )
    table.add_row("window", f"{s.breakdown.window:,}", "100.0%")
    console.print(table)
    b = s.budget
    console.print(
        f"thresholds: warn {b.warn_tokens:,}, compact {b.compact_tokens:,}, "
        f"critical {b.critical_tokens:,} (of {b.usable:,} usable)",
        markup=False,
    )
    for record in s.boundaries:
        console.print(
            f"compaction at {record.get('node')}: {record.get('trigger', '?')}, "
            f"{record.get('tokens_before', '?')} → {record.get('tokens_after', '?')} tokens, "
            f"{record.get('folded_items', '?')} items folded",
            markup=False,
        )


def _bar(s: SessionStats) -> str:
    """One line: each category's share of the window as a run of characters."""
    total = s.breakdown.window or 1
    out, used = [], 0
    for c in s.breakdown.categories:
        if c.kind == "used":
            char = _SHADES[used % len(_SHADES)] if c.tokens else ""
            used += 1 if c.tokens else 0
        else:
            char = {"reserve": "▚", "buffer": "░", "free": "·"}[c.kind]
        out.append(char * round(BAR_WIDTH * c.tokens / total))
    return "[" + "".join(out)[:BAR_WIDTH].ljust(BAR_WIDTH, "·") + "]"
