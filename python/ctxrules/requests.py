"""The requests of a stored session: the one that produced an answer, and the next one.

A session's graph holds what was said; a *request* is what the model was (or will be)
sent.  Two are well defined at a node:

* ``request_for(store, session, node)`` — the request whose response is the assistant
  node ``node``: the commit at the node before it on its branch (its predecessor, with
  that node's tool results), rendered in that node's frame.  This is what replaying a
  recorded session and comparing with its recorded usage needs.
* ``next_request(store, session, head, now=...)`` — the request the agent sends next
  at ``head``.  At an assistant answer with nothing after it there is no next request
  yet (no new input): that is refused with a ``RenderError`` naming ``request_for``,
  never rendered as a prefill of the recorded answer.

``previous_request`` finds the request before one in the same frame (the request for
the previous assistant answer), so cache predictions work on imported sessions, whose
commits were never made request by request.  ``render_defaults`` gives the render
options of a request — what the session recorded (``ctxrules.render.session_defaults``),
the model of the answer, the tools the session called — and ``explain_request`` runs
``ctxrules.render.explain`` with everything the store knows: those defaults, the
previous request and the seconds between the two.

A replayed request carries what the agent sent and nothing more: the situation layer
(``ctxrules.situation``, an L1 text ctxrules writes) is added only when asked for
(``situation=True``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import msgspec

from .commit import Pipeline, derive_commit, is_boundary, make_commit
from .config import PipelineConfig, find_config
from .errors import DagError, RenderError, ValidationError
from .model import ContextCommit, Node
from .plugins import registry
from .providers import Provider, RenderedRequest, Usage, get_provider
from .providers.base import NativeForm
from .render import RenderDefaults, explain, render_context, render_sessions, session_defaults
from .render.native import native_form, replays_recording, with_native
from .situation import commit_situation
from .store import CommitStore, SessionInfo

__all__ = [
    "Request",
    "UsageRow",
    "compare_usage",
    "explain_request",
    "next_request",
    "previous_request",
    "recorded_usage",
    "render_defaults",
    "render_defaults_at",
    "render_requests",
    "request_for",
    "sent_time",
    "session_requests",
    "session_tool_names",
]


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """A request of a stored session, ready to render.

    ``commit`` is what it carries and ``situation`` its L1 text (``""``: none, the
    default: ``situation=True`` asks ``request_for`` / ``next_request`` for it);
    ``sent_at`` when it was sent (the newest node it carries, or the ``now`` it was
    asked for); ``answer`` the assistant node it produced (``None``: the next request).
    """

    session_id: str
    commit: ContextCommit
    situation: str
    sent_at: float
    answer: str | None = None


def _node(store: CommitStore, session_id: str, node_id: str) -> Node:
    if not store.is_visible(session_id, node_id):
        raise DagError(
            f"node {node_id!r} is not part of session {session_id!r}",
            hint="`ctxrules log SESSION` lists its nodes",
        )
    return store.get_node(node_id)


def request_for(
    store: CommitStore,
    session: str,
    node: str,
    *,
    now: float | None = None,
    config: PipelineConfig | Pipeline | None = None,
    situation: bool = False,
) -> Request:
    """The request whose response is the assistant node ``node``.

    Its commit is the commit at the node before ``node`` on its branch, generated
    (and stored) at ``now`` if it is missing; ``now`` defaults to the time the request
    was sent — the newest of that node and its tool results — so a replay runs the
    rules at the time of the recording.  The first request of a sub-agent (its
    predecessor is the sub-agent's first message, which hangs off a tool call) is
    derived from that message alone and not stored.  ``situation``: carry the
    situation layer of its frame (``commit_situation``).
    """
    answer = _node(store, session, node)
    if answer.role != "assistant" or answer.caller is not None:
        raise DagError(
            f"node {node} is a {answer.role} node, not an assistant answer",
            where=f"node {node}",
            hint="give an assistant node of the conversation (`ctxrules log SESSION`)",
        )
    if answer.predecessor is None:
        raise DagError(
            f"assistant node {node} has no node before it, so no request produced it",
            where=f"node {node}",
        )
    before = store.get_node(answer.predecessor)
    calls = store.children(before.id, session_id=session, edge="caller")
    sent_at = sent_time(before, calls, answer.created_at)
    when = sent_at if now is None else now
    if before.caller is not None:
        commit = _first_subagent_commit(session, before, when, config)
    else:
        commit = make_commit(session, before.id, now=when, store=store, config=config)
    return Request(
        session_id=session,
        commit=commit,
        situation=commit_situation(store, commit) if situation else "",
        sent_at=sent_at,
        answer=answer.id,
    )


def sent_time(before: Node, calls: Sequence[Node], answered_at: float) -> float:
    """When the request made at ``before`` was sent: the newest of that node and its tool
    results ``calls``, leaving out results recorded after the answer (at ``answered_at``)."""
    return max([before.created_at, *(c.created_at for c in calls if c.created_at <= answered_at)])


def _first_subagent_commit(
    session: str, first: Node, now: float, config: PipelineConfig | Pipeline | None
) -> ContextCommit:
    # make_commit shows a node with a caller through the conversation above
    # it, so the sub-agent's opening request is derived from its first message here.

    pipeline = (
        config
        if isinstance(config, Pipeline)
        else Pipeline.from_config(config if config is not None else find_config())
    )
    return derive_commit(
        None, [first], session_id=session, head_node_id=first.id, pipeline=pipeline, now=now
    ).commit


def next_request(
    store: CommitStore,
    session: str,
    head: str | None = None,
    *,
    now: float,
    config: PipelineConfig | Pipeline | None = None,
    situation: bool = False,
) -> Request:
    """The request the agent sends next at ``head`` (default HEAD), at time ``now``
    (with its frame's situation layer when ``situation``).

    ``RenderError`` when the conversation there ends with the model's answer: the next
    request needs new input (a user message, tool results) that does not exist yet,
    and sending the answer back would make it a prefill.
    """
    commit = make_commit(session, head, now=now, store=store, config=config)
    messages = render_context(commit).messages
    if not messages or messages[-1].role == "assistant":
        node = commit.head_node_id
        raise RenderError(
            f"node {node} is the model's answer and nothing follows it, so there is no "
            "next request yet (rendering it would send the answer back as a prefill)",
            where=f"session {session}, node {node}",
            hint=f"render the request that produced it: --for {node} "
            "(ctxrules.requests.request_for), or append the next user message first",
        )
    text = commit_situation(store, commit) if situation else ""
    return Request(session_id=session, commit=commit, situation=text, sent_at=now)


def previous_request(
    store: CommitStore,
    request: Request,
    *,
    config: PipelineConfig | Pipeline | None = None,
    situation: bool | None = None,
) -> Request | None:
    """The request before ``request`` in its frame: the request for the nearest
    assistant answer at or before its head (``None`` at the start of the frame); with
    a situation layer when ``situation`` (default: when ``request`` has one)."""
    with_situation = bool(request.situation) if situation is None else situation
    node: Node | None = store.get_node(request.commit.head_node_id)
    while node is not None:
        if node.role == "assistant" and node.caller is None and node.id != request.answer:
            return request_for(
                store, request.session_id, node.id, config=config, situation=with_situation
            )
        node = store.get_node(node.predecessor) if node.predecessor else None
    return None


def recorded_usage(provider: Provider, usage: Any) -> Usage | None:
    """The usage an answer node carries, in neutral terms; ``None`` when it has none.

    Importers keep what the transcript recorded: the vendor's own shape (read by the
    provider's ``parse_usage``: Anthropic's and OpenAI's ``usage``, Gemini's
    ``usageMetadata``) or the OpenAI-style shape LiteLLM reports for every
    vendor (``prompt_tokens`` including the cached part; Anthropic's cache fields
    beside it), as OpenHands records it.
    """
    if not isinstance(usage, Mapping):
        return None
    if "prompt_tokens" in usage and "input_tokens" not in usage:
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
        read = Provider._int(usage.get("cache_read_input_tokens")) or Provider._int(cached)
        write = Provider._int(usage.get("cache_creation_input_tokens"))
        prompt = Provider._int(usage.get("prompt_tokens"))
        return Usage(
            input_tokens=max(0, prompt - read - write),
            cache_read_tokens=read,
            cache_write_tokens=write,
            output_tokens=Provider._int(usage.get("completion_tokens")),
        )
    # The usage as a response holds it: Gemini's answers name it ``usageMetadata``.
    return provider.parse_usage({"usage": usage, "usageMetadata": usage})


def session_tool_names(store: CommitStore, session: str) -> list[str]:
    """Names of the tools the session (with what a fork inherits) called, sorted: what
    ``render_defaults`` declares when no declarations were recorded."""
    return sorted(
        {
            n.name
            for n in store.nodes(session, inherited=True)
            if n.role == "tool" and n.caller is not None and n.name
        }
    )


def _sent_model(node: Node) -> str:
    """The model the request of an answer the engine recorded was sent with (its
    ``metadata["request"]["model"]``: the name as sent, where ``node.name`` is the one
    the vendor answered with, often a dated id); ``""`` for other nodes."""
    request = node.metadata.get("request")
    model = request.get("model") if isinstance(request, Mapping) else None
    return model if isinstance(model, str) else ""


#: What ``_Recorded.model`` remembers for a node whose chain names no model (never a
#: model name: those hold no NUL).
_NO_ANSWER = "\0no answer"


class _Recorded:
    """What the store knows about one session's requests, read once for all of them:
    its metadata, the tools it called (``session_tool_names``, or ``used_tools``) and
    the model of each request's answer.

    The model is found by walking the request's chain back through the store node by
    node; the walk is remembered, so the requests of a session cost one walk of its
    chain in all rather than one each (``render_requests``, ``compare_usage``).
    """

    def __init__(
        self,
        store: CommitStore,
        session: str,
        used_tools: list[str] | None = None,
        models: dict[str, str | None] | None = None,
        reuse: dict[str, Any] | None = None,
        info: SessionInfo | None = None,
    ) -> None:
        info = info if info is not None else store.get_session(session)
        self.store = store
        self.session = info.id
        self.metadata = info.metadata
        self.used_tools = session_tool_names(store, info.id) if used_tools is None else used_tools
        # node id -> the model found from it; "" (never a node id): the session's first.
        # Nodes never change, so a caller may keep it for later requests (``models``).
        self._models: dict[str, str | None] = {} if models is None else models
        # The recorded form per (provider, tools recorded), made once.
        self._native: dict[tuple[str, bool], NativeForm | None] = {}
        # The last ``session_defaults`` answer with its inputs (``render_defaults``).
        self._reuse = reuse

    def model(self, at: str) -> str | None:
        """The model recorded on the nearest assistant node at or before node ``at`` (a
        request's answer, or a next request's head: ``_position``) in its frame (the
        model its request was sent with when the engine recorded it, else the answer
        node's ``name``); before the first answer, the session's first."""
        memo = self._models
        walked: list[str] = []
        node: Node | None = self.store.get_node(at)
        while node is not None and node.id not in memo:
            walked.append(node.id)
            sent = _sent_model(node)
            if node.role == "assistant" and (sent or node.name):
                memo[node.id] = sent or node.name
                break
            node = self.store.get_node(node.predecessor) if node.predecessor else None
        found = memo[node.id] if node is not None else _NO_ANSWER
        for n in walked:
            memo[n] = found
        if found != _NO_ANSWER:
            return found
        # No named answer on the chain (a fact of the chain, kept as such): the
        # session's first.  While it has none, it is looked for again each time the
        # session has doubled (a kept memo would otherwise scan it per request).
        calls = self.store.get_session(self.session).calls
        if memo.get("") is None and calls >= 2 * int(memo.get("#") or 0):
            memo[""] = next(
                (
                    n.name
                    for n in self.store.iter_nodes(self.session)
                    if n.role == "assistant" and n.name
                ),
                None,
            )
            memo["#"] = str(max(1, calls))
        return memo[""]

    def defaults(self, at: str, provider: str | Provider, **overrides: Any) -> RenderDefaults:
        """``render_defaults`` of this session's request at node ``at`` (``_position``):
        with, for the wire the session's request was recorded on, its recorded form
        (``native``)."""
        chosen = {k: v for k, v in overrides.items() if v is not None}
        # A model given takes precedence: the answer's is not looked for then.
        answer = None if chosen.get("model") else self.model(at)
        # ``session_defaults`` is a function of these inputs alone: while they compare
        # equal, its last answer is the answer (a session's requests mostly share it).
        # (The registries too: a model or provider registered since may choose otherwise.)
        kinds = (registry("models"), registry("providers"))
        # The tools called count only where no declarations are given: a session that
        # calls one more tool keeps the answer made with the tools given.
        used = None if chosen.get("tools") is not None else self.used_tools
        inputs = (self.metadata, provider, used, answer, chosen, kinds)
        last = self._reuse
        if last is not None and last.get("inputs") == inputs:
            out: RenderDefaults = last["out"]
        else:
            out = session_defaults(
                self.metadata, provider, used_tools=self.used_tools, answer_model=answer, **chosen
            )
            if last is not None:
                last.update(inputs=inputs, out=out)
        name = provider if isinstance(provider, str) else provider.name
        if not replays_recording(self.metadata, name):
            return out
        # The recorded tools go out as recorded unless tools were given.
        tools = "tools" not in chosen
        if (name, tools) not in self._native:
            self._native[(name, tools)] = native_form(
                self.metadata, self.store.nodes(self.session), name, tools=tools
            )
        form = self._native[(name, tools)]
        if form is None:
            return out
        return with_native(out, form, chosen)


def render_defaults(
    store: CommitStore,
    request: Request,
    provider: str | Provider,
    *,
    used_tools: list[str] | None = None,
    models: dict[str, str | None] | None = None,
    reuse: dict[str, Any] | None = None,
    session_info: SessionInfo | None = None,
    **overrides: Any,
) -> RenderDefaults:
    """The render options of ``request`` (``ctxrules.render.session_defaults``).

    From the store: the session's recorded request (its metadata), the model of the
    answer — the answer node's own (``request.answer``), or for a next request the
    nearest answer before it (the session's first answer at its start) — and the tools
    the whole session called
    (``session_tool_names``; pass ``used_tools`` to reuse a list).  ``models`` is a
    memo of the models found (node id → model) that a caller asking about many
    requests of one session keeps between calls (the turn engine), so each asks only
    about the nodes added since; ``reuse``, a dict such a caller keeps per session
    too, holds the last ``session_defaults`` answer with its inputs (the session's
    metadata, the tools called, the answer's model, the overrides), given again while
    they compare equal: treat the result as read-only then.  ``session_info`` is the
    session's row when the caller has just read it (the turn engine reads it once per
    step), instead of reading it again; it must be ``request.session_id``'s
    (``ValidationError`` otherwise).  ``overrides`` are the options of
    ``session_defaults`` (model, system, tools, max_tokens, extra) and take precedence.
    What ``render`` / ``explain`` / the CLI send for a stored session.
    """
    return render_defaults_at(
        store,
        request.session_id,
        _position(request),
        provider,
        used_tools=used_tools,
        models=models,
        reuse=reuse,
        session_info=session_info,
        **overrides,
    )


def render_defaults_at(
    store: CommitStore,
    session: str,
    at: str,
    provider: str | Provider,
    *,
    used_tools: list[str] | None = None,
    models: dict[str, str | None] | None = None,
    reuse: dict[str, Any] | None = None,
    session_info: SessionInfo | None = None,
    **overrides: Any,
) -> RenderDefaults:
    """``render_defaults`` of the request of ``session`` at node ``at`` — the answer it
    produced, or for a next request its head — without the request: what it is sent
    with depends on where it is, not on what its commit holds, so a caller may choose
    the model before the rules run (the engine prices them at that model's cache)."""
    if session_info is not None and session_info.id != session:
        raise ValidationError(
            f"session_info is session {session_info.id!r}'s, not the request's",
            where=f"session {session}",
            hint="pass the row of the request's session (store.get_session), or none",
        )
    recorded = _Recorded(store, session, used_tools, models, reuse, session_info)
    return recorded.defaults(at, provider, **overrides)


def _position(request: Request) -> str:
    """The node a request's defaults are looked up at: its answer, else its head."""
    return request.answer or request.commit.head_node_id


def explain_request(
    store: CommitStore,
    request: Request,
    provider: str | Provider,
    model: str | None = None,
    *,
    previous: Request | str | None = "auto",
    prefix_tokens: int = 0,
    config: PipelineConfig | Pipeline | None = None,
    defaults: RenderDefaults | None = None,
    **options: Any,
) -> dict[str, Any]:
    """``ctxrules.render.explain`` of ``request`` with what the store knows.

    The render options are ``defaults``, else ``render_defaults`` with ``model`` and
    the ``session_defaults`` options among ``options`` (system, tools, max_tokens,
    extra); other ``options`` (cache, cache_ttl) go to ``explain``.  The previous
    request is ``previous_request`` (``"auto"``, with a situation layer when
    ``request`` has one), the one given, or none; the cache's elapsed time is the
    seconds between the two.  Adds ``for_node``, ``sent_at``, ``previous_request``,
    where each default came from (``model_choice``, ``system_source``, ``tools``,
    ``params``) and — when the answer node carries the vendor's usage — ``recorded``
    (that usage) beside the estimate.
    """
    prov = get_provider(provider) if isinstance(provider, str) else provider
    chosen = {k: options.pop(k) for k in _DEFAULT_OPTIONS if k in options}
    if defaults is None:
        defaults = render_defaults(store, request, prov, model=model, **chosen)
    before = previous_request(store, request, config=config) if previous == "auto" else previous
    if isinstance(before, str):
        raise RenderError(f"previous must be a Request, None or 'auto', got {before!r}")
    # The previous request's own model (a switch leaves no cache to read), unless a
    # model was imposed on both.
    previous_model = (
        render_defaults(store, before, prov).options.get("model")
        if before is not None and model is None and "model" not in chosen
        else None
    )
    out = explain(
        request.commit,
        prov,
        previous=before.commit if before is not None else None,
        previous_situation=(before.situation or None) if before is not None else None,
        previous_model=previous_model,
        # A clock before the previous request (an explicit --now) counts as no delay.
        elapsed_seconds=max(0.0, request.sent_at - before.sent_at) if before is not None else None,
        prefix_tokens=prefix_tokens,
        situation=request.situation or None,
        **{**options, **defaults.options},
    )
    out["model_choice"] = defaults.explain["model"]
    out["system_source"] = defaults.explain["system"]["source"]
    out["tools"] = defaults.explain["tools"]
    out["params"] = defaults.explain["params"]
    out["for_node"] = request.answer
    out["sent_at"] = request.sent_at
    out["previous_request"] = (
        {"for_node": before.answer, "commit": before.commit.id, "sent_at": before.sent_at}
        if before is not None
        else None
    )
    if request.answer is not None:
        parsed = recorded_usage(prov, store.get_node(request.answer).metadata.get("usage"))
        if parsed is not None and parsed.prompt_tokens > 0:
            out["recorded"] = {
                "input_tokens": parsed.prompt_tokens,
                "cache_read_tokens": parsed.cache_read_tokens,
                "cache_write_tokens": parsed.cache_write_tokens,
            }
    return out


#: The options of ``session_defaults`` that ``explain_request`` takes among its own.
_DEFAULT_OPTIONS = ("system", "tools", "max_tokens", "extra")


class UsageRow(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded answer: its request's recorded and estimated prompt and cache use.

    ``frame`` is the sub-agent's first node (``"main"`` for the main conversation);
    ``segment`` counts the frame's compaction boundaries and model switches before the
    request (each starts a new segment); ``prefix_tokens`` the unrecorded harness
    prefix assumed for that segment (the recorded prompt of its first request minus the
    estimate: 0 for that request); ``model`` the model the request was sent to.
    """

    answer: str
    frame: str
    first_in_frame: bool
    prefix_tokens: int
    recorded_input: int
    recorded_read: int
    recorded_write: int
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    segment: int = 0
    model: str | None = None


def _frame(store: CommitStore, node: Node) -> str:
    while node.predecessor is not None:
        node = store.get_node(node.predecessor)
    return node.id if node.caller is not None else "main"


def compare_usage(
    store: CommitStore,
    session: str,
    provider: str | Provider,
    *,
    config: PipelineConfig | Pipeline | None = None,
) -> list[UsageRow]:
    """Replay every answer of ``session`` that carries the vendor's usage and compare.

    Each answer's request (``request_for``) is estimated with ``explain_request``.  A
    harness sends text the transcript does not hold (its own system prompt and tool
    schemas): that constant part is estimated per segment from the segment's first
    request (recorded prompt minus our estimate, at least 0) and added to every later
    request of the segment as an unrecorded prefix, cached like the rest.  A frame (the
    main conversation, each sub-agent) is one segment until a compaction boundary or a
    model switch starts the next: after a compaction the harness re-injects content
    the transcript does not hold (instruction files, plans, recent files), and another
    model counts the same unrecorded text differently — each is estimated the way a
    frame's first request is.  Each request is rendered with its ``render_defaults``:
    the model the answer node names, the session's recorded (or inferred) tools and
    parameters; its cache prediction is against the previous request on its own model
    (a switch reads nothing).
    """
    prov = get_provider(provider) if isinstance(provider, str) else provider
    rows: list[UsageRow] = []
    prefix: dict[tuple[str, int], int] = {}
    segment: dict[str, int] = {}
    last_model: dict[str, str | None] = {}
    recorded = _Recorded(store, session)
    for node in store.nodes(session):
        if is_boundary(node):
            f = _frame(store, node)
            segment[f] = segment.get(f, 0) + 1
            continue
        usage = node.metadata.get("usage") if node.role == "assistant" else None
        parsed = recorded_usage(prov, usage)
        if parsed is None or parsed.prompt_tokens <= 0 or node.caller is not None:
            continue
        request = request_for(store, session, node.id, config=config)
        frame_id = _frame(store, node)
        defaults = recorded.defaults(_position(request), prov)
        model = defaults.options.get("model")
        if frame_id in last_model and last_model[frame_id] != model:
            segment[frame_id] = segment.get(frame_id, 0) + 1
        last_model[frame_id] = model
        frame = (frame_id, segment.get(frame_id, 0))
        first = frame not in prefix
        if first:
            ex = explain_request(
                store, request, prov, previous=None, config=config, defaults=defaults
            )
            # Never negative: a first request we over-estimate gets no prefix.
            prefix[frame] = max(0, parsed.prompt_tokens - ex["input_tokens"])
            ex = explain_request(
                store,
                request,
                prov,
                previous=None,
                prefix_tokens=prefix[frame],
                config=config,
                defaults=defaults,
            )
        else:
            ex = explain_request(
                store,
                request,
                prov,
                prefix_tokens=prefix[frame],
                config=config,
                defaults=defaults,
            )
        rows.append(
            UsageRow(
                answer=node.id,
                frame=frame_id,
                segment=frame[1],
                model=model,
                first_in_frame=first,
                prefix_tokens=prefix[frame],
                recorded_input=parsed.prompt_tokens,
                recorded_read=parsed.cache_read_tokens,
                recorded_write=parsed.cache_write_tokens,
                input_tokens=ex["input_tokens"],
                cache_read_tokens=ex["cache_read_tokens"],
                cache_write_tokens=ex["cache_write_tokens"],
            )
        )
    return rows


def session_requests(
    store: CommitStore,
    session: str,
    *,
    config: PipelineConfig | Pipeline | None = None,
    situation: bool = False,
) -> list[Request]:
    """The request of every answer of ``session``, in the session's order.

    Each is ``request_for`` of an assistant answer of the session's own nodes (its
    sub-agents' answers too): what the agent sent, request by request, with commits
    generated (and stored) where missing at the time of the recording.  Render them
    with ``render_requests``.
    """
    return [
        request_for(store, session, n.id, config=config, situation=situation)
        for n in store.nodes(session)
        if n.role == "assistant" and n.caller is None and n.predecessor is not None
    ]


@overload
def render_requests(
    store: CommitStore,
    sessions: Sequence[Sequence[Request]],
    provider: str | Provider,
    *,
    threads: int | None = None,
    meta: bool = True,
    cache: bool = True,
    cache_ttl: str | None = None,
    estimate: bool = False,
    errors: Literal["raise"] = "raise",
    **overrides: Any,
) -> list[list[RenderedRequest]]: ...


@overload
def render_requests(
    store: CommitStore,
    sessions: Sequence[Sequence[Request]],
    provider: str | Provider,
    *,
    threads: int | None = None,
    meta: bool = True,
    cache: bool = True,
    cache_ttl: str | None = None,
    estimate: bool = False,
    errors: Literal["return"],
    **overrides: Any,
) -> list[list[RenderedRequest] | RenderError]: ...


def render_requests(
    store: CommitStore,
    sessions: Sequence[Sequence[Request]],
    provider: str | Provider,
    *,
    threads: int | None = None,
    meta: bool = True,
    cache: bool = True,
    cache_ttl: str | None = None,
    estimate: bool = False,
    errors: Literal["raise", "return"] = "raise",
    **overrides: Any,
) -> list[list[RenderedRequest]] | list[list[RenderedRequest] | RenderError]:
    """Render stored requests as ``render --for`` renders each, all in one crossing.

    ``sessions`` are lists of requests in the order they were sent (one session's
    each, as ``session_requests`` gives them); ``result[i][k]`` is request ``k`` of
    list ``i`` rendered for ``provider`` with its ``render_defaults`` options
    (``overrides``: model, system, tools, max_tokens, extra, as there) and its
    situation text: the same ``RenderedRequest``, byte for byte, as rendering it alone.
    They are rendered incrementally (``ctxrules.render.render_sessions``: each body
    starts from the previous one's bytes, in parallel across lists, ``threads``,
    ``meta``, ``estimate`` and ``errors`` as there); ``cache`` / ``cache_ttl`` are the
    render options of the same names.
    """
    prov = get_provider(provider) if isinstance(provider, str) else provider
    # The defaults depend on the session and the answer's model only: made once per
    # pair, the same mapping then serves every request that shares it.
    made: dict[tuple[str, str | None], dict[str, Any]] = {}
    recorded: dict[str, _Recorded] = {}
    options: list[list[dict[str, Any]]] = []
    for requests in sessions:
        per_request: list[dict[str, Any]] = []
        for r in requests:
            rec = recorded.get(r.session_id)
            if rec is None:
                rec = recorded[r.session_id] = _Recorded(store, r.session_id)
            key = (r.session_id, rec.model(_position(r)))
            if key not in made:
                defaults = rec.defaults(_position(r), prov, **overrides)
                made[key] = {**defaults.options, "cache": cache, "cache_ttl": cache_ttl}
            kw = made[key]
            per_request.append({**kw, "situation": r.situation} if r.situation else kw)
        options.append(per_request)
    out = render_sessions(
        [[r.commit for r in requests] for requests in sessions],
        [prov],
        options=options,
        threads=threads,
        meta=meta,
        estimate=estimate,
        errors=errors,
    )
    return [per_provider[0] for per_provider in out]
