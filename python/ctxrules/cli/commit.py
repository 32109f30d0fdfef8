"""``ctxrules commit SESSION``: the ContextCommit at a head, its items, totals and notes.

``--now TIME`` (epoch seconds or ISO 8601) runs the rules again at that time (idle
clearing is measured against it) and saves the resulting commit.  ``--json`` prints
the commit with every item (state, tokens, reason, locked, merged_into,
attached_from, is_anchor) and totals per state; without it, a table of items by state
with token counts, the notes (what each rule did or could not do, e.g. a failed
summarizer) and the last items.
``--diff OTHER`` compares another commit (a commit id, a node id whose commit is used,
or ``parent``) with this one.  Session, node and commit ids may be unique prefixes.
The store must exist (``ctxrules import`` creates one).

``step_commits`` is the demo's step: the bundled session through the pipeline turn by
turn.
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..commit import (
    CommitDiff,
    diff_commits,
    load_commit,
    make_commit,
)
from ..config import PipelineConfig
from ..dag import load_graph, resolve_commit, resolve_node
from ..errors import CtxrulesError
from ..model import ContextCommit
from ..store import CommitStore
from ._common import add_now_option, now_of, print_json, subcommand
from ._store import (
    add_config_options,
    add_id_argument,
    add_store_option,
    config_of,
    open_store_from,
)
from ._terminal import rich_console

STATES = ("full", "aged", "cleared", "summarized", "summary")
ITEM_FIELDS = (
    "source_node_id",
    "role",
    "name",
    "state",
    "tokens",
    "reason",
    "locked",
    "merged_into",
    "attached_from",
    "is_anchor",
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``commit`` subcommand."""
    p = subcommand(
        sub,
        "commit",
        run,
        description="Show the ContextCommit at a head (made and saved if there is none "
        "yet): items by state with token totals, what each rule did, the last items.  "
        "With --now the rules run again at that time; with --diff, how another commit "
        "differs from this one.",
        examples="""
ctxrules commit s_a5a2                               # the current commit at HEAD
ctxrules commit s_a5a2 --now 2026-01-01T00:00:00Z    # rules at that time (idle clearing)
ctxrules commit s_a5a2 --preset aggressive --head n_deff --json
ctxrules commit s_a5a2 --diff parent                 # or a commit id / node id (prefix)
""",
    )
    add_id_argument(p, "session", kind="session")
    add_id_argument(
        p,
        "--head",
        kind="node",
        metavar="NODE",
        help="node id or unique prefix (default: the session's HEAD)",
    )
    add_now_option(
        p, "run the rules again at this time (idle clearing), saving the commit it makes"
    )
    add_config_options(p)
    p.add_argument(
        "--diff",
        metavar="OTHER",
        help="'parent', a commit id (cc_…) or a node id, or a unique prefix of one, to diff with",
    )
    p.add_argument(
        "--items",
        type=int,
        default=30,
        metavar="N",
        help="how many of the last items the table shows (default 30; 0: all)",
    )
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print the commit as JSON")


def totals(commit: ContextCommit) -> dict[str, dict[str, int]]:
    """Items and tokens per state."""
    out = {s: {"items": 0, "tokens": 0} for s in STATES}
    for it in commit.items:
        out[it.state]["items"] += 1
        out[it.state]["tokens"] += it.tokens
    return out


def commit_json(commit: ContextCommit, *, items: bool = True, text: bool = False) -> dict[str, Any]:
    """The JSON shape of ``ctxrules commit --json``.

    ``items=False`` leaves the item list out (the header, notes and totals stay: a
    commit's line in a timeline); ``text=True`` adds each item's rendered ``text`` (what
    the viewer shows; the command prints none, as the text can be large).
    """
    out: dict[str, Any] = {
        "id": commit.id,
        "session_id": commit.session_id,
        "parent_ids": list(commit.parent_ids),
        "head_node_id": commit.head_node_id,
        "rules_version": commit.rules_version,
        "created_at": commit.created_at,
        "total_tokens": commit.total_tokens,
        "summary": commit.summary,
        "notes": list(commit.notes),
        "totals": {"items": len(commit.items), "by_state": totals(commit)},
    }
    if items:
        out["items"] = [
            {f: getattr(it, f) for f in ITEM_FIELDS} | ({"text": it.rendered} if text else {})
            for it in commit.items
        ]
    return out


def diff_json(a: ContextCommit, b: ContextCommit) -> dict[str, Any]:
    """What ``ctxrules commit --diff --json`` prints: how commit ``b`` differs from ``a``
    (``ctxrules.commit.diff_commits``: added, removed, changed state, rewritten, the
    shared cacheable prefix, tokens)."""
    return msgspec.to_builtins(diff_commits(a, b))


