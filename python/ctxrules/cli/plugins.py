"""``ctxrules plugins``: what loaded, from which distribution, which hooks."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..plugins import KINDS, loaded_plugins, registry
from ._common import print_json


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("plugins", help="list loaded plugins")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    provides: dict[str, dict[str, list[str]]] = {}
    for kind in KINDS:
        reg = registry(kind)
        for name, origin in reg.origin.items():
            provides.setdefault(origin, {}).setdefault(kind, []).append(name)
    rows: list[dict[str, Any]] = [
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
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        tag = " (built-in)" if row["builtin"] else ""
        sys.stdout.write(f"{row['name']}{tag}  {row['distribution']} {row['version']}\n")
        for kind, names in row["provides"].items():
            sys.stdout.write(f"    {kind}: {', '.join(names)}\n")
    return 0
