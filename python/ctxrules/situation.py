"""The L1 "situation" layer, rendered from the call tree.

A request is composed by stability: L0 is constant for the session, L1 says where this
call sits — which function it is part of, who called it, where its output goes — and
L2 is the task.  ``situation`` builds the L1 text for a head node from the DAG alone
(``commit_situation`` for a commit's head); the caller passes it to ``render`` as the
finished ``situation`` layer, so rendering itself never reads the store:

* a head in the main conversation gets one constant sentence (the caller is the user,
  replies go to the user);
* a head inside a sub-conversation (a sub-agent whose first message hangs off a tool
  call, e.g. a Claude Code ``Task`` sidechain) names the tool call that started it, the
  assistant turn that made that call, and — for nested sub-agents — the same for every
  enclosing frame, out to the main conversation; its answer goes back to that call.

It is text ctxrules writes, not text an agent sent: replaying a recorded session adds it
only when asked (``ctxrules.requests.request_for(..., situation=True)``, ``ctxrules render
--situation``); framing the sub-agents a turn engine runs is what it is for.

The text depends only on the *frame* (the enclosing calls), never on the head's own
position inside it, so every request of one frame carries the same bytes and the
prompt cache keeps hitting.  For the same reason the main-conversation text names
neither the session (a fork shares its cached history with the original) nor the
``< N/M >`` branch position (a checkout would move the layer that precedes every
message, throwing away the cached history before the branch point).

Tool arguments are untrusted: they are cut to a short single line with control
characters removed and shown as a quoted JSON string.  They end up as plain text inside
a system block, which the renderer writes as a JSON string, so they cannot open a
block, carry ``cache_control`` or change a role.

Limit: ``make_commit`` resolves a head with a ``caller`` (a tool node, or a
sub-agent's first message) to the conversation node above it, so the first request of
a sub-agent cannot be committed as its own frame; ``situation`` on the DAG does give
that message its sub-agent text.  Later heads of the sub-agent commit as its frame.
"""

from __future__ import annotations

import json
import re

from .dag import Graph, load_graph
from .errors import DagError, NotFoundError
from .model import ContextCommit, Node
from .store import Store

__all__ = ["MAIN_SITUATION", "commit_situation", "situation"]

#: The L1 text of every main-conversation head.
MAIN_SITUATION = (
    "Situation: you are the main agent of this conversation; the user is your caller "
    "and your replies go to the user."
)
#: Most characters of a tool's arguments shown (after flattening to one line).
MAX_ARGS_CHARS = 120
#: Most enclosing frames named; deeper nesting is summarised by a count.
MAX_FRAMES = 4
# Argument keys that describe a sub-agent call better than its whole input (the
# prompt itself is the sub-agent's first message, so repeating it here would be waste).
_DESCRIBING_KEYS = ("description", "subagent_type", "name", "title")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _flat(text: str, limit: int) -> str:
    """One line, no control characters, at most ``limit`` characters, JSON-quoted."""
    text = " ".join(_CONTROL.sub(" ", text).split())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return json.dumps(text, ensure_ascii=False)


def _args(call: Node) -> str:
    args = call.input
    if isinstance(args, dict):
        picked = {k: args[k] for k in _DESCRIBING_KEYS if isinstance(args.get(k), str)}
        if picked:
            args = picked
    if args is None or args == {}:
        return ""
    if isinstance(args, dict):
        text = ", ".join(
            f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
            for k, v in sorted(args.items())
        )
    else:
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return " with arguments " + _flat(text, MAX_ARGS_CHARS)


def _turn(graph: Graph, node: Node) -> int:
    """1-based ordinal of an assistant node among the assistant turns of its frame."""
    return sum(1 for n in graph.chain(node.id) if n.role == "assistant")


