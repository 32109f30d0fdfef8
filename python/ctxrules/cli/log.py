"""``ctxrules log SESSION``: every node of a session, as JSON or as a readable tree.

``--json`` lists every node visible in the session (a fork's inherited ones too) in
``seq`` order with all ``Node`` fields.  The tree shows the conversation with the calls
each node made indented under it, marks where the graph branches (``branch 1/2``),
the nodes on the current branch (``*``) and HEAD.  A compaction boundary is a marker
line: its trigger, the tokens the request carried before → after, and the items it
folded.  An attach pointer shows what it attaches, a merge instruction its peers (the
base marked) before its text, and a session whose heads were merged says where to,
under the header.
"""

from __future__ import annotations

import argparse

import msgspec

from ..commit import boundary_of
from ..dag import Graph, load_graph
from ..engine import merged_into
from ..errors import ValidationError
from ..model import Node, content_text
from ..store import Store
from ._common import print_json
from ._store import add_command, store_of
from ._terminal import echo

PREVIEW = 70


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``log`` subcommand."""
    add_command(
        sub,
        "log",
        run,
        description="Show every node of a session as a tree: the conversation, the calls "
        "each node made indented under it, where the graph branches (branch 1/2), the "
        "current branch (*) and HEAD.  Reads only.",
        examples="""
ctxrules log s_a5a2                 # a unique start of the session id is enough
ctxrules log s_a5a2dfbb7d2cd3f5 --json   # every field of every node, in seq order
""",
        ids=(("session", "session"),),
    )


def call_fields(call: Node) -> dict[str, object]:
    """Every field of a node, defaults included (JSON-ready)."""
    return {f: msgspec.to_builtins(getattr(call, f)) for f in Node.__struct_fields__}


def log_json(store: Store, session_id: str) -> list[dict[str, object]]:
    """What ``ctxrules log --json`` prints: every node visible in the session (a fork's
    inherited ones too) in ``seq`` order, each with every ``Node`` field."""
    return [call_fields(c) for c in store.nodes(session_id, inherited=True)]


def _marker(call: Node) -> str:
    """What an attach pointer or a merge instruction does, as the start of its line."""
    ref = call.metadata.get("attach")
    if isinstance(ref, dict):
        locked = ", locked" if call.metadata.get("locked") else ""
        return (
            f"[attach {ref.get('session')} at {ref.get('head')} "
            f"(commit {ref.get('commit')}{locked})] "
        )
    record = call.metadata.get("merge")
    if isinstance(record, dict) and isinstance(record.get("peers"), list):
        peers = ", ".join(
            f"{p.get('session')} at {p.get('head')}"
            + (" (base)" if p.get("commit") == record.get("base") else "")
            for p in record["peers"]
            if isinstance(p, dict)
        )
        return f"[merge of {peers}] "
    return ""


def _preview(call: Node) -> str:
    marker = _marker(call)
    if marker and "attach" in call.metadata:
        return marker.strip()  # its own text only repeats what it attaches
    return marker + _text_preview(call)


def _text_preview(call: Node) -> str:
    if call.role == "system" or (call.role == "tool" and not call.output):
        text = (
            call.input if isinstance(call.input, str) else msgspec.json.encode(call.input).decode()
        )
    else:
        text = content_text(call.output)
    text = " ".join(str(text).split())
    return text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"


def boundary_marker(call: Node) -> str | None:
    """The marker text of a compaction boundary node (``None`` for any other node)."""
    try:
        record = boundary_of(call)
    except ValidationError as exc:
        return f"── compaction (invalid record: {exc.message}) ──"
    if record is None:
        return None

    def tokens(n: int | None) -> str:
        return "?" if n is None else f"{n:,}"

    pivot = f" {record.direction} {record.pivot}" if record.pivot else ""
    folded = f", {record.folded_items} items folded" if record.folded_items else ""
    return (
        f"── compaction ({record.trigger}{pivot}): {tokens(record.tokens_before)} → "
        f"{tokens(record.tokens_after)} tokens{folded} ──"
    )


def tree_lines(graph: object) -> list[str]:
    """The readable tree of a ``dag.Graph`` (see the module docstring)."""

    assert isinstance(graph, Graph)
    head = graph.session.head
    on_path = {n.id for n in graph.chain(head)}
    lines: list[str] = []

    def emit(node: Node, indent: int, is_call: bool) -> None:
        mark = "*" if node.id in on_path else " "
        arrow = "↳ " if is_call else ""
        label = node.role + (f" {node.name}" if node.name else "")
        tail = "  <- HEAD" if node.id == head else ""
        marker = boundary_marker(node)
        text = marker if marker is not None else f"{label}: {_preview(node)}"
        lines.append(f"{mark} {'  ' * indent}{arrow}{node.id} [{node.seq}] {text}{tail}")

    def followers(parent: str | None, indent: int) -> list[tuple[Node | str, int, bool]]:
        # A single conversation child continues at the same indent; several are branches.
        kids = graph.next_by_pred.get(parent, [])
        if len(kids) == 1:
            return [(kids[0], indent, False)]
        out: list[tuple[Node | str, int, bool]] = []
        for i, kid in enumerate(kids, 1):
            out += [
                (f"  {'  ' * indent}branch {i}/{len(kids)}", indent, False),
                (kid, indent + 1, False),
            ]
        return out

    # An explicit stack, not recursion: a session retried at every turn nests one
    # branch per turn, deeper than Python's recursion limit.
    stack = list(reversed(followers(None, 0)))
    while stack:
        item, indent, is_call = stack.pop()
        if isinstance(item, str):
            lines.append(item)
            continue
        emit(item, indent, is_call)
        after: list[tuple[Node | str, int, bool]] = [
            (call, indent + 1, True) for call in graph.by_caller.get(item.id, [])
        ]
        stack.extend(reversed(after + followers(item.id, indent)))
    return lines


def run(args: argparse.Namespace) -> int:
    """Run ``ctxrules log``; returns the exit code."""

    with store_of(args) as store:
        if args.json:
            print_json(log_json(store, args.session))
            return 0
        graph = load_graph(store, args.session)
        merged = merged_into(store, args.session)
    info = graph.session
    echo(f"session {info.id}  {info.source or ''}  HEAD {info.head or '-'}")
    for entry in merged:
        echo(
            f"merged: {entry.get('head')} into session {entry.get('into')} at "
            f"{entry.get('node')} (merge commit {entry.get('merge_commit')})"
        )
    for line in tree_lines(graph):
        echo(line)
    return 0
