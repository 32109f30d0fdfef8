"""``shape(messages, provider=…, rules=…)``: a message list in, the same list shaped by the
rules out — for callers who keep their own history (an agent framework, a script).

Stateless for the caller: no store, no session, nothing written.  The messages (in the
wire's own shape: Anthropic ``messages``, OpenAI Chat ``messages``, Responses ``input``
items, Gemini ``contents``) are read by the importers' message readers into history
nodes, the rules derive the commit (``derive_with_summaries``: a summary is made by the
registered summarizer), and the commit is rendered back into the same wire; the
returned list is the request's ``messages`` (``input``, ``contents``).  Anthropic's
``system`` and Responses' ``instructions`` stay the caller's (pass them as ``system``
when the rules should see them); OpenAI Chat's system messages are part of the list.

The rules see the conversation request by request, as they would in an agent's loop
where each model call is shaped: the list is split right before each model answer, and
the commit is derived one request at a time (rules such as tool aging act in steps as
the turns go by).  So the same messages always shape the same, and that loop is fast:
the commit after each request seen lately is kept in memory (a small LRU keyed by a
chained digest of the messages, so equal lists — not equal objects — hit), and a call
reads and derives only what came after the longest such request it has seen.

Tool calls are never dropped: a call in the list without its result is refused
(``UnansweredToolCallsError``), or with ``unanswered="not_run"`` answered with
``not_run_result``, as ``Engine.prepare`` does.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..commit import Pipeline, derive_with_summaries
from ..config import PipelineConfig, dump_config
from ..errors import ConfigError, ImportFormatError, UnansweredToolCallsError
from ..importers import LIST_KEYS, ImportedSession, read_messages
from ..model import ContextCommit, ContextItem, Node, ToolUseBlock
from ..providers import Provider, RequestOptions, get_provider
from .config import NOT_RUN_RESULT

__all__ = ["CACHE_SIZE", "ShapedItem", "shape", "shape_commit", "shape_items"]

#: How many message lists' commits are kept (each shares its items with the others').
CACHE_SIZE = 64
_LIST_KEY = LIST_KEYS


_cache: OrderedDict[tuple[Any, ...], ContextCommit] = OrderedDict()
_lock = threading.Lock()
_pipelines: OrderedDict[str, Pipeline] = OrderedDict()
_INDEX = re.compile(r"^\w+\[(\d+)\]")


def _pipeline(rules: str | PipelineConfig | Pipeline | None) -> Pipeline:
    if isinstance(rules, Pipeline):
        return rules
    if rules is not None and not isinstance(rules, (str, PipelineConfig)):
        raise ConfigError(
            f"rules must be a preset name, a PipelineConfig or a Pipeline, got "
            f"{type(rules).__name__}",
            where="shape(rules=…)",
        )
    # A configuration holds dicts (it is not hashable, and may change between calls):
    # it is known by its text.
    name = rules if rules is not None else "default"
    key = name if isinstance(name, str) else "\n" + dump_config(name)
    with _lock:
        found = _pipelines.get(key)
    if found is None:
        config = PipelineConfig.preset(name) if isinstance(name, str) else name
        found = Pipeline.from_config(config)
        with _lock:
            _pipelines[key] = found
            while len(_pipelines) > CACHE_SIZE:
                _pipelines.popitem(last=False)
    return found


def _read(wire: str, messages: list[Any], system: Any) -> ImportedSession:
    return read_messages(wire, messages, system)


def _window(wire: str, messages: Sequence[Any], start: int) -> int:
    """Where to start reading for the messages from ``start`` on: at the last assistant
    message before them (whose tool calls their results answer)."""
    for i in range(start - 1, -1, -1):
        m = messages[i]
        if not isinstance(m, Mapping):
            return 0
        if m.get("role") in ("assistant", "model") or (
            wire == "openai-responses" and m.get("type") in ("function_call", "reasoning")
        ):
            if wire != "openai-responses":
                return i
            # A Responses assistant turn is a run of items: read from its first.
            while i > 0 and _in_run(messages[i - 1]):
                i -= 1
            return i
    return 0


def _in_run(item: Any) -> bool:
    return isinstance(item, Mapping) and (
        item.get("role") == "assistant"
        or item.get("type") in ("function_call", "reasoning", "custom_tool_call", "compaction")
    )


def _parse(
    wire: str,
    messages: Sequence[Any],
    system: Any,
    start: int,
    digests: list[Any],
    prefix_head: str | None,
) -> tuple[list[Node], list[int], str | None]:
    """The nodes of ``messages[start:]`` in branch order, the message each comes from
    (-1: the system prompt given apart), and the head.  With ``digests`` every node's
    id is its message's chained digest and its place among that message's nodes, so the
    same message in the same history is the same node in every call (a commit made of
    a shorter list continues); the reading starts at ``_window`` and what it reads
    again before ``start`` is left out."""
    window = _window(wire, messages, start) if start else 0
    try:
        imported = _read(wire, list(messages[window:]), system if window == 0 else None)
    except ImportFormatError:
        if window == 0:
            raise
        # Read whole, so the error names the caller's index (or the window was too short).
        whole, at, head = _parse(wire, messages, system, 0, digests, None)
        kept = [k for k, i in enumerate(at) if i >= start]
        return [whole[k] for k in kept], [at[k] for k in kept], head
    nodes: list[Node] = []
    index: list[int] = []
    ids: dict[str, str] = {}
    seen: dict[int, int] = {}
    for node in imported.nodes:
        m = _INDEX.match(str(imported.origins.get(node.id, "")))
        i = window + int(m.group(1)) if m else -1
        if not digests:
            nodes.append(node)
            index.append(i)
            continue
        n = seen[i] = seen.get(i, -1) + 1
        ids[node.id] = f"n_{digests[i + 1] & 0xFFFFFFFFFFFFFFFF:016x}_{n}"
        if i < start and not (i < 0 and start == 0):
            continue  # read again only for its tool calls: the commit holds it already
        pred = node.predecessor
        nodes.append(
            msgspec.structs.replace(
                node,
                id=ids[node.id],
                predecessor=ids[pred]
                if pred is not None
                else (prefix_head if node.caller is None and start > 0 else None),
                caller=ids[node.caller] if node.caller is not None else None,
            )
        )
        index.append(i)
    head = imported.head
    return nodes, index, ids.get(head, head) if head is not None else None


def _answer_starts(wire: str, messages: Sequence[Any]) -> list[bool]:
    """Whether each message starts a model answer: the requests of the conversation end
    right before those (see ``shape_commit``)."""
    out = []
    prev = False
    for m in messages:
        if wire == "openai-responses":
            run = _in_run(m)
            out.append(run and not prev)
            prev = run
        else:
            out.append(isinstance(m, Mapping) and m.get("role") in ("assistant", "model"))
    return out


def _settle(nodes: list[Node], unanswered: str, not_run_result: str) -> list[Node]:
    """``nodes`` with every tool call answered (see the module docstring)."""
    answered = {str(n.metadata.get("tool_use_id")) for n in nodes if n.role == "tool"}
    left = [
        (n, b)
        for n in nodes
        if n.role == "assistant" and isinstance(n.output, list)
        for b in n.output
        if isinstance(b, ToolUseBlock) and b.id not in answered
    ]
    if not left:
        return nodes
    if unanswered != "not_run":
        names = ", ".join(f"{b.id} ({b.name})" for _, b in left)
        raise UnansweredToolCallsError(
            f"{len(left)} tool call(s) in the messages have no result: {names}",
            calls=[b.id for _, b in left],
            where="shape(messages)",
            hint='add their results, or pass unanswered="not_run" to answer them as not run',
        )
    out = list(nodes)
    for n, b in left:
        out.append(
            Node(
                id=f"{n.id}-not-run-{b.id}",
                seq=len(out) + 1,
                created_at=n.created_at,
                role="tool",
                name=b.name,
                input=b.input,
                output=not_run_result,
                caller=n.id,
                metadata={"tool_use_id": b.id, "is_error": True, "not_run": True},
            )
        )
    return out


def _digests(wire: str, version: str, messages: Sequence[Any], system: Any) -> list[Any]:
    """Chained digests: ``[0]`` of the wire, rules and system prompt, ``[i + 1]`` of
    every message up to ``messages[i]`` (``[]`` when a message cannot be encoded: then
    nothing is cached and the nodes keep the readers' ids)."""
    try:
        h = hash((wire, version, msgspec.json.encode(system)))
        out = [h]
        for m in messages:
            h = hash((h, msgspec.json.encode(m)))
            out.append(h)
        return out
    except (TypeError, msgspec.EncodeError):
        return []


def shape_commit(
    messages: Sequence[Any],
    *,
    provider: str | Provider,
    rules: str | PipelineConfig | Pipeline | None = None,
    system: Any = None,
    unanswered: str = "refuse",
    not_run_result: str = NOT_RUN_RESULT,
) -> ContextCommit:
    """The commit the rules make of ``messages`` (``shape`` renders it); its items name
    the messages' nodes, so an adapter can map each item back to its message."""
    prov = get_provider(provider) if isinstance(provider, str) else provider
    wire = prov.wire
    if wire not in _LIST_KEY:
        raise ConfigError(
            f"provider {prov.name!r} has no built-in wire to read messages in",
            where="shape(provider=…)",
        )
    if unanswered not in ("refuse", "not_run"):
        raise ConfigError(
            f'unanswered must be "refuse" or "not_run", got {unanswered!r}',
            where="shape(unanswered=…)",
        )
    pipeline = _pipeline(rules)
    n = len(messages)
    digests = _digests(wire, pipeline.version, messages, system)
    starts = _answer_starts(wire, messages)
    extra = (unanswered, not_run_result)
    parent: ContextCommit | None = None
    start = 0
    if digests:
        with _lock:
            for k in range(n, 0, -1):
                if k < n and not starts[k]:
                    continue  # not a request of this conversation: see below
                parent = _cache.get((digests[k], *extra))
                if parent is not None:
                    _cache.move_to_end((digests[k], *extra))
                    start = k
                    break
    if parent is not None and start == n:
        return parent
    parsed, index, head = _parse(
        wire, messages, system, start, digests, parent.head_node_id if parent else None
    )
    if head is None or (not parsed and parent is None):
        raise ConfigError("there are no messages to shape", where="shape(messages)")
    nodes = _settle(parsed, unanswered, not_run_result)
    of = {node.id: i for node, i in zip(parsed, index)}
    # The rules see the conversation request by request, as an agent's calls would:
    # one derive per request the list holds (it ends right before each answer), so the
    # commit of a list is the same however many of its requests were shaped before.
    steps: dict[int, list[Node]] = {}
    bounds = [k for k in range(start + 1, n) if starts[k]] + [n]
    for node in nodes:
        i = of[node.caller] if node.id not in of and node.caller else of[node.id]
        end = next(b for b in bounds if i < b)
        steps.setdefault(end, []).append(node)
    cacheable = bool(digests) and nodes is parsed
    commit = parent
    for end in bounds:
        chunk = steps.get(end)
        if not chunk:
            continue
        heads = [x for x in chunk if x.caller is None]
        commit = derive_with_summaries(
            commit,
            chunk,
            session_id="shape",
            head_node_id=heads[-1].id if heads else (commit.head_node_id if commit else head),
            pipeline=pipeline,
            now=0.0,
        ).commit
        if cacheable:
            with _lock:
                _cache[(digests[end], *extra)] = commit
                while len(_cache) > CACHE_SIZE:
                    _cache.popitem(last=False)
    assert commit is not None
    return commit


class ShapedItem(msgspec.Struct, frozen=True):
    """One entry of a shaped list, for adapters that keep the caller's own message
    objects: ``first`` … ``last`` are the indexes of the messages it came from (one
    message, or a run of Responses items that is one model turn; ``None``: made by the
    rules — a summary — or a "not run" result), ``item`` how the rules left it (``state``
    ``full``: as it was; ``aged`` / ``cleared``: its text is now ``rendered``;
    ``summary``: ``rendered`` stands for what was folded)."""

    first: int | None
    last: int | None
    item: ContextItem


def shape_items(
    messages: Sequence[Any],
    *,
    provider: str | Provider,
    rules: str | PipelineConfig | Pipeline | None = None,
    system: Any = None,
    unanswered: str = "refuse",
    not_run_result: str = NOT_RUN_RESULT,
) -> list[ShapedItem]:
    """The items the shaped list shows, in order, each with the messages it came from
    (see ``ShapedItem``); what the rules folded into a summary is left out."""
    prov = get_provider(provider) if isinstance(provider, str) else provider
    commit = shape_commit(
        messages,
        provider=prov,
        rules=rules,
        system=system,
        unanswered=unanswered,
        not_run_result=not_run_result,
    )
    digests = _digests(prov.wire or "", _pipeline(rules).version, messages, system)
    where = {f"n_{d & 0xFFFFFFFFFFFFFFFF:016x}": i - 1 for i, d in enumerate(digests)}

    def first(item: ContextItem) -> int | None:
        if "-not-run-" in item.source_node_id:
            return None
        i = where.get(item.source_node_id.rsplit("_", 1)[0])
        return i if i is not None and i >= 0 else None

    starts = sorted({i for it in commit.items if (i := first(it)) is not None})
    ends = {a: b - 1 for a, b in zip(starts, [*starts[1:], len(messages)])}
    out = []
    for it in commit.items:
        if it.state == "summarized":
            continue
        i = first(it)
        out.append(ShapedItem(i, ends[i] if i is not None else None, it))
    return out


def shape(
    messages: Sequence[Any],
    *,
    provider: str | Provider,
    rules: str | PipelineConfig | Pipeline | None = None,
    system: Any = None,
    unanswered: str = "refuse",
    not_run_result: str = NOT_RUN_RESULT,
    cache: bool = False,
) -> list[Any]:
    """``messages`` shaped by ``rules``: the same wire's message list, with what the rules
    aged, cleared or summarised as they left it (see the module docstring).

    ``provider`` names the wire of the messages (``anthropic``, ``openai-chat``,
    ``openai-responses``, ``gemini``) — in and out.  ``rules``: a preset name
    (``"default"``, ``"aggressive"``, …), a ``PipelineConfig`` or a ``Pipeline``
    (default: the default preset; the working directory's ``ctxrules.toml`` is not
    read: nothing here depends on where the call is made).  ``system`` is Anthropic's
    ``system`` / Responses' ``instructions`` / Gemini's ``systemInstruction`` when
    the rules should see it (it is not returned).  Messages carry no times, so the
    rules see them all at one instant (nothing is idle; time-based rules need a stored
    session: ``Engine``).  ``cache``
    keeps the provider's cache breakpoints in the list (Anthropic ``cache_control``;
    off by default: the caller's request may hold its own).
    """
    prov = get_provider(provider) if isinstance(provider, str) else provider
    commit = shape_commit(
        messages,
        provider=prov,
        rules=rules,
        system=system,
        unanswered=unanswered,
        not_run_result=not_run_result,
    )
    rendered = prov.render(commit, RequestOptions(model=prov.default_model, cache=cache))
    body: Mapping[str, Any] = msgspec.json.decode(rendered.body)
    out: list[Any] = list(body.get(_LIST_KEY[prov.wire or ""]) or [])
    return out
