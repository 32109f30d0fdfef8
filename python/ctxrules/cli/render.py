"""``ctxrules render SESSION --provider P``: the request body exactly as it would be sent.

Which request (``ctxrules.requests``): by default the *next* one at ``--head`` (default
HEAD) — refused when the conversation there ends with the model's answer, since there
is no new input yet and resending the answer would make it a prefill; with ``--for
NODE`` the request whose response is the assistant node NODE (what replaying a
recording needs).  Its commit under ``--config`` / ``--preset`` (default: the nearest
ctxrules.toml / pyproject, else the default preset) is found or generated at ``--now``
(``--for``: default the time the request was sent).  The request carries what the
session recorded (``ctxrules.requests.render_defaults``): its system text, its tool
declarations (or, where the format records none, every tool the session called,
declared with an open schema), the answer's model when it belongs to the provider's
family, its output limit and — for the provider it was recorded from — its other
parameters; ``--model``, ``--system-file``, ``--tools-file`` and ``--max-tokens``
override each.  ``--situation`` adds the situation layer (L1) built from the call tree
(``ctxrules.situation``), which the agent did not send.  Without options the body
bytes are printed as they are; ``--json`` wraps them with the provider, model and
endpoint; ``--explain`` adds the breakdown: where each default came from, the
billed-prompt estimate (``input_tokens`` and the rules applied), the predicted cache
reads and writes against the previous request (the request for the previous assistant
answer, with the TTL checked against the node times), tokens per layer and category,
breakpoints.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

import msgspec

from ..config import PipelineConfig
from ..errors import ConfigError, CtxrulesError, ValidationError
from ..model import ToolSpec
from ..providers import RenderedRequest, get_provider
from ..render import render, tool_specs
from ..requests import Request, explain_request, next_request, render_defaults, request_for
from ..store import CommitStore
from ._common import add_now_option, now_of, print_json, read_text, subcommand
from ._store import add_config_options, add_id_argument, add_store_option, config_of, store_of
from ._terminal import rich_console

PROVIDERS = ("anthropic", "openai-chat", "openai-responses", "gemini")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subcommand(
        sub,
        "render",
        run,
        description="Render a request of a session into one provider's request body, "
        "exactly as it would be sent: the next request at a head, or with --for the "
        "request whose answer is NODE (the commit is found, or made at --now).  A head "
        "that is the model's last answer has no next request yet: use --for.  --json "
        "wraps the body with provider, model and endpoint; --explain breaks it down "
        "with the billed-prompt estimate and the predicted cache use.  The request "
        "carries what the session recorded (system, tools, model, parameters; tools "
        "the format does not declare are declared from their calls); --system-file, "
        "--tools-file, --max-tokens and --model override them, --situation adds the "
        "situation layer the agent did not send.",
        examples="""
