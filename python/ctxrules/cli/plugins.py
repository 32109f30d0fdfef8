"""``ctxrules plugins``: what loaded, grouped by kind, and the plugins it came from.

The listing shows each kind (tokenizers, rules, summarizers, providers, importers,
context sources, models) with the names registered, one line per plugin
(``    PLUGIN: NAME, NAME``), then the plugins: distribution, version, hooks.

``--json`` prints a list with one object per loaded plugin, in load order — a stable
shape::

    [{"name": str, "distribution": str, "version": str, "builtin": bool,
      "hooks": [str], "provides": {KIND: [NAME, ...]}}]

``provides`` has a key for each kind the plugin registered something of (the kinds are
``ctxrules.plugins.KINDS``), with the names in registration order.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..plugins import KINDS, loaded_plugins, registry
from ._common import print_json, subcommand

__all__ = ["KIND_ORDER", "add_parser", "plugin_rows", "run"]

#: The order kinds are listed in: what a user meets first comes first.
KIND_ORDER = (
    "tokenizers",
    "rules",
    "summarizers",
    "providers",
    "importers",
    "context_sources",
    "models",
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``plugins`` subcommand."""
    p = subcommand(
        sub,
        "plugins",
        run,
        description="List what the loaded plugins registered, grouped by kind, then the "
        "plugins themselves (distribution, version, hooks).  CTXRULES_LOAD_PLUGINS "
        "(an allow-list of third-party plugins) decides what loads.",
        examples="""
ctxrules plugins
ctxrules plugins --json                      # one object per plugin (shape in the docs)
CTXRULES_LOAD_PLUGINS= ctxrules plugins      # built-ins only
""",
    )
    p.add_argument("--json", action="store_true", help="print JSON")


def plugin_rows() -> list[dict[str, Any]]:
    """The ``--json`` rows (see the module docstring)."""
    provides: dict[str, dict[str, list[str]]] = {}
    for kind in KINDS:
        for name, origin in registry(kind).origin.items():
            provides.setdefault(origin, {}).setdefault(kind, []).append(name)
    return [
        {
            "name": p.name,
            "distribution": p.distribution,
            "version": p.version,
            "builtin": p.builtin,
            "hooks": p.hooks,
            "provides": provides.get(p.name, {}),
        }
        for p in loaded_plugins()
    ]


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules plugins``; returns the exit code."""
    rows = plugin_rows()
    if args.json:
        print_json(rows)
        return 0
    out = sys.stdout
    label = {r["name"]: r["name"] + (" (built-in)" if r["builtin"] else "") for r in rows}
    for kind in (*KIND_ORDER, *(k for k in KINDS if k not in KIND_ORDER)):
        by_plugin = [(r["name"], r["provides"][kind]) for r in rows if kind in r["provides"]]
        total = sum(len(names) for _, names in by_plugin)
        out.write(f"{kind.replace('_', ' ')} ({total})\n")
        if not by_plugin:
            out.write("    none\n")
        for plugin, names in by_plugin:
            out.write(f"    {label[plugin]}: {', '.join(names)}\n")
    out.write(f"plugins ({len(rows)})\n")
    for r in rows:
        out.write(
            f"    {label[r['name']]}  {r['distribution']} {r['version']}  "
            f"hooks: {', '.join(r['hooks']) or '-'}\n"
        )
    return 0