def _frames(graph: Graph, head: Node) -> list[tuple[Node | None, Node]]:
    """Enclosing calls from the innermost out: (tool call or None, the node that made it)."""
    out: list[tuple[Node | None, Node]] = []
    node = head
    seen: set[str] = set()
    while True:
        if node.caller is None:
            root = graph.chain(node.id)[0]
        else:
            root = node  # a caller-child is the first node of its own frame
        if root.caller is None or root.id in seen:
            return out
        seen.add(root.id)
        parent = graph.by_id.get(root.caller)
        if parent is None:
            return out
        if parent.role == "tool" and parent.caller is not None:
            maker = graph.by_id.get(parent.caller)
            if maker is None:
                return out
            out.append((parent, maker))
        else:
            out.append((None, parent))
        node = out[-1][1]


def _describe(graph: Graph, tool: Node | None, maker: Node, depth: int) -> str:
    where = "the main conversation" if depth == 0 else f"the sub-agent at depth {depth}"
    by = f"assistant turn {_turn(graph, maker)} of {where}"
    if tool is None:
        return f"called directly by {by}"
    call_id = tool.metadata.get("tool_use_id")
    ident = f" (call id {_flat(str(call_id), 80)})" if call_id else ""
    return f"started by tool call {_flat(tool.name or 'tool', 60)}{ident}{_args(tool)} from {by}"


def _tool_head(graph: Graph, node: Node) -> Node:
    # A tool node is part of the frame of the assistant that called it.
    while node.role == "tool" and node.caller is not None and node.caller in graph.by_id:
        node = graph.by_id[node.caller]
    return node


def situation(store: Store | Graph, session_id: str = "", head: str | None = None) -> str:
    """The L1 situation text of ``head`` (default HEAD) from the call tree.

    ``MAIN_SITUATION`` for the main conversation; for a sub-agent, which tool call
    started it, from which assistant turn, through every enclosing frame, and that its
    final answer is returned to that call.  Identical for every head of one frame.
    ``DagError`` if the node is not in the session.  A ``Graph`` from ``load_graph``
    may be passed instead of a store.
    """
    graph = store if isinstance(store, Graph) else load_graph(store, session_id)
    head_id = head if head is not None else graph.session.head
    node = graph.by_id.get(head_id) if head_id else None
    if node is None:
        raise DagError(
            f"node {head_id!r} is not part of session {graph.session.id!r}",
            hint="`ctxrules log SESSION` lists its nodes",
        )
    frames = _frames(graph, _tool_head(graph, node))
    if not frames:
        return MAIN_SITUATION
    depth = len(frames)
    lines = [
        f"Situation: you are a sub-agent (nesting depth {depth}), not the main agent; "
        "you do not talk to the user."
    ]
    # Outermost frames are numbered from the main conversation (depth 0) inwards.
    named = list(enumerate(reversed(frames)))[-MAX_FRAMES:]
    inner_depth, (tool, maker) = named[-1]
    lines.append(f"You were {_describe(graph, tool, maker, inner_depth)}.")
    for d, (t, m) in reversed(named[:-1]):
        lines.append(f"That caller (depth {d + 1}) was {_describe(graph, t, m, d)}.")
    if depth > MAX_FRAMES:
        lines.append(f"({depth - MAX_FRAMES} outer frames not shown.)")
    lines.append(
        "Your final answer is returned to that tool call as its result; only that answer "
        "reaches your caller, so make it complete on its own."
        if tool is not None
        else "Your final answer is returned to that assistant turn; only that answer "
        "reaches your caller, so make it complete on its own."
    )
    return "\n".join(lines)


def commit_situation(store: Store, commit: ContextCommit) -> str:
    """The situation of a commit's head in its session (see ``situation``).

    ``""`` when the commit's session or head is not in ``store`` (a commit built in
    memory has no call tree to describe).
    """
    try:
        graph = load_graph(store, commit.session_id)
    except NotFoundError:
        return ""
    if commit.head_node_id not in graph.by_id:
        return ""
    return situation(graph, head=commit.head_node_id)
