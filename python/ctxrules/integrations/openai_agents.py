"""The OpenAI Agents SDK: a ``Session`` whose history is the graph, and an input filter
that sends the rules' view of the input (``pip install ctxrules[openai-agents]``).

``CtxrulesSession(store)`` implements the SDK's ``Session`` protocol (all four calls
are async): each input item the runner adds (``add_items``: the user's input, the
model's messages and function calls, the tools' outputs) becomes a node of a ctxrules
session — a function call's output a tool node under the call — with the item kept as
it was given, so ``get_items`` returns exactly what was added.  ``pop_item`` never
deletes: it moves HEAD back (a rewind is a branch, the popped item stays in the graph);
``clear_session`` starts a new root.  ``ctxrules log`` / ``stats`` / ``view`` show the
session like any other: it remembers its setup (the provider; the model, instructions
and function tools of the agent once ``shaped_input(session=…)`` has seen a request).
The store's work runs in a worker thread (the event loop never waits on it), and calls
on one session take turns, so many sessions of one store can be served from one event
loop.

``shaped_input(rules=…)`` is a ``RunConfig.call_model_input_filter``: before every model
call it sends the rules' view of the input (``ctxrules.engine.shape_items``): items the
rules left full go as the runner made them, a tool output the rules aged or cleared
goes with its shortened text, what a summary folded goes as one user message with the
summary.  The runner's history (the session) is never changed, only the request.

Caveat (the SDK's): with server-side conversation state (``conversation_id`` /
``previous_response_id``) and a pending ``RunState``, a filter that rebuilds items can
be refused by the SDK; use the filter with client-side history (a ``Session``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

try:
    from agents import FunctionTool
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # the extra is not installed: say how to get it
    raise ImportError(
        "ctxrules.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'ctxrules[openai-agents]'"
    ) from exc

from .. import dag
from ..config import PipelineConfig
from ..engine import ShapedItem, shape_items
from ..engine.setup import remember
from ..errors import NotFoundError
from ..importers import read_messages
from ..model import Node
from ..store import CommitStore

__all__ = ["ITEMS_KEY", "PROVIDER", "CtxrulesSession", "shaped_input"]

#: The wire of the SDK's items (Responses input items), the session's provider.
PROVIDER = "openai-responses"

#: The node metadata key holding the input items a node was made from, as given.
ITEMS_KEY = "openai_agents_items"
#: The text of the root a cleared session starts again from.
CLEARED = "(The conversation was cleared here: what came before is not part of it.)"

#: One lock per ctxrules session of a store: its calls take turns (appends to one
#: branch must not interleave), whichever ``CtxrulesSession`` object makes them.
_locks: dict[tuple[int, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def _session_lock(store: CommitStore, session_id: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault((id(store), session_id), threading.Lock())


def _plain(item: Any) -> dict[str, Any]:
    """An input item as a plain dict (the SDK hands dicts; a model object is dumped)."""
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        out = dump(exclude_unset=True, mode="json")
        if isinstance(out, dict):
            return out
    raise TypeError(f"an input item must be a dict, got {type(item).__name__}")


class CtxrulesSession:
    """An Agents SDK ``Session`` keeping its history as a ctxrules session of ``store``
    (see the module docstring).  ``session_id`` names an existing ctxrules session or
    the one to create (default: a new one); ``model`` is remembered as the session's
    model (``shaped_input(session=…)`` learns it from the agent); ``clock`` stamps the
    nodes."""

    def __init__(
        self,
        store: CommitStore,
        session_id: str | None = None,
        *,
        session_settings: Any = None,
        model: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.session_settings = session_settings
        self._clock = clock
        if session_id is None:
            session_id = dag.create_session(store, source="openai-agents").id
        else:
            try:
                store.get_session(session_id)
            except NotFoundError:
                store.create_session(session_id=session_id, metadata=None, source="openai-agents")
        self.session_id = session_id
        remember(store, session_id, {"provider": PROVIDER, **({"model": model} if model else {})})

    # -- the protocol --------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The items of the session's current branch, oldest first (the latest
        ``limit``)."""
        items = await self._run(self._items)
        return items[-limit:] if limit else items

    async def add_items(self, items: list[Any]) -> None:
        """Append the items: each a node after HEAD, a function call's output a tool
        node under the node holding the call."""
        plain = [_plain(item) for item in items]
        await self._run(self._add_all, plain)

    async def pop_item(self) -> Any | None:
        """Take the newest item off the branch (HEAD moves back; nothing is deleted)."""
        return await self._run(self._pop)

    async def clear_session(self) -> None:
        """Start the session again from an empty branch (the old one stays)."""
        await self._run(self._root)

    # -- the work, in a worker thread, one call of a session at a time -------------------

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        lock = _session_lock(self.store, self.session_id)

        def locked() -> Any:
            with lock:
                return fn(*args)

        return await asyncio.to_thread(locked)

    def _items(self) -> list[Any]:
        return [i for node in self._branch() for i in node.metadata.get(ITEMS_KEY) or ()]

    def _add_all(self, items: list[dict[str, Any]]) -> None:
        for item in items:
            self._add(item)

    def _pop(self) -> Any | None:
        branch = self._branch()
        if not branch:
            return None
        last = branch[-1]
        items = last.metadata.get(ITEMS_KEY) or []
        if last.caller is not None:
            # A tool output: the same call again, without it (a sibling branch).
            kept = [n for n in branch if n.caller == last.caller and n.id != last.id]
            again = dag.retry(self.store, self.session_id, last.caller)
            for node in kept:
                self._append(node, caller=again.id)
        elif last.predecessor is not None:
            dag.checkout(self.store, self.session_id, last.predecessor)
        else:
            self._root()
        return items[-1] if items else None

    # -- nodes ---------------------------------------------------------------------------

    def _branch(self) -> list[Node]:
        if self.store.get_session(self.session_id).head is None:
            return []
        return [n for n in dag.branch_path(self.store, self.session_id) if ITEMS_KEY in n.metadata]

    def _root(self) -> None:
        dag.append(
            self.store,
            self.session_id,
            "user",
            CLEARED,
            predecessor=None,
            metadata={"openai_agents_cleared": True},
            created_at=self._clock(),
        )

    def _add(self, item: dict[str, Any]) -> None:
        if item.get("type") == "function_call_output":
            call_id = item.get("call_id")
            holder = next(
                (
                    n
                    for n in reversed(self._branch())
                    if n.caller is None
                    and any(i.get("call_id") == call_id for i in n.metadata.get(ITEMS_KEY) or ())
                ),
                None,
            )
            if holder is not None:
                call = next(i for i in holder.metadata[ITEMS_KEY] if i.get("call_id") == call_id)
                read = read_messages(PROVIDER, [call, item])
                tool = next(n for n in read.nodes if n.role == "tool")
                self._append(tool, caller=holder.id, items=[item])
                return
        read = read_messages(PROVIDER, [item])
        for node in read.nodes:
            self._append(node, items=[item])

    def _append(self, node: Node, *, caller: str | None = None, items: Sequence[Any] = ()) -> Node:
        metadata = dict(node.metadata)
        metadata.pop("index", None)
        if items:
            metadata[ITEMS_KEY] = list(items)
        return dag.append(
            self.store,
            self.session_id,
            node.role,
            node.output,
            name=node.name,
            input=node.input,
            caller=caller,
            metadata=metadata,
            created_at=self._clock(),
        )