def branch_commits(
    store: CommitStore,
    session_id: str,
    head: str | None,
    *,
    config: PipelineConfig | None,
    limit: int = 0,
) -> tuple[list[ContextCommit], int]:
    """The commit at each conversation node of the branch to ``head`` (default HEAD), made
    turn by turn as the agent would have made them: each at the time its node was recorded,
    on top of the one before (found when stored, else generated and stored).

    ``limit`` > 0 keeps the last ``limit`` turns.  Returns the commits, oldest first, and
    how many turns the branch has.
    """

    graph = load_graph(store, session_id)
    turns = graph.chain(head if head is not None else graph.session.head)
    shown = turns[-limit:] if limit > 0 else turns
    commits = [
        make_commit(session_id, n.id, now=n.created_at, store=store, config=config) for n in shown
    ]
    return commits, len(turns)


def _other(args: argparse.Namespace, store: Any, commit: ContextCommit, config: Any) -> Any:
    other = args.diff
    if other == "parent":
        if not commit.parent_ids:
            raise CtxrulesError("this commit has no parent to diff with", where=commit.id)
        return load_commit(commit.parent_ids[0], store=store)
    if other.startswith("cc_"):
        return load_commit(resolve_commit(store, args.session, other), store=store)
    node = resolve_node(store, args.session, other).id
    return make_commit(args.session, node, now=now_of(args), store=store, config=config)


def _print_diff(console: Console, d: CommitDiff) -> None:
    table = Table(title=f"diff {d.a} → {d.b}")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_column("items", overflow="fold", max_width=70)
    table.add_row("added", str(len(d.added)), " ".join(d.added[:12]))
    table.add_row("removed", str(len(d.removed)), " ".join(d.removed[:12]))
    table.add_row(
        "changed state", str(len(d.changed)), " ".join(f"{k}:{x}→{y}" for k, x, y in d.changed[:8])
    )
    table.add_row("rewritten", str(len(d.rewritten)), " ".join(d.rewritten[:12]))
    table.add_row("shared prefix", str(d.prefix_items), f"{d.prefix_tokens} tokens cacheable")
    console.print(table)
    console.print(f"tokens {d.tokens_a} → {d.tokens_b}")


def print_commit(console: Console, commit: ContextCommit, *, last: int = 30) -> None:
    """The readable view: totals by state, notes, the last ``last`` items."""
    # The ids are wider than the totals table: a heading line, not a wrapped title.
    console.print(f"commit {commit.id} at {commit.head_node_id}", highlight=False)
    by_state = Table()
    by_state.add_column("state")
    by_state.add_column("items", justify="right")
    by_state.add_column("tokens", justify="right")
    for state, t in totals(commit).items():
        if t["items"]:
            by_state.add_row(state, str(t["items"]), str(t["tokens"]))
    by_state.add_row("sent", "", str(commit.total_tokens))
    console.print(by_state)
    for note in commit.notes:
        console.print(f"[yellow]note[/yellow] {escape(note)}", markup=True, highlight=False)
    items = commit.items if last == 0 else commit.items[-last:]
    table = Table(title=f"items ({len(items)} of {len(commit.items)})")
    for col in ("#", "role", "state", "tokens", "reason", "flags", "text"):
        table.add_column(
            col,
            justify="right" if col in ("#", "tokens") else "left",
            no_wrap=col == "text",
            overflow="ellipsis",
            max_width=40 if col == "text" else None,
        )
    offset = len(commit.items) - len(items)
    for i, it in enumerate(items, offset):
        flags = "".join(
            f
            for f, on in (
                ("L", it.locked),
                ("A", it.is_anchor),
                ("@", it.attached_from is not None),
            )
            if on
        )
        role = it.role + (f" {it.name}" if it.name else "")
        table.add_row(
            str(i),
            role,
            it.state,
            str(it.tokens),
            it.reason,
            flags,
            " ".join(it.rendered.split())[:80],
        )
    console.print(table)


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules commit``; returns the exit code."""
    config = config_of(args)
    store = open_store_from(args)
    try:
        # Without --now the current commit is shown; with it the rules run at that time
        # (else a stored commit for the head would hide what idle clearing does then).
        commit = make_commit(
            args.session,
            args.head,
            now=now_of(args),
            store=store,
            config=config,
            rerun=args.now is not None,
        )
        if args.diff:
            other = _other(args, store, commit, config)
            if args.json:
                print_json(diff_json(other, commit))
            else:
                _print_diff(rich_console(width=120), diff_commits(other, commit))
            return 0
        if args.json:
            print_json(commit_json(commit))
        else:
            print_commit(rich_console(width=120), commit, last=args.items)
    finally:
        store.close()
    return 0
