"""``ctxrules demo``: the main job on the bundled session."""

from __future__ import annotations

import argparse
import json
from importlib import resources

from rich.console import Console
from rich.table import Table

from ..model import ContentBlock, content_text, decode
from ..tokenizers import DEFAULT_ENCODING, get_tokenizer

BUNDLED_SESSION = "claude_code_init.jsonl"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="run the pipeline on a bundled real session")
    p.add_argument("--encoding", default=DEFAULT_ENCODING)
    p.set_defaults(func=run)


def bundled_session_path() -> str:
    """Filesystem path of the bundled demo session."""
    return str(resources.files("ctxrules.data") / "sessions" / BUNDLED_SESSION)


def _messages(path: str) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            entry = json.loads(line)
            msg = entry.get("message")
            if not isinstance(msg, dict):
                continue
            content = msg.get("content", "")
            if isinstance(content, list):
                blocks = decode(json.dumps(content), list[ContentBlock], where=path)
                text = content_text(blocks)
            else:
                text = str(content)
            rows.append((str(msg.get("role", "?")), text))
    return rows


def run(args: argparse.Namespace) -> int:
    console = Console(width=110)
    path = bundled_session_path()
    rows = _messages(path)
    tok = get_tokenizer(args.encoding)
    counts = tok.count_batch([text for _, text in rows])
    table = Table(title=f"{BUNDLED_SESSION}: tokens per message ({args.encoding})")
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("tokens", justify="right")
    table.add_column("preview", overflow="ellipsis", no_wrap=True, max_width=60)
    for i, ((role, text), n) in enumerate(zip(rows, counts), 1):
        table.add_row(str(i), role, str(n), text.replace("\n", " ")[:80])
    table.add_row("", "total", str(sum(counts)), "")
    console.print(table)
    return 0