def _view(items: list[dict[str, Any]], shaped: list[ShapedItem]) -> list[Any]:
    """The items to send: the given ones where the rules left them full, the rules'
    text where they aged or cleared an output, a summary as a user message."""
    out: list[Any] = []
    sent: set[int] = set()
    for s in shaped:
        it = s.item
        if s.first is None or s.last is None:
            if it.state == "summary" or it.role != "tool":
                out.append({"role": "user", "content": it.rendered})
            else:  # a call answered as not run
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": it.tool_use_id or "",
                        "output": it.rendered,
                    }
                )
            continue
        if s.first in sent:
            continue
        sent.add(s.first)
        if it.state == "full":
            out.extend(items[s.first : s.last + 1])
            continue
        original = items[s.first]
        if original.get("type") == "function_call_output":
            out.append({**original, "output": it.rendered})
        elif original.get("role") in ("user", "system", "developer") and s.first == s.last:
            out.append({**original, "content": it.rendered})
        else:  # a model turn: sent as it was (its calls must stay paired)
            out.extend(items[s.first : s.last + 1])
    return out


def _setup(data: CallModelData[Any]) -> dict[str, Any]:
    """What a model call says of the session's setup: the agent's model (when named),
    instructions and function tools (as the Responses API declares them)."""
    agent = data.agent
    model = agent.model if isinstance(agent.model, str) else getattr(agent.model, "model", None)
    instructions = data.model_data.instructions
    setup: dict[str, Any] = {
        "system": [instructions] if instructions else [],
        "tools": [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.params_json_schema,
            }
            for t in agent.tools
            if isinstance(t, FunctionTool)
        ],
    }
    if isinstance(model, str) and model:
        setup["model"] = model
    return setup


def shaped_input(
    rules: str | PipelineConfig | None = None,
    *,
    unanswered: str = "not_run",
    session: CtxrulesSession | None = None,
) -> Callable[[CallModelData[Any]], Awaitable[ModelInputData]]:
    """A ``RunConfig.call_model_input_filter`` sending the rules' view of the input
    (see the module docstring); ``rules``: a preset name or a ``PipelineConfig``
    (default: the default preset).  A call still waiting for its output is answered as
    not run in the request (``unanswered``; the runner's history keeps it as it is).
    With ``session`` (the run's ``CtxrulesSession``) each call's model, instructions and
    function tools are remembered as the session's setup, so ``ctxrules stats`` and
    ``render --for`` read them back."""

    async def call_model_input_filter(data: CallModelData[Any]) -> ModelInputData:
        if session is not None:
            await session._run(remember, session.store, session.session_id, _setup(data))
        items = [_plain(i) for i in data.model_data.input]
        if not items:
            return data.model_data
        shaped = shape_items(
            items,
            provider=PROVIDER,
            rules=rules,
            unanswered=unanswered,
        )
        return ModelInputData(input=_view(items, shaped), instructions=data.model_data.instructions)

    return call_model_input_filter
