"""``ctxrules render SESSION --provider P``: the request body exactly as it would be sent.

Which request (``ctxrules.replay``): by default the *next* one at ``--head`` (default
HEAD) — refused when the conversation there ends with the model's answer, since there
is no new input yet and resending the answer would make it a prefill; with ``--for
NODE`` the request whose response is the assistant node NODE (what replaying a
recording needs).  Its commit under ``--config`` / ``--preset`` (default: the nearest
ctxrules.toml / pyproject, else the default preset) is found or generated at ``--now``
(``--for``: default the time the request was sent); the situation layer (L1) is built
from the call tree (``ctxrules.situation``).  Without options the body bytes are
printed as they are; ``--json`` wraps them with the provider, model and endpoint;
``--explain`` adds the breakdown: the billed-prompt estimate (``input_tokens`` and the
rules applied), the predicted cache reads and writes against the previous request (the
request for the previous assistant answer, with the TTL checked against the node
times), tokens per layer and category, breakpoints.
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
        description="Render a request of a session into one provider's request body, "
        "exactly as it would be sent: the next request at a head, or with --for the "
        "request whose answer is NODE (the commit is found, or made at --now).  A head "
        "that is the model's last answer has no next request yet: use --for.  --json "
        "wraps the body with provider, model and endpoint; --explain breaks it down "
        "with the billed-prompt estimate and the predicted cache use.",
        examples="""
ctxrules render s_a5a2 --provider anthropic --for n_bfb4   # the request answered by n_bfb4
ctxrules render s_a5a2 --provider openai-chat --json --preset aggressive --head n_3d2a
ctxrules render s_a5a2 --provider gemini --explain --for n_bfb4 --now 2026-01-01T00:00:00Z
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
    which = p.add_mutually_exclusive_group()
    add_id_argument(
        which,  # type: ignore[arg-type]  # a group adds arguments like its parser
        "--head",
        kind="node",
        default=None,
        metavar="NODE",
        help="render the next request at this node, an id or unique prefix (default HEAD)",
    )
    add_id_argument(
        which,  # type: ignore[arg-type]
        "--for",
        dest="for_node",
        kind="node",
        default=None,
        metavar="NODE",
        help="render the request whose response is the assistant node NODE",
    )
    add_now_option(
        p, "clock for the rules and the request's time (default: now; --for: when it was sent)"
    )
    add_config_options(p)
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON with the body inside")
    p.add_argument("--explain", action="store_true", help="add a breakdown of the request")


def run(args: argparse.Namespace) -> int:
    from ..providers import get_provider
    from ..render import render, session_defaults
    from ..replay import explain_request, next_request, request_for

    provider = get_provider(args.provider)
    config = config_of(args)
    with store_of(args) as store:
        info = store.get_session(args.session)
        if args.for_node is not None:
            now = None if args.now is None else float(args.now)
            request = request_for(store, info.id, args.for_node, now=now, config=config)
        else:
            request = next_request(store, info.id, args.head, now=now_of(args), config=config)
        defaults = session_defaults(info.metadata)
        if args.model:
            defaults["model"] = args.model
        model = defaults.pop("model", None)
        rendered = render(
            request.commit, provider, model, situation=request.situation or None, **defaults
        )
        breakdown = None
        if args.explain:
            breakdown = explain_request(store, request, provider, model, config=config)
    if args.json:
        out = {
            "session": info.id,
            "commit": request.commit.id,
            "for_node": request.answer,
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
    e = b["estimate"]
    console.print(
        f"billed prompt (estimate): {b['input_tokens']:,} tokens ({e['tokenizer']} x "
        f"{e['calibration']} prose, x {e['structured_calibration']} structured; tool prompt "
        f"{e['tool_prompt_tokens']:,}, framing {e['framing_tokens']:,}, images "
        f"{e['image_tokens']:,})",
        markup=False,
    )
    c = b["cache"]
    console.print(
        f"cache ({c['rule']}): read {b['cache_read_tokens']:,}, write "
        f"{b['cache_write_tokens']:,} tokens — {c['reason']}",
        markup=False,
    )
    if b.get("recorded"):
        r = b["recorded"]
        console.print(
            f"recorded usage: {r['input_tokens']:,} prompt tokens (cache read "
            f"{r['cache_read_tokens']:,}, write {r['cache_write_tokens']:,})"
        )
    t = b["tokens"]
    table = Table(title="tokens by layer (the commit's own counts)")
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
        console.print("predicted cache hit: none (no previous request)")
    else:
        console.print(
            f"predicted cache hit vs {p['previous_commit']}: {b['cache_read_tokens']:,} of "
            f"{p['total_tokens']:,} tokens read ({p['ratio']:.0%}); "
            f"{p['shared_tokens']:,} shared, {p['shared_items']} items"
        )


def step_render(state: DemoState) -> None:
    """Demo step: the request that produced each answer, rendered for every built-in
    provider — body size, Anthropic breakpoints, and its predicted cache read."""
    from rich.table import Table

    from ..config import PipelineConfig
    from ..render import render, session_defaults
    from ..replay import explain_request, request_for
    from .commit import DEMO_PRESET

    # The same configuration as the commit step, so these are the commits it showed.
    config = PipelineConfig.preset(DEMO_PRESET).with_params("summarize", threshold_tokens=800)
    defaults = session_defaults(state.store.get_session(state.session_id).metadata)
    defaults.pop("model", None)
    table = Table(title="rendered requests per turn (bytes) and predicted prompt-cache hit")
    for col in ("turn", *PROVIDERS, "breakpoints", "cached / sent tokens", "hit"):
        table.add_column(col, justify="left" if col == "breakpoints" else "right")
    answers = [c for c in state.path if c.caller is None and c.role == "assistant"]
    for n, node in enumerate(answers, 1):
        request = request_for(state.store, state.session_id, node.id, config=config)
        situation = request.situation or None
        sizes = [render(request.commit, p, situation=situation, **defaults) for p in PROVIDERS]
        ex = explain_request(state.store, request, "anthropic", config=config)
        table.add_row(
            str(n),
            *(f"{len(r.body):,}" for r in sizes),
            str(len(sizes[0].meta.get("breakpoints", []))),
            f"{ex['cache_read_tokens']:,} / {ex['input_tokens']:,}",
            f"{ex['predicted_cache']['ratio']:.0%}",
        )
    state.console.print(table)
