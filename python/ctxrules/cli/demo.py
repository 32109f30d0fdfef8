"""``ctxrules demo``: the main job on the bundled session, as a sequence of steps.

Each step is a function taking the shared ``DemoState``; ``STEPS`` lists them in order
and later parts of the pipeline add theirs (commit, render, …) to the list.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

from rich.console import Console
from rich.table import Table

from ..model import Call, content_text
from ..store import CommitStore
from ..tokenizers import DEFAULT_ENCODING, get_tokenizer
from ._common import add_store_option, open_store_from, subcommand

BUNDLED_SESSION = "claude_code_init.jsonl"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` subcommand."""
    p = subcommand(
        sub,
        "demo",
        run,
        help="run the pipeline on a bundled real session",
        description="Import a bundled Claude Code session (created in the store if "
        "missing, found if imported already), count its tokens, make its commits turn by "
        "turn under the aggressive preset and render each turn for every built-in provider.",
        examples="""
ctxrules demo                       # into ./.ctxrules (or $CTXRULES_STORE)
ctxrules demo --store memory:demo   # leave nothing on disk
""",
    )
    p.add_argument(
        "--encoding",
        default=DEFAULT_ENCODING,
        help=f"tokenizer of the token table (default {DEFAULT_ENCODING})",
    )
    add_store_option(p, creates=True)


def bundled_session_path() -> str:
    """Filesystem path of the bundled demo session."""
    return str(resources.files("ctxrules.data") / "sessions" / BUNDLED_SESSION)


@dataclass
class DemoState:
    """What the steps share: arguments, console, store and what earlier steps produced."""

    args: argparse.Namespace
    console: Console
    store: CommitStore
    session_id: str = ""
    path: list[Call] = field(default_factory=list)


def node_text(call: Call) -> str:
    """The text of a node as the model reads it (a system node's text is its input)."""
    if call.role == "system":
        return call.input if isinstance(call.input, str) else ""
    return content_text(call.output)


def step_import(state: DemoState) -> None:
    """Import the bundled Claude Code session into the store (idempotent)."""
    from ..dag import branch_path
    from ..importers import import_paths

    (result,) = import_paths(state.store, [bundled_session_path()], format="claude-code")
    state.session_id = result.id
    state.path = branch_path(state.store, result.id)
    verb = "imported" if result.created else "found (already imported)"
    state.console.print(
        f"{verb} {BUNDLED_SESSION} as session {result.id}: {result.calls} calls "
        f"in {state.store.location}"
    )


def step_token_table(state: DemoState) -> None:
    """Print the tokens of every node on the branch, read back from the store."""
    enc = state.args.encoding
    counts = get_tokenizer(enc).count_batch([node_text(c) for c in state.path])
    table = Table(title=f"{BUNDLED_SESSION}: tokens per message ({enc})")
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("name")
    table.add_column("tokens", justify="right")
    table.add_column("preview", overflow="ellipsis", no_wrap=True, max_width=50)
    for call, n in zip(state.path, counts):
        preview = node_text(call).replace("\n", " ")[:80]
        role = call.role if call.caller is None else f"  {call.role}"
        table.add_row(str(call.seq), role, call.name, str(n), preview)
    table.add_row("", "total", "", str(sum(counts)), "")
    state.console.print(table)


#: The demo's steps, in order.
STEPS: list[Callable[[DemoState], None]] = [step_import, step_token_table]

# Later layers append their steps (imported here, at the end, to avoid an import cycle).
from .commit import step_commits  # noqa: E402

STEPS.append(step_commits)

from .render import step_render  # noqa: E402

STEPS.append(step_render)


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules demo``; returns the exit code."""
    console = Console(width=110)
    store = open_store_from(args)
    try:
        state = DemoState(args=args, console=console, store=store)
        for step in STEPS:
            step(state)
    finally:
        store.close()
    return 0
