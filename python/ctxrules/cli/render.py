"""``ctxrules render SESSION --provider P``: the request body exactly as it would be sent.

The commit at ``--head`` (default HEAD) under ``--config`` / ``--preset`` (default: the nearest
ctxrules.toml / pyproject, else the default preset) is found or generated at ``--now``;
the situation layer (L1) is built from the call tree (``ctxrules.situation``) and the
commit rendered with it.  Without options the body bytes are printed as they are;
``--json`` wraps them with the provider, model and endpoint; ``--explain`` adds the
breakdown (tokens per layer and category, breakpoints, predicted cached tokens against
the parent commit).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import msgspec

from ._common import (
    add_config_options,
    add_id_argument,
    add_now_option,
    add_store_option,
    config_of,
    now_of,
    print_json,
    store_of,
    subcommand,
)

if TYPE_CHECKING:
    from .demo import DemoState

PROVIDERS = ("anthropic", "openai-chat", "openai-responses", "gemini")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subcommand(
        sub,
        "render",
        run,
        help="render a session's commit into a provider request",
        description="Render the commit at a head into one provider's request body, "
        "exactly as it would be sent (the commit is found, or made at --now).  --json "
        "wraps the body with provider, model and endpoint; --explain breaks it down.",
        examples="""
ctxrules render s_67f3 --provider anthropic                 # the body bytes
ctxrules render s_67f3 --provider openai-chat --json --preset aggressive
ctxrules render s_67f3 --provider gemini --explain --now 2026-01-01T00:00:00Z
""",
    )
    add_id_argument(p, "session", kind="session")
    p.add_argument(
        "--provider",
        required=True,
        help=f"a registered provider ({', '.join(PROVIDERS)}, or a plugin's)",
    )
    p.add_argument(
        "--model", default=None, help="model (default: the session's, else the provider's)"
    )
    add_id_argument(
        p,
        "--head",
        kind="node",
        default=None,
        metavar="NODE",
        help="render at this node, an id or unique prefix (default HEAD)",
    )
    add_now_option(p, "clock for the rules (default: now)")
    add_config_options(p)
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON with the body inside")
    p.add_argument("--explain", action="store_true", help="add a breakdown of the request")


def run(args: argparse.Namespace) -> int:
    from ..commit import ensure_latest_commit, load_commit
    from ..errors import NotFoundError
    from ..providers import get_provider
    from ..render import explain, render, session_defaults
    from ..situation import commit_situation

    provider = get_provider(args.provider)
    config = config_of(args)
    with store_of(args) as store:
        info = store.get_session(args.session)
        commit = ensure_latest_commit(
            info.id, args.head, now=now_of(args), store=store, config=config
        )
        defaults = session_defaults(info.metadata)
        if args.model:
            defaults["model"] = args.model
        model = defaults.pop("model", None)
        situation = commit_situation(store, commit) or None
        rendered = render(commit, provider, model, situation=situation, **defaults)
        breakdown = None
        if args.explain:
            previous = None
            if commit.parent_ids:
                try:
                    previous = load_commit(commit.parent_ids[0], store=store)
                except NotFoundError:
                    previous = None
            breakdown = explain(
                commit,
                provider,
                model,
                previous=previous,
                previous_situation=commit_situation(store, previous) if previous else None,
                situation=situation,
                **defaults,
            )
    if args.json:
        out = {
            "session": info.id,
            "commit": commit.id,
            "provider": rendered.provider,
            "model": rendered.model,
            "endpoint": rendered.endpoint,
            "body": msgspec.json.decode(rendered.body),
        }
        if breakdown is not None:
            out["explain"] = breakdown
        print_json(out)
    elif breakdown is not None:
        _print_explain(breakdown)
    else:
        sys.stdout.buffer.write(rendered.body + b"\n")
    return 0


def _print_explain(b: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=100)
    console.print(
        f"{b['provider']} {b['model']}  POST {b['endpoint']}  "
        f"{b['body_bytes']:,} bytes, {b['messages']} messages, commit {b['commit']}"
    )
    t = b["tokens"]
    table = Table(title="tokens by layer")
    table.add_column("layer / category")
    table.add_column("tokens", justify="right")
    table.add_row("L0 session (system + tools)", f"{t['L0_session']:,}")
    table.add_row("L1 situation", f"{t['L1_situation']:,}")
    table.add_row("system items", f"{t['system_items']:,}")
    for k, v in t["L2_task"].items():
        table.add_row(f"L2 {k}", f"{v:,}")
    table.add_row("total", f"{t['total']:,}")
    console.print(table)
    states = ", ".join(f"{k} {v['items']} ({v['tokens']:,} tok)" for k, v in b["states"].items())
    console.print(f"items by state: {states}")
    console.print(f"breakpoints: {', '.join(b['breakpoints']) or 'none'}")
    if b["degraded_tool_items"]:
        console.print(f"tool items shown as text (pairing missing): {b['degraded_tool_items']}")
    p = b["predicted_cache"]
    if p["previous_commit"] is None:
        console.print("predicted cache hit: none (no previous commit)")
    else:
        console.print(
            f"predicted cache hit vs {p['previous_commit']}: {p['shared_tokens']:,} of "
            f"{p['total_tokens']:,} tokens ({p['ratio']:.0%}), {p['shared_items']} items"
        )


def step_render(state: DemoState) -> None:
    """Demo step: each turn's request rendered for every built-in provider — body size,
    Anthropic breakpoints, and the predicted cache hit against the previous turn."""
    from rich.table import Table

    from ..commit import ensure_latest_commit, load_commit
    from ..config import PipelineConfig
    from ..render import header_tokens, predicted_cache_hit, render, session_defaults
    from ..situation import commit_situation
    from .commit import DEMO_PRESET

    # The same configuration as the commit step, so these are the commits it showed.
    config = PipelineConfig.preset(DEMO_PRESET).with_params("summarize", threshold_tokens=800)
    defaults = session_defaults(state.store.get_session(state.session_id).metadata)
    defaults.pop("model", None)
    header = header_tokens("anthropic", **defaults)
    table = Table(title="rendered requests per turn (bytes) and predicted prompt-cache hit")
    for col in ("turn", *PROVIDERS, "breakpoints", "cached / sent tokens", "hit"):
        table.add_column(col, justify="left" if col == "breakpoints" else "right")
    previous = None
    for n, node in enumerate((c for c in state.path if c.caller is None), 1):
        commit = ensure_latest_commit(
            state.session_id, node.id, now=node.created_at, store=state.store, config=config
        )
        # A head may also hold a later commit (e.g. made by `ctxrules commit --now` on an
        # earlier run); the request of that turn is the one made at the turn's own time.
        while commit.created_at > node.created_at and commit.parent_ids:
            commit = load_commit(commit.parent_ids[0], store=state.store)
        situation = commit_situation(state.store, commit) or None
        sizes = [render(commit, p, situation=situation, **defaults) for p in PROVIDERS]
        # Every turn of the demo is in the main conversation: one constant situation.
        l1 = header_tokens("anthropic", system=situation)
        hit = predicted_cache_hit(previous, commit, header=header + l1)
        table.add_row(
            str(n),
            *(f"{len(r.body):,}" for r in sizes),
            str(len(sizes[0].meta.get("breakpoints", []))),
            f"{hit.shared_tokens:,} / {hit.total_tokens:,}",
            f"{hit.ratio:.0%}",
        )
        previous = commit
    state.console.print(table)