ctxrules render s_a5a2 --provider anthropic --for n_bfb4   # the request answered by n_bfb4
ctxrules render s_a5a2 --provider openai-chat --json --preset aggressive --head n_3d2a
ctxrules render s_a5a2 --provider gemini --explain --for n_bfb4 --now 2026-01-01T00:00:00Z
ctxrules render s_a5a2 --provider anthropic --for n_bfb4 --situation --max-tokens 4096
ctxrules render s_a5a2 --provider anthropic --for n_bfb4 --system-file p.md --tools-file t.json
""",
    )
    add_id_argument(p, "session", kind="session")
    p.add_argument(
        "--provider",
        required=True,
        help=f"a registered provider ({', '.join(PROVIDERS)}, or a plugin's)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="model (default: the recorded one when it is of the provider's family, else the "
        "provider's); a model of another family is an error",
    )
    p.add_argument(
        "--system-file",
        metavar="FILE",
        default=None,
        help="system prompt: the text of FILE (UTF-8; - for stdin) instead of the recorded one",
    )
    p.add_argument(
        "--tools-file",
        metavar="FILE",
        default=None,
        help="tool declarations: a JSON list of tools in any provider's shape, instead of "
        "the recorded (or inferred) ones",
    )
    p.add_argument(
        "--max-tokens",
        type=_positive_int,
        default=None,
        metavar="N",
        help="output limit instead of the recorded one (or the model's default)",
    )
    p.add_argument(
        "--situation",
        action="store_true",
        help="add the situation layer (where the request sits in the call tree), which the "
        "agent did not send",
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


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def _read_option_file(path: str, option: str, what: str) -> str:
    try:
        return read_text(path)
    except CtxrulesError as exc:
        raise ConfigError(
            f"{option}: {exc.message}", where=path, hint=f"give a readable UTF-8 file of {what}"
        ) from None


def read_tools_file(path: str) -> tuple[ToolSpec, ...]:
    """The tools of a ``--tools-file``: a JSON list of declarations in any provider's
    shape (``ctxrules.render.tool_specs``), or an object with such a ``tools`` list (a
    request body).  ``ConfigError`` naming the file and the entry otherwise."""

    what = "a JSON list of tool declarations"
    text = _read_option_file(path, "--tools-file", what)
    try:
        raw = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise ConfigError(
            f"--tools-file: not JSON ({exc})", where=path, hint=f"give {what}"
        ) from None
    if isinstance(raw, dict) and isinstance(raw.get("tools"), list):
        raw = raw["tools"]
    if not isinstance(raw, list):
        raise ConfigError(
            f"--tools-file: a JSON {type(raw).__name__}, not a list of tools",
            where=path,
            hint=f'give {what}, e.g. [{{"name": "Read", "input_schema": {{"type": "object"}}}}]',
        )
    out: list[ToolSpec] = []
    for i, entry in enumerate(raw):
        specs = tool_specs([entry])
        if not specs:
            raise ConfigError(
                f"--tools-file: entry {i} is not a tool declaration: {str(entry)[:80]}",
                where=path,
                hint="each tool needs a name and its schema (Anthropic input_schema, OpenAI "
                "function.parameters, Gemini functionDeclarations)",
            )
        out.extend(specs)
    return tuple(out)


def overrides_of(args: argparse.Namespace) -> dict[str, Any]:
    """The render options the command line gives (``None`` for those it leaves to the
    session): ``model``, ``system``, ``tools``, ``max_tokens``."""
    return {
        "model": args.model,
        "system": (
            None
            if args.system_file is None
            else _read_option_file(args.system_file, "--system-file", "the system prompt")
        ),
        "tools": None if args.tools_file is None else read_tools_file(args.tools_file),
        "max_tokens": args.max_tokens,
    }


@dataclass(frozen=True)
class RequestView:
    """A request of a session rendered for one provider, as ``ctxrules render`` makes it:
    the ``Request`` it renders, the ``Rendered`` body and, when asked for, the
    ``explain`` breakdown."""

    session: str
    request: Request
    rendered: RenderedRequest
    explain: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """What ``ctxrules render --json`` prints (``explain`` only when made)."""
        out: dict[str, Any] = {
            "session": self.session,
            "commit": self.request.commit.id,
            "for_node": self.request.answer,
            "provider": self.rendered.provider,
            "model": self.rendered.model,
            "endpoint": self.rendered.endpoint,
            "body": msgspec.json.decode(self.rendered.body),
        }
        if self.explain is not None:
            out["explain"] = self.explain
        return out


def render_request(
    store: CommitStore,
    session: str,
    provider: str,
    *,
    head: str | None = None,
    for_node: str | None = None,
    now: float | None,
    config: PipelineConfig | None = None,
    situation: bool = False,
    explain: bool = False,
    overrides: dict[str, Any] | None = None,
) -> RequestView:
    """Render the request ``ctxrules render`` renders (see the module docstring).

    ``for_node`` names the assistant node whose request is wanted (``now`` ``None``:
    the time it was sent); otherwise the next request at ``head`` (default HEAD) at
    ``now``, which must then be given.  ``overrides`` are ``overrides_of``'s options.
    """

    plugin = get_provider(provider)
    info = store.get_session(session)
    if for_node is not None:
        request = request_for(store, info.id, for_node, now=now, config=config, situation=situation)
    else:
        if now is None:
            raise ValidationError(
                "the next request needs a time", where="now", hint="pass now=time.time()"
            )
        request = next_request(store, info.id, head, now=now, config=config, situation=situation)
    defaults = render_defaults(store, request, plugin, **(overrides or {}))
    rendered = render(
        request.commit, plugin, situation=request.situation or None, **defaults.options
    )
    breakdown = None
    if explain:
        breakdown = explain_request(store, request, plugin, config=config, defaults=defaults)
    return RequestView(info.id, request, rendered, breakdown)


def run(args: argparse.Namespace) -> int:
    config = config_of(args)
    overrides = overrides_of(args)  # files read (and refused) before the store is touched
    with store_of(args) as store:
        done = render_request(
            store,
            args.session,
            args.provider,
            head=args.head,
            for_node=args.for_node,
            # --for: the time the request was sent unless --now says otherwise
            now=(None if args.now is None else float(args.now))
            if args.for_node is not None
            else now_of(args),
            config=config,
            situation=args.situation,
            explain=args.explain,
            overrides=overrides,
        )
    if args.json:
        print_json(done.as_dict())
    elif done.explain is not None:
        _print_explain(done.explain)
    else:
        sys.stdout.buffer.write(done.rendered.body + b"\n")
    return 0


def _print_explain(b: dict) -> None:
    # deferred: rich costs ~40 ms to import, paid only when a table or bar is drawn
    from rich.table import Table

    console = rich_console(width=100)
    console.print(
        f"{b['provider']} {b['model']}  POST {b['endpoint']}  "
        f"{b['body_bytes']:,} bytes, {b['messages']} messages, commit {b['commit']}"
    )
    m, t, p = b["model_choice"], b["tools"], b["params"]
    model_line = f"model: {m['source']}"
    if m.get("note"):
        model_line += f" ({m['note']})"
    console.print(model_line, markup=False)
    tools_line = f"tools: {t['declared']} declared, {t['source']}"
    if t["inferred"]:
        tools_line += f" ({', '.join(t['inferred'])}; open schemas)"
    console.print(f"system: {b['system_source']}; {tools_line}", markup=False)
    params = [f"applied {', '.join(p['applied'])}"] if p["applied"] else []
    params += [f"added {k}={v}" for k, v in p["added"].items()]
    params += [f"dropped {', '.join(p['dropped'])}"] if p["dropped"] else []
    console.print(
        f"parameters (recorded for {p['recorded_from'] or 'no provider'}): "
        + ("; ".join(params) or "none"),
        markup=False,
    )
    rt = b.get("round_trip")
    if rt and "elements" in rt:
        # A replayed recording: what went out as recorded, and what a rule rewrote.
        console.print(
            f"round-trip (recorded for {rt['recorded_for']}): {rt['as_recorded']} of "
            f"{rt['elements']} recorded messages as recorded, system "
            + ("as recorded" if rt["system_as_recorded"] else "canonical"),
            markup=False,
        )
        for c in rt["rewritten"]:
            why = "; ".join(
                f"{x['node']} {x['state']} ({x['reason']})"
                if "state" in x
                else f"{x['node']} {x['change']}"
                for x in c["changed"]
            )
            console.print(
                f"  message {c['element']} rewritten: {why or c.get('note', '')}", markup=False
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
