"""``ctxrules demo``: the main job on the bundled session, as a sequence of steps.

Each step is a function taking the shared ``DemoState``; ``STEPS`` lists them in order:
import, token table, commits turn by turn, rendered requests.  Every step that makes
commits uses one configuration (``demo_config``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

from rich.console import Console
from rich.table import Table

from ..commit import Pipeline, derive_with_summaries, make_commit
from ..config import PipelineConfig
from ..dag import branch_path
from ..importers import import_paths
from ..model import Node, content_text
from ..requests import (
    explain_request,
    render_defaults,
    render_requests,
    request_for,
    session_tool_names,
)
from ..store import CommitStore
from ..tokenizers import DEFAULT_ENCODING, get_tokenizer
from ._common import subcommand
from ._store import add_store_option, open_store_from
from ._terminal import rich_console
from .commit import branch_commits, totals
from .render import PROVIDERS

BUNDLED_SESSION = "claude_code_init.jsonl"
#: The preset the demo's commits are made with, and its summarize threshold: lowered so
#: that folding shows too on a short session.
DEMO_PRESET = "aggressive"
DEMO_THRESHOLD = 900


def demo_config() -> PipelineConfig:
    """The configuration of every commit the demo shows: the preset's budgets with every
    rule acting at once (the shipped preset waits until a cache rewrite pays, which on
    a short session may be never: the demo is there to show each rule at work)."""
    config = PipelineConfig.preset(DEMO_PRESET).with_params(
        "summarize", threshold_tokens=DEMO_THRESHOLD
    )
    for rule in config.pipeline:
        if "cache_aware" in config.rules.get(rule, {}):
            config = config.with_params(rule, cache_aware=False)
    return config


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` subcommand."""
    p = subcommand(
        sub,
        "demo",
        run,
        description="Import a bundled Claude Code session (created in the store if "
        "missing, found if imported already), count its tokens, make its commits turn by "
        "turn under the aggressive preset's budgets (every rule acting at once, not waiting "
        "for a cache rewrite to pay) and render each turn for every built-in provider.",
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
    path: list[Node] = field(default_factory=list)


def node_text(call: Node) -> str:
    """The text of a node as the model reads it (a system node's text is its input)."""
    if call.role == "system":
        return call.input if isinstance(call.input, str) else ""
    return content_text(call.output)


def step_import(state: DemoState) -> None:
    """Import the bundled Claude Code session into the store (idempotent)."""
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


def step_commits(state: DemoState) -> None:
    """The bundled session through the pipeline turn by turn: items per state, tokens and
    what each rule did, one commit per conversation node (time = the node's timestamp)."""
    config = demo_config()
    heads = [c for c in state.path if c.caller is None]
    table = Table(
        title=f"commits turn by turn (preset {DEMO_PRESET!r}, summarize threshold "
        f"{DEMO_THRESHOLD} tokens, so every rule fires on a short session)"
    )
    for col in (
        "turn",
        "head",
        "items",
        "full",
        "aged",
        "cleared",
        "summ.",
        "sent tokens",
        "what the rules did",
    ):
        table.add_column(
            col,
            justify="left" if col in ("head", "what the rules did") else "right",
            overflow="fold",
            max_width=48 if col.startswith("what") else None,
        )
    commits, _ = branch_commits(state.store, state.session_id, None, config=config)
    commit = None
    for n, (node, commit) in enumerate(zip(heads, commits), 1):
        t = totals(commit)
        did = "; ".join(commit.notes) or "-"
        table.add_row(
            str(n),
            node.role,
            str(len(commit.items)),
            str(t["full"]["items"]),
            str(t["aged"]["items"]),
            str(t["cleared"]["items"]),
            f"{t['summarized']['items']}→{t['summary']['items']}",
            str(commit.total_tokens),
            did,
        )
    state.console.print(table)
    if commit is None:
        return
    last = heads[-1]
    # What the next generation at this head would do an hour later (computed, not stored,
    # so the demo shows the same figures every time it runs).
    later = derive_with_summaries(
        commit,
        [],
        session_id=state.session_id,
        head_node_id=last.id,
        pipeline=Pipeline.from_config(config),
        now=last.created_at + 3600.0,
    ).commit
    t = totals(later)
    state.console.print(
        f"an hour after the last turn, the same head: {t['cleared']['items']} result(s) "
        f"cleared, {later.total_tokens} tokens sent; " + ("; ".join(later.notes) or "no changes")
    )
    plain = make_commit(
        state.session_id,
        last.id,
        now=last.created_at,
        store=state.store,
        config=PipelineConfig.preset("off"),
    )
    state.console.print(
        f"final commit {later.id}: {later.total_tokens} tokens sent, against "
        f"{plain.total_tokens} for the same branch with no rules (preset 'off')"
    )


def step_render(state: DemoState) -> None:
    """Demo step: the request that produced each answer, rendered for every built-in
    provider — body size, Anthropic breakpoints, and its predicted cache read."""
    # The commit step's configuration, so these are the commits it showed.
    config = demo_config()
    table = Table(title="rendered requests per turn (bytes) and predicted prompt-cache hit")
    for col in ("turn", *PROVIDERS, "breakpoints", "cached / sent tokens", "hit"):
        table.add_column(col, justify="left" if col == "breakpoints" else "right")
    used_tools = session_tool_names(state.store, state.session_id)
    answers = [c for c in state.path if c.caller is None and c.role == "assistant"]
    requests = [request_for(state.store, state.session_id, a.id, config=config) for a in answers]
    # Each provider's requests as ``render --for`` renders them, in one call.
    per_provider = [render_requests(state.store, [requests], p)[0] for p in PROVIDERS]
    for n, (request, *sizes) in enumerate(zip(requests, *per_provider), 1):
        ex = explain_request(
            state.store,
            request,
            "anthropic",
            config=config,
            defaults=render_defaults(state.store, request, "anthropic", used_tools=used_tools),
        )
        table.add_row(
            str(n),
            *(f"{len(r.body):,}" for r in sizes),
            str(len(sizes[0].meta.get("breakpoints", []))),
            f"{ex['cache_read_tokens']:,} / {ex['input_tokens']:,}",
            f"{ex['predicted_cache']['ratio']:.0%}",
        )
    state.console.print(table)


#: The demo's steps, in order.
STEPS: list[Callable[[DemoState], None]] = [
    step_import,
    step_token_table,
    step_commits,
    step_render,
]


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules demo``; returns the exit code."""
    console = rich_console(width=110)
    store = open_store_from(args)
    try:
        state = DemoState(args=args, console=console, store=store)
        for step in STEPS:
            step(state)
    finally:
        store.close()
    return 0
