"""``ctxrules quality SESSION``: did each request still show what the agent used next?

The session is replayed request by request under ``--config`` / ``--preset`` (the
batch replay ``ctxrules rerender`` runs, ``ctxrules.batch.replay_detail``) and every
request is scored by needed-fact recall (``ctxrules.quality.needed``): the exact
identifiers each answer used that an earlier user or tool message holds, looked up in
the request that produced it; older-fact recall counts those that were not in the
request's newest input.  Prints the two recalls, the tokens and billed input against
no rules, the requests that lost something, every lost fact (where it came from,
which answer needed it), and as a second line the key facts of the folded history in
the last request (task statement, constraints, identifiers, files, todos;
``ctxrules.quality.check_quality`` at ``--now``).  ``--json`` prints all of it.
"""

from __future__ import annotations

import argparse
import io
import sys
from typing import Any

import msgspec

from ..batch import ReplayOptions, session_data
from ..batch.session import replay_detail
from ..quality import CATEGORIES, QualityReport, check_quality
from ._common import add_now_option, now_of, print_json, subcommand
from ._store import add_config_options, add_id_argument, add_store_option, config_of, store_of
from ._terminal import printable

__all__ = ["add_parser", "run"]

#: Lost facts longer than this are shortened in the table (``--json`` has them whole).
SHOWN_CHARS = 160


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``quality`` subcommand."""
    p = subcommand(
        sub,
        "quality",
        run,
        description="Replay a session under rules and score every request by needed-fact "
        "recall: the exact identifiers (paths, symbols, error lines, flags, URLs, hashes, "
        "numbers) each answer used that an earlier user or tool message holds, looked up "
        "in the request that produced it; older-fact recall counts those not in the "
        "request's newest input.  With tokens and billed input against no rules, the "
        "lost facts (where from, needed by which answer) and, as a second line, the key "
        "facts of the folded history in the last request.  Deterministic, no model.",
        examples="""
ctxrules quality s_5a9b --preset aggressive           # recall, lost facts, second line
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
        help="replay up to this node, an id or unique prefix (default HEAD)",
    )
    p.add_argument(
        "--provider",
        default=None,
        help="render for this provider (default: the session's own, else its model's)",
    )
    p.add_argument(
        "--model", default=None, help="model (default: the session's, else the provider's)"
    )
    add_now_option(p, "clock for the second line's rules (default: now)")
    add_config_options(p)
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules quality``; returns the exit code."""
    config = config_of(args)
    with store_of(args) as store:
        data = session_data(store, args.session)
        if args.head is not None:
            ids = [n.id for n in data.nodes]
            data = msgspec.structs.replace(data, nodes=data.nodes[: ids.index(args.head) + 1])
        done = replay_detail(
            data, ReplayOptions.of(config, provider=args.provider, model=args.model)
        )
        checks = check_quality(
            data.id,
            args.head,
            now=now_of(args),
            store=store,
            config=config,
            provider=done.provider.name,
            model=args.model,
        )
    record = done.record
    if args.json:
        print_json(
            {
                "session": record["session"],
                "provider": record["provider"],
                "model": record["model"],
                "rules_version": record["rules_version"],
                "requests": record["requests"],
                "tokens": _tokens(record),
                "recall": record["rules"]["quality"] | {"checks": None},
                "no_rules_recall": record["plain"]["quality"],
                "checks": msgspec.to_builtins(checks),
            }
        )
    else:
        _print(record, checks)
    return 0


def _tokens(record: dict[str, Any]) -> dict[str, Any]:
    plain, rules = record["plain"], record["rules"]

    def ratio(key: str) -> float | None:
        a, b = rules.get(key), plain.get(key)
        return round(a / b, 4) if a is not None and b else None

    return {
        "prompt_tokens": rules["prompt_tokens"],
        "no_rules_prompt_tokens": plain["prompt_tokens"],
        "share": ratio("prompt_tokens"),
        "input_cost_usd": rules["input_cost_usd"],
        "no_rules_input_cost_usd": plain["input_cost_usd"],
        "billed_input_ratio": ratio("input_cost_usd"),
        "compactions": rules["compactions"],
    }


def _short(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _print(record: dict[str, Any], checks: QualityReport) -> None:
    out = io.StringIO()
    q = record["rules"]["quality"]
    t = _tokens(record)
    out.write(
        f"session {record['session']}: {record['requests']} requests replayed for "
        f"{record['provider']} {record['model']} (rules {record['rules_version']})\n"
        f"needed facts kept: {q['kept']:,} of {q['needed']:,} (recall {_pct(q['recall'])}); "
        f"older facts: {q['older_kept']:,} of {q['older_needed']:,} "
        f"(older-fact recall {_pct(q['older_recall'])})\n"
        f"prompt tokens: {t['prompt_tokens']:,} of {t['no_rules_prompt_tokens']:,} with no "
        f"rules ({_pct(t['share'])}); billed input {_pct(t['billed_input_ratio'])} of no "
        f"rules; compactions {t['compactions']}\n"
    )
    rows = [r for r in q.get("requests", ()) if r[1] > r[2]]
    if rows:
        out.write(f"{'request for':<28} {'needed':>6} {'kept':>6} {'older':>6} {'kept':>6}\n")
        for answer, needed, kept, older, older_kept in rows:
            out.write(f"{answer:<28} {needed:>6} {kept:>6} {older:>6} {older_kept:>6}\n")
    if q.get("lost"):
        out.write(f"lost ({q['lost_count']}):\n")
        for f in q["lost"]:
            where = "older" if f["older"] else "newest input"
            out.write(
                f"  {_short(f['text'])} ({f['kind']}, {where}) from {f['source']}, "
                f"needed by {f['needed_by']}\n"
            )
    out.write(
        f"second line, the folded history's key facts in the last request "
        f"({checks.folded_nodes} folded nodes): "
    )
    out.write(
        ", ".join(
            f"{name} {c.found}/{c.total}"
            for name in CATEGORIES
            if (c := checks.categories[name]).total
        )
        or "nothing to check"
    )
    out.write("\n")
    missing = [(name, m) for name in CATEGORIES for m in checks.categories[name].missing]
    for name, text in missing:
        out.write(f"  missing {name}: {_short(text)}\n")
    sys.stdout.write(printable(out.getvalue()))
