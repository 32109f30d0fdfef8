"""``ctxrules proxy``: a loopback proxy that records agents' live calls into the store
(observe), or sends them rendered under the rules (apply) — ``ctxrules.proxy``,
docs/proxy.md.

It prints the lines that point Claude Code, the OpenAI SDK (and Codex) and the Gemini
SDK at it, then serves until Ctrl-C, when it writes what is still queued.  It needs
the optional extra ``ctxrules[proxy]`` (aiohttp) and says how to install it.
"""

from __future__ import annotations

import argparse
import sys

from ..store import open_store
from ._common import port_number, subcommand
from ._store import add_config_options, add_store_option, config_of

__all__ = ["add_parser", "pointers", "run"]

#: The port served unless ``--port`` says otherwise (``ctxrules.proxy.DEFAULT_PORT``,
#: repeated so ``--help`` does not import the proxy and its optional dependency).
DEFAULT_PORT = 8788


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``proxy`` subcommand."""
    p = subcommand(
        sub,
        "proxy",
        run,
        description="Serve a proxy on this machine (127.0.0.1) for the vendors' APIs: "
        "Anthropic Messages (and count_tokens), OpenAI Chat Completions and Responses, "
        "Gemini generateContent.  Point an agent's base URL at it (it prints how for "
        "Claude Code, the OpenAI SDK, Codex and the Gemini SDK).  In observe mode "
        "(the default) every byte goes upstream and back unchanged, streams as they "
        "arrive, and each call is recorded into the store as a session of the history "
        "graph: `ctxrules sessions`, `stats` and `view` show them while the agent runs.  "
        "In apply mode the request rendered from the session's commit under the rules "
        "is sent instead, and count_tokens is answered locally.  API keys are passed "
        "on, never stored.  Needs the extra: pip install 'ctxrules[proxy]'.",
        examples="""
ctxrules proxy                                   # observe on http://127.0.0.1:8788
ctxrules proxy --port 0 --store agents.db        # any free port, another store
ctxrules proxy --mode apply --preset aggressive  # send what the rules make of each request
ctxrules proxy --upstream-openai http://127.0.0.1:11434   # a local OpenAI-compatible server
""",
    )
    p.add_argument(
        "--port",
        type=port_number,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on (default 127.0.0.1; only loopback unless --allow-remote)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host other machines reach (the proxy has no authentication)",
    )
    p.add_argument(
        "--mode",
        choices=("observe", "apply"),
        default="observe",
        help="observe: forward unchanged and record (default); apply: send the request "
        "the rules make",
    )
    for vendor, url in (
        ("anthropic", "https://api.anthropic.com"),
        ("openai", "https://api.openai.com"),
        ("gemini", "https://generativelanguage.googleapis.com"),
    ):
        p.add_argument(
            f"--upstream-{vendor}",
            metavar="URL",
            default=None,
            help=f"where {vendor} calls go (default {url})",
        )
    p.add_argument(
        "--forward-count-tokens",
        action="store_true",
        help="apply mode: forward count_tokens upstream instead of answering it locally",
    )
    add_config_options(p)
    add_store_option(p, creates=True)


def pointers(url: str) -> list[str]:
    """The lines that point each agent at a proxy serving ``url``."""
    return [
        f"  Claude Code:  ANTHROPIC_BASE_URL={url} claude",
        f'  OpenAI SDK:   OPENAI_BASE_URL={url}/v1   (or OpenAI(base_url="{url}/v1"))',
        '  Codex:        ~/.codex/config.toml: model_provider = "ctxrules" and '
        f'[model_providers.ctxrules] base_url = "{url}/v1", wire_api = "responses", '
        "supports_websockets = false",
        f"  Gemini SDK:   GOOGLE_GEMINI_BASE_URL={url}   (or genai.Client(http_options="
        f'types.HttpOptions(base_url="{url}")))',
        "  Live:         ctxrules sessions · ctxrules stats SESSION · ctxrules view SESSION",
    ]


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    try:
        import aiohttp  # noqa: F401  # deferred: the optional extra ctxrules[proxy]
    except ImportError:
        print(
            "ctxrules proxy: error: the proxy needs aiohttp, which is not installed "
            "(hint: pip install 'ctxrules[proxy]')",
            file=sys.stderr,
        )
        return 2
    from ..proxy import Proxy, ProxyConfig  # deferred: imports aiohttp

    config = config_of(args) if args.mode == "apply" else None
    upstreams = {
        vendor: url
        for vendor in ("anthropic", "openai", "gemini")
        if (url := getattr(args, f"upstream_{vendor}")) is not None
    }
    store = open_store(args.store, create=True)
    try:
        proxy = Proxy(
            ProxyConfig(
                host=args.host,
                port=args.port,
                upstreams=upstreams,
                mode=args.mode,
                config=config,
                forward_count_tokens=args.forward_count_tokens,
                allow_remote=args.allow_remote,
            ),
            store,
        )

        def ready(p: Proxy) -> None:
            print(
                f"ctxrules proxy ({args.mode}) on {p.url}, recording into {store.location} "
                "(Ctrl-C stops)",
                flush=True,
            )
            print("\n".join(pointers(p.url)), flush=True)

        proxy.serve_forever(on_ready=ready)
        recorder = proxy.recorder
        print(
            f"ctxrules proxy: stopped; {recorder.recorded} calls recorded, "
            f"{recorder.failed} failed to record, {recorder.dropped} dropped",
            flush=True,
        )
    finally:
        store.close()
    return 0
