"""The turn engine: ``prepare`` the next request of a session, ``record`` its response.

An agent author's loop::

    engine = Engine(store, EngineConfig(provider="anthropic", system="You are …"))
    prep = engine.prepare(session, "fix the failing test", now=time.time())
    response = client.messages.create(**prep.body)        # the official SDK
    done = engine.record(prep, response, now=time.time())
    while done.tool_calls:                                  # run them, hand the results back
        results = [ToolResult(c.id, run(c)) for c in done.tool_calls]
        prep = engine.prepare(session, tool_results=results, now=time.time())
        ...

``prepare`` works in six steps:

1. **references**: ``@path`` mentions in the input are read and attached to it;
2. **history**: the input is appended to the graph and the commit at the new head is
   made (``make_commit``: the rules run; one traversal of the branch);
3. **system prompt**: identity, skills, memory and the context sources (collected once
   per session and memoised, so the prefix stays byte-identical);
4. **budget**: the window split four ways (system / tools / history / output reserve)
   and the level (ok / warn / compact / critical) against the thresholds;
5. **usage fusion**: the local estimate of this request, fused with the provider's
   measurement of the last one (measured + what the estimate says changed since);
6. the ``TurnPrep``, with the provider request rendered and ready to send.

At ``compact`` (``auto_compact``) or ``critical`` (``emergency_compact``) the engine
compacts the session first and prepares again.  ``record`` appends the answer (its tool
calls wait for their results) with the provider's usage; ``retry_after_error`` handles a
prompt-too-long refusal by compacting and preparing once more, behind a circuit breaker.
Everything takes the caller's ``now``: the engine never reads the clock.
"""

from __future__ import annotations

import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .. import dag
from ..commit import Pipeline, make_commit
from ..compaction import CircuitBreaker, CompactResult, boundaries, compact, is_prompt_too_long
from ..config import PipelineConfig
from ..context_sources import SourceMemo, SourceRequest
from ..errors import (
    CompactionDeclined,
    CompactionError,
    CtxrulesError,
    DagError,
    RenderError,
    ValidationError,
)
from ..limits import check_now
from ..model import (
    Content,
    ContextCommit,
    Node,
    TextBlock,
    ToolSpec,
    ToolUseBlock,
)
from ..providers import (
    ModelProfile,
    ModelResponse,
    Provider,
    RenderedRequest,
    RequestOptions,
    get_provider,
    model_in_family,
)
from ..render import (
    RenderDefaults,
    SessionRenderer,
    header_tokens,
    render_side_request,
    request_options,
)
from ..requests import render_defaults_at, session_tool_names
from ..ruleapi.cache import CachePricing
from ..situation import commit_situation
from ..store import CommitStore, SessionInfo
from .aio import AsyncTwins
from .budget import budget, output_reserve
from .calls import append_results, settle
from .compacting import Sent, compaction_price, futile
from .config import EngineConfig
from .fusion import UsageFusion, sent_count
from .references import Reference, find_references, reference_block
from .results import Recorded, SessionStats, SystemPrompt, TokenFigures, ToolResult, TurnPrep
from .setup import engine_made, remember_setup
from .usage import UsageRecord, breakdown

__all__ = [
    "Engine",
    "Recorded",
    "SessionStats",
    "SystemPrompt",
    "TokenFigures",
    "ToolResult",
    "TurnPrep",
]


#: Prepared requests whose estimates the engine keeps for usage fusion (the newest).
_PREPARED_KEPT = 4096
#: Sessions whose last request the engine keeps to render the next one from (the
#: newest): each holds that request's body and items.
_RENDERERS_KEPT = 64


class _Composed(msgspec.Struct, frozen=True, kw_only=True):
    """A request composed from a commit (steps 3–5 without the budget)."""

    commit: ContextCommit
    system: SystemPrompt
    tools: tuple[ToolSpec, ...]
    rendered: RenderedRequest
    profile: ModelProfile
    estimate: int
    system_tokens: int
    tool_tokens: int
    #: The session row the request was composed from (read once per step).
    session: SessionInfo


class _Layer(msgspec.Struct, frozen=True, kw_only=True):
    """The part of a request that stays while its setup does (``Engine._layer``): the
    model's profile, the render options, the tools and the header's estimates."""

    profile: ModelProfile
    request: RequestOptions
    tools: tuple[ToolSpec, ...]
    system_tokens: int
    tool_tokens: int


class Engine(UsageFusion, AsyncTwins):
    """Prepares requests and records responses for sessions of one store.

    ``pipeline`` is the rule configuration commits are made with (default:
    ``find_config()`` of the working directory, resolved once).  The engine keeps the
    context sources of each session it served (``SourceMemo``) and a circuit breaker of
    failed compactions per session; share one engine per store and configuration.
    """

    def __init__(
        self,
        store: CommitStore,
        config: EngineConfig | None = None,
        *,
        pipeline: PipelineConfig | Pipeline | None = None,
    ) -> None:
        self.store = store
        self.config = config if config is not None else EngineConfig()
        self.provider: Provider = get_provider(self.config.provider)
        built = pipeline if isinstance(pipeline, Pipeline) else Pipeline.from_config(pipeline)
        # The cache-aware rules price a rewrite at the cache of the model each request is
        # sent to (``pipeline_for``); ``pipeline`` is priced at the configured model.
        self._unpriced = built
        self._priced: dict[tuple[CachePricing, str], Pipeline] = {}
        # Per model (and cache rule, TTL): its pricing, with the profile it was made from.
        self._pricings: dict[
            tuple[str, str, str | None], tuple[ModelProfile | None, CachePricing]
        ] = {}
        self.pipeline = self.pipeline_for(self.config.model or self.provider.default_model)
        self.sources = SourceMemo()
        self._locks: dict[str, threading.RLock] = {}
        self._locks_guard = threading.Lock()
        self._estimates: dict[str, int] = {}
        # The estimate of each request prepared lately, by (session, head): what the
        # answer to it is measured against (usage fusion), never estimated again.
        self._prepared: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._steps: dict[str, tuple[Node, int] | str | None] = {}
        self._walks: dict[str, tuple[tuple[Node, int] | None, int]] = {}
        # Guards what sessions share: the prepared estimates and the counters.
        self._kept = threading.Lock()
        #: What the engine did: ``requests`` composed (each estimated once, with its
        #: body, by the core) and ``fusion_renders``: earlier requests this engine did
        #: not prepare (an imported answer's) rendered once to pair with their usage.
        self.counters: Counter[str] = Counter()
        self._breakers: dict[str, CircuitBreaker] = {}
        self._called: dict[str, tuple[set[str], int]] = {}
        # Per session, the models its answers name (``render_defaults``' memo).
        self._models: dict[str, dict[str, str | None]] = {}
        # Per session, the last render defaults and request layer with what they were
        # made from (``render_defaults``' ``reuse``, ``_layer``): consecutive requests
        # of a session mostly share them, and any change of an input makes them again.
        self._reuse: dict[str, dict[str, Any]] = {}
        self._owned: dict[str, tuple[Mapping[str, Any], bool]] = {}
        self._chosen: dict[str, tuple[RenderDefaults, EngineConfig, str, dict[str, Any]]] = {}
        self._layers: dict[str, tuple[tuple[Any, ...], _Layer]] = {}
        # Per session, the core's renderer of its successive requests: each request is
        # rendered from the previous one's body (the same bytes as a full render; a
        # prefix a rule rewrote, a fork or another model is simply written again).
        self._renderers: OrderedDict[str, SessionRenderer] = OrderedDict()
        # Per session, the last request prepared (its time, model and estimate): what
        # the provider has cached when the next one is due.
        self._sent: OrderedDict[str, Sent] = OrderedDict()
        # And per session and model: what a return to a model finds cached.
        self._sent_by_model: OrderedDict[str, dict[str, Sent]] = OrderedDict()

    # -- the loop ------------------------------------------------------------------------

    def session_lock(self, session: str) -> threading.RLock:
        """The lock every call of this engine on ``session`` holds while it runs: calls
        on one session (from threads, or the async twins) take turns; calls on different
        sessions run side by side."""
        with self._locks_guard:
            return self._locks.setdefault(session, threading.RLock())

    def prepare(
        self,
        session: str,
        user_input: Content | None = None,
        *,
        tool_results: Sequence[ToolResult] = (),
        now: float,
        model: str | None = None,
    ) -> TurnPrep:
        """Append the input (a user message, or tool results) and build the next request.

        With neither, the request is the one due at HEAD (e.g. after an import that ended
        with the user's message).  ``RenderError`` when HEAD is the model's answer and no
        input is given (there is nothing to ask).  See the module docstring for the steps.
        ``model``: the model this request is sent with, over the configuration's and the
        session's (a replay sends each request to the model that answered it); the
        rules are priced at its cache either way.  ``aprepare`` is the async twin.
        """
        with self.session_lock(session):
            return self._prepare(session, user_input, tool_results, now, model)

    def _prepare(
        self,
        session: str,
        user_input: Content | None,
        tool_results: Sequence[ToolResult],
        now: float,
        model: str | None = None,
    ) -> TurnPrep:
        now = check_now(now)
        info = self.store.get_session(session)
        appended: list[str] = []
        refs: tuple[Reference, ...] = ()
        if tool_results and user_input is not None:
            raise ValidationError(
                "pass either user_input or tool_results, not both",
                where=f"session {session}",
                hint="hand the tool results back first; the user's message comes after",
            )
        if tool_results and info.head is None:
            raise DagError(f"session {session!r} is empty: no tool call to answer")
        # Every call waiting at HEAD is answered before anything else goes on (calls.py).
        results, not_run, calls = settle(self.store, info.id, info.head, tool_results, self.config)
        if results:
            assert info.head is not None
            appended += append_results(
                self.store, info.id, info.head, results, calls, now, not_run=not_run
            )
        if user_input is not None:
            node, refs = self._append_user(info.id, user_input, now)
            appended.append(node.id)
        if appended:  # HEAD moved: the row is read again, once, for the rest of the step
            info = self.store.get_session(session)
        head = info.head
        if head is None:
            raise DagError(
                f"session {session!r} is empty: there is nothing to send",
                hint="pass the user's message as user_input",
            )
        composed = self._compose(session, head, now, info, model=model)
        if not user_input and not results:
            last = next(
                (it for it in reversed(composed.commit.items) if it.state != "summarized"), None
            )
            # A summary is not an answer: after a compaction (a boundary at HEAD, or a
            # fold that left the summary last) the next request is due.
            if (
                last is not None
                and last.role == "assistant"
                and last.caller is None
                and last.state != "summary"
            ):
                raise RenderError(
                    f"HEAD {head} is the model's answer and no input was given: there is no "
                    "request to make",
                    where=f"session {session}",
                    hint="pass the user's next message (user_input) or the tool results",
                )
        with self._kept:  # read before ``_prep`` records this request in its place
            previous = self._sent.get(session)
            by_model = dict(self._sent_by_model.get(session, {}))
        prep = self._prep(session, head, tuple(appended), refs, composed, now, attempt=0)
        if not_run:
            prep = msgspec.structs.replace(prep, not_run=not_run)
        trigger = self._due(prep.level)
        if trigger is None:
            return prep
        why = futile(prep)
        if why:
            return msgspec.structs.replace(prep, compaction_error=why)
        # Past the threshold a compaction must pay for its cache rewrite; past the
        # critical level the hard limit forces it (engine/compacting.py).
        need, why = (
            (1, "")
            if prep.level == "critical"
            else self._compaction_price(prep, previous, now, by_model.get(prep.model))
        )
        history = max(0, prep.tokens.estimate - prep.budget.system - prep.budget.tools)
        if need > history:  # even folding everything would not pay: no summary asked
            return msgspec.structs.replace(
                prep, compaction_error=f"not compacted: {why}; the history holds {history:,}"
            )
        try:
            result = self._compact(session, trigger, prep.model, now, min_saving=max(1, need))
        except CompactionDeclined as exc:
            said = f"{exc} ({why})" if why else str(exc)
            return msgspec.structs.replace(prep, compaction_error=said)
        except CompactionError as exc:
            # The request still goes: a failed automatic compaction must not stop the
            # turn (the breaker stops trying after its limit; stats and the prep say so).
            return msgspec.structs.replace(prep, compaction_error=str(exc))
        return self._after_compaction(prep, result, now, attempt=0)

    def retry_after_error(self, prep: TurnPrep, error: BaseException, *, now: float) -> TurnPrep:
        """The request to send after the provider refused ``prep``'s: when ``error`` is a
        prompt-too-long refusal (``is_prompt_too_long``), compact (trigger ``reactive``)
        and prepare the same turn again, once.

        ``error`` itself is raised again when it is another error, or when ``prep`` was
        already such a retry (a second refusal after compacting: compacting again would
        not help); ``CompactionError`` when the compaction failed or the session's
        circuit breaker is open after consecutive failures.  ``aretry_after_error`` is
        the async twin.
        """
        now = check_now(now)
        if not is_prompt_too_long(error, self.provider) or prep.attempt >= 1:
            raise error
        with self.session_lock(prep.session_id):
            return self._retry(prep, error, now)

    def _retry(self, prep: TurnPrep, error: BaseException, now: float) -> TurnPrep:
        try:
            result = self._compact(prep.session_id, "reactive", prep.model, now)
        except CompactionError as exc:
            raise CompactionError(
                f"the provider refused the prompt as too long ({error}) and the reactive "
                f"compaction failed: {exc}",
                where=f"session {prep.session_id}",
                hint="compact manually with other instructions, or use a model with a "
                "larger window",
            ) from exc
        return self._after_compaction(prep, result, now, attempt=prep.attempt + 1)

    def _count(self, what: str) -> None:
        """Add one to ``counters[what]`` (sessions prepared at once share the counters)."""
        with self._kept:
            self.counters[what] += 1

    def breaker(self, session: str) -> CircuitBreaker:
        """The circuit breaker of ``session``'s compactions (automatic and reactive):
        after 3 consecutive failures it stops trying until ``reset()``."""
        return self._breakers.setdefault(session, CircuitBreaker())

    def record(self, prep: TurnPrep, response: Any, *, now: float) -> Recorded:
        """Append the model's answer to ``prep``'s request with the provider's usage; HEAD
        moves to it.  ``response`` is the answer as received (a body, its JSON, the SDK's
        object) or a finished stream (the SDK's final message, the list of its events);
        anything that is not an answer of the engine's provider is refused and nothing
        is stored (``Provider.read_response``).  ``arecord`` is the async twin."""
        now = check_now(now)
        parsed = self.provider.read_response(response)  # checked before anything is stored
        with self.session_lock(prep.session_id):
            return self._record(prep, parsed, now)

    def _record(self, prep: TurnPrep, parsed: ModelResponse, now: float) -> Recorded:
        metadata: dict[str, Any] = {
            "request": {
                "commit": prep.commit.id,
                "provider": prep.provider,
                "model": prep.model,
                "estimate": prep.tokens.estimate,
            },
        }
        if parsed.raw_usage is not None:
            metadata["usage"] = parsed.raw_usage
        if parsed.stop_reason:
            metadata["stop_reason"] = parsed.stop_reason
        if parsed.id:
            metadata["response_id"] = parsed.id
        if parsed.unknown:
            metadata["unknown_content"] = list(parsed.unknown)
        node = dag.append(
            self.store,
            prep.session_id,
            "assistant",
            list(parsed.content),
            name=parsed.model or prep.model,
            predecessor=prep.head,
            metadata=metadata,
            created_at=now,
        )
        self._estimates[node.id] = prep.tokens.estimate
        usage = (
            UsageRecord.measured(
                prep.budget.window,
                parsed.usage.prompt_tokens,
                prep.tokens.estimate,
                sent=sent_count(parsed.usage),
            )
            if parsed.usage is not None and parsed.usage.prompt_tokens > 0
            else prep.usage
        )
        calls = tuple(b for b in parsed.content if isinstance(b, ToolUseBlock))
        return Recorded(node=node, usage=usage, tool_calls=calls, stop_reason=parsed.stop_reason)

    def side_request(
        self, system: str, text: str, *, max_tokens: int | None = None
    ) -> RenderedRequest:
        """A minimal request off the main path (a summary, a branch summary, a title):
        ``system`` and one user message, no tools, no history, no context sources —
        it bypasses ``prepare``, as such calls need none of the conversation around them
        (``ctxrules.render.render_side_request`` with the engine's provider and model)."""
        model = self.config.model or self.provider.default_model
        profile = self.provider.model_profile(model)
        return render_side_request(
            self.provider,
            model,
            system,
            text,
            max_tokens=max_tokens
            or min(output_reserve(profile, self.config), profile.max_output_tokens),
        )

    # -- statistics ----------------------------------------------------------------------

    def stats(self, session: str, *, head: str | None = None, now: float) -> SessionStats:
        """The usage record and breakdown of ``session`` at ``head`` (default HEAD).

        ``measured`` when the head is an answer whose request the provider measured (or
        only answers without usage follow that one) under the same model; otherwise the
        local estimate of what the next request at the head carries.
        """
        now = check_now(now)
        info = self.store.get_session(session)
        at = head if head is not None else info.head
        if at is None:
            raise DagError(f"session {session!r} is empty", hint="import or append something first")
        composed = self._compose(session, at, now, info)
        profile = composed.profile
        measured = self._measured_at(session, at, composed.rendered.model)
        if measured is not None:
            billed, estimated, sent = measured
            record = UsageRecord.measured(profile.context_window, billed, estimated, sent=sent)
        else:
            record = UsageRecord.estimate(profile.context_window, composed.estimate)
        plan = budget(
            profile,
            self.config,
            system=composed.system_tokens,
            tools=composed.tool_tokens,
            used=record.total_used,
        )
        parts = self._categories(composed)
        split = breakdown(
            window=profile.context_window,
            total_used=record.total_used,
            used_parts=parts,
            output_reserve=plan.output_reserve,
            compact_tokens=plan.compact_tokens,
            estimated=record.estimated,
        )
        return SessionStats(
            session_id=session,
            head=at,
            provider=self.provider.name,
            model=composed.rendered.model,
            usage=record,
            breakdown=split,
            budget=plan,
            boundaries=tuple(self._boundaries(session, at)),
        )

    # -- compaction ----------------------------------------------------------------------

    def compact(
        self,
        session: str,
        *,
        now: float,
        instructions: str = "",
        direction: str = "full",
        pivot: str | None = None,
    ) -> CompactResult:
        """Compact ``session`` at its HEAD now (trigger ``manual``, or ``partial`` with a
        ``pivot``) with the engine's rules, compaction options, provider and model,
        through the session's circuit breaker; the next request collects the context
        sources afresh.  ``acompact`` is the async twin.  See
        ``ctxrules.compaction.compact`` for ``instructions``, ``direction`` and
        ``pivot`` and for its errors.  The model is the one the session's next request
        would be sent to (``prepare``'s choice): the summary is asked of it and the
        rules are priced at its cache."""
        now = check_now(now)
        with self.session_lock(session):
            result = self._compact(
                session,
                None,
                self.next_model(session),
                now,
                instructions=instructions,
                direction=direction,
                pivot=pivot,
            )
            self.sources.refresh(session)
            return result

    def _due(self, level: str) -> str | None:
        """The trigger of the compaction a request at ``level`` calls for, if any."""
        if level == "critical" and (self.config.emergency_compact or self.config.auto_compact):
            return "auto"
        if level == "compact" and self.config.auto_compact:
            return "auto"
        return None

    def _compaction_price(
        self, prep: TurnPrep, previous: Sent | None, now: float, own: Sent | None = None
    ) -> tuple[int, str]:
        """What a compaction before ``prep`` must save to pay for its cache rewrite, and
        why (``engine.compacting.compaction_price``, at the model's cache prices);
        ``previous`` is the session's request before it, if this engine prepared it, and
        ``own`` its last request to ``prep``'s model (what a return to it finds)."""
        pricing = self.pricing(prep.model)
        last = None
        if previous is None or previous.at > now:
            previous = None
            last = self._last_answer(prep.commit)
        return compaction_price(
            prep,
            previous,
            last,
            pricing=pricing,
            now=now,
            own=own,
        )

    def next_model(self, session: str) -> str:
        """The model ``session``'s next request goes to when ``prepare`` chooses it: the
        configured one, else the one the session's recording names at its HEAD (else
        the provider's default).  A compaction or a merge made now is priced at it."""
        info = self.store.get_session(session)
        if info.head is None:
            return self.config.model or self.provider.default_model
        return self._defaults(session, info.head, info)[0]

    def pipeline_for(self, model: str) -> Pipeline:
        """The engine's rules priced at ``model``'s cache (``pricing``): what a request
        sent to ``model`` — and a compaction made for it — is committed with, so a
        session that switches model prices each request's rewrites at its own model."""
        pricing = self.pricing(model)
        # No lock: two threads racing here make two equal pipelines, and either will do.
        made = self._priced.get((pricing, model))
        if made is None:
            if len(self._priced) >= _RENDERERS_KEPT:  # bounded like ``_pricings``
                self._priced.clear()
            made = self._priced[(pricing, model)] = self._unpriced.priced(pricing, model)
        return made

    def pricing(self, model: str) -> CachePricing:
        """How the provider's prompt cache bills ``model`` (``CachePricing``: its cache
        read and write prices, TTL — ``cache_ttl`` — and layout), what the cache ledger
        of the rules and of automatic compaction prices a rewrite with; Anthropic's
        when the model has no profile (``CachePricing.for_model``).  Made once per model
        while the provider gives the same profile for it (a model registered since is
        priced anew)."""
        provider, ttl = self.provider, self.config.cache_ttl
        try:
            profile: ModelProfile | None = provider.model_profile(model)
        except CtxrulesError:
            profile = None  # priced as Anthropic's (``for_model``)
        key = (model, provider.cache_rule, ttl)
        found = self._pricings.get(key)
        if found is not None and found[0] is profile:
            return found[1]
        made = CachePricing.for_model(provider, model, cache_ttl=ttl)
        if len(self._pricings) >= _RENDERERS_KEPT:
            self._pricings.clear()
        self._pricings[key] = (profile, made)
        return made

    def _last_answer(self, commit: ContextCommit) -> tuple[float, str | None] | None:
        """The time of the branch's last answer and the model its request was made for
        (``None`` when the engine did not record it)."""
        for it in reversed(commit.items):
            if it.role == "assistant" and it.state not in ("summarized", "summary"):
                node = self.store.get_node(it.source_node_id)
                request = node.metadata.get("request")
                model = request.get("model") if isinstance(request, dict) else None
                return node.created_at, model if isinstance(model, str) else None
        return None

    def _compact(
        self,
        session: str,
        trigger: str | None,
        model: str,
        now: float,
        *,
        instructions: str = "",
        direction: str = "full",
        pivot: str | None = None,
        min_saving: int = 0,
    ) -> CompactResult:
        """One compaction of ``session`` at its HEAD through its circuit breaker."""
        return self.breaker(session).call(
            lambda: compact(
                self.store,
                session,
                now=now,
                trigger=trigger,
                direction=direction,
                pivot=pivot,
                instructions=instructions,
                config=self.pipeline_for(model),
                options=self.config.compaction,
                provider=self.provider,
                model=model,
                working_directory=self._workdir(),
                min_saving_tokens=min_saving,
            )
        )

    def _after_compaction(
        self, prep: TurnPrep, result: CompactResult, now: float, *, attempt: int
    ) -> TurnPrep:
        """``prep``'s turn prepared again after ``result``: the context sources are
        collected afresh (a compaction is a new start) and the request carries the
        commit at the new HEAD."""
        self.sources.refresh(prep.session_id)
        info = self.store.get_session(prep.session_id)  # after the compaction's writes
        head = info.head
        assert head is not None  # a compaction appended its nodes
        # The same turn, sent to the same model.
        composed = self._compose(prep.session_id, head, now, info, model=prep.model)
        return self._prep(
            prep.session_id,
            head,
            prep.appended + tuple(n for n in (result.boundary, result.restore) if n),
            prep.references,
            composed,
            now,
            attempt=attempt,
            compaction=result,
        )

    # -- steps ---------------------------------------------------------------------------

    def _append_user(
        self, session: str, user_input: Content, now: float
    ) -> tuple[Node, tuple[Reference, ...]]:
        refs: tuple[Reference, ...] = ()
        content = user_input
        metadata: dict[str, Any] = {}
        text = user_input if isinstance(user_input, str) else ""
        if self.config.references and text:
            refs = tuple(
                find_references(
                    text,
                    working_directory=self._workdir(),
                    added_directories=self.config.added_directories,
                    max_chars=self.config.reference_max_chars,
                )
            )
        if refs:
            content = [TextBlock(text=text), *(TextBlock(text=reference_block(r)) for r in refs)]
            metadata["references"] = [
                {"mention": r.mention, "path": r.path, "chars": r.chars, "truncated": r.truncated}
                for r in refs
            ]
        node = dag.append(self.store, session, "user", content, metadata=metadata, created_at=now)
        return node, refs

    def _workdir(self) -> str:
        return self.config.working_directory or os.getcwd()

    def _system(
        self, session: str, commit: ContextCommit, metadata: Mapping[str, Any], now: float
    ) -> SystemPrompt:
        cfg = self.config
        # The session's recorded system prompt is in its history (a system node the
        # commit carries): only the configuration's identity is added here.
        identity = cfg.system
        skills = ""
        if cfg.skills:
            skills = "Skills you can invoke:\n" + "\n".join(
                f"- {s.name}: {s.description}" if s.description else f"- {s.name}"
                for s in cfg.skills
            )
        # Collected once per session (until a compaction refreshes them): the request
        # to collect them is only made then.
        collected = self.sources.kept(session)
        if collected is None:
            collected = self.sources.get(
                SourceRequest(
                    session_id=session,
                    working_directory=self._workdir(),
                    now=now,
                    added_directories=cfg.added_directories,
                    metadata=metadata,
                    config=cfg.sources,
                )
            )
        situation = commit_situation(self.store, commit) if cfg.situation else ""
        return SystemPrompt(
            identity=identity,
            skills=skills,
            memory="\n\n".join(m for m in cfg.memory if m),
            sources=collected.texts,
            situation=situation,
        )

    def _defaults(
        self, session: str, at: str, info: SessionInfo, *, model: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The model and render options of the session's request at node ``at`` (its
        answer, or a next request's head): ``model`` when given, else the
        configuration's, else what the session recorded (``render_defaults_at``, the one
        choice the CLI and replay make too): its model when it belongs to the provider
        (and we can count it), its tool declarations (or the tools it called), its
        parameters.  Chosen before the rules run: they are priced at this model."""
        cfg = self.config
        own = self._own(session, info.metadata)
        chosen = render_defaults_at(
            self.store,
            session,
            at,
            self.provider,
            used_tools=self._tool_names(session),
            models=self._models.setdefault(session, {}),
            reuse=self._reuse.setdefault(session, {}),
            session_info=info,
            model=model or cfg.model,
            tools=list(cfg.tools) or None,
            max_tokens=cfg.max_tokens,
            extra=dict(cfg.extra) or None,
            # What this engine recorded is its own earlier choice, not a recording's.
            recorded_params=not own,
        )
        last = self._chosen.get(session)
        if last is not None and last[0] is chosen and last[1] is cfg:
            # The same defaults as the session's previous request (``reuse``: the same
            # inputs, the registries included) under the same configuration.
            return last[2], dict(last[3])
        options = dict(chosen.options)
        options.pop("system", None)  # the engine composes its own (``_system``)
        sent = options.pop("model", None) or self.provider.default_model
        if not (model or cfg.model) and not resolve_model_ok(self.provider, sent):
            sent = self.provider.default_model
        self._chosen[session] = (chosen, cfg, sent, dict(options))
        return sent, options

    def _own(self, session: str, metadata: Mapping[str, Any]) -> bool:
        """``engine_made`` of the session's ``metadata`` (as the step read it), worked out
        again only when the metadata changed (a store replaces it on every update)."""
        last = self._owned.get(session)
        if last is not None and last[0] == metadata:
            return last[1]
        own = engine_made(metadata)
        self._owned[session] = (metadata, own)
        return own

    def _tool_names(self, session: str) -> list[str]:
        """The tools ``session`` called (with what a fork inherits), kept up to date from
        the calls appended since the last look (one scan of the session per engine)."""
        memo = self._called.get(session)
        if memo is None:
            names = set(session_tool_names(self.store, session))
            seq = max((c.seq for c in self.store.calls_since(session, -1)), default=-1)
        else:
            names, seq = memo
            for c in self.store.calls_since(session, seq):
                if c.role == "tool" and c.name:
                    names.add(c.name)
                seq = c.seq
        self._called[session] = (names, seq)
        return sorted(names)

    def _compose(
        self,
        session: str,
        head: str,
        now: float,
        info: SessionInfo | None = None,
        *,
        model: str | None = None,
    ) -> _Composed:
        """The request at ``head``, sent to ``model`` (default: ``_defaults``' choice).
        ``info``: the session row as the step read it (after its own writes); by default
        it is read here.  Every part of the step that only reads the row uses this one:
        the row is never kept from one step to the next, as another writer may change it
        in between."""
        if info is None:
            info = self.store.get_session(session)
        # The model is chosen first: the rules are priced at its cache.
        sent, options = self._defaults(session, head, info, model=model)
        commit = self._commit(session, head, now, self.pipeline_for(sent))
        system = self._system(session, commit, info.metadata, now)
        layer = self._layer(session, sent, options, system)
        rendered = self.provider.render(
            commit, layer.request, estimate=True, renderer=self._renderer(session)
        )
        self._count("requests")
        # Made by the core with the body, in the same crossing (RenderedRequest.estimate).
        estimate = rendered.estimate.input_tokens if rendered.estimate is not None else 0
        return _Composed(
            commit=commit,
            system=system,
            tools=layer.tools,
            rendered=rendered,
            profile=layer.profile,
            estimate=estimate,
            system_tokens=min(layer.system_tokens, estimate),
            tool_tokens=min(layer.tool_tokens, max(0, estimate - layer.system_tokens)),
            session=info,
        )

    def _commit(self, session: str, head: str, now: float, pipeline: Pipeline) -> ContextCommit:
        """The commit a request at ``head`` carries: ``make_commit`` (planned from the
        store, derived, stored).  The replay of a recording, whose commits nothing else
        reads, keeps them in memory instead (``ctxrules.batch._recording``)."""
        return make_commit(session, head, now=now, store=self.store, config=pipeline)

    def _layer(
        self, session: str, model: str, options: dict[str, Any], system: SystemPrompt
    ) -> _Layer:
        """The render options, tools, model profile and header estimates of a request of
        ``session`` to ``model`` with the render ``options`` (``_defaults``) and
        ``system``: those of the session's previous request while what they are made of
        compares equal (the configuration, the provider, the model and its profile, the
        render defaults, the system prompt), else made now."""
        profile = self.provider.model_profile(model)  # the registry's: a new one if reset
        texts = system.texts()
        key = (self.config, self.provider, model, profile, options, texts, system.situation)
        last = self._layers.get(session)
        if last is not None and last[0] == key:
            return last[1]
        options = dict(options)
        tools: tuple[ToolSpec, ...] = tuple(options.pop("tools", ()))
        reserve = output_reserve(profile, self.config)
        made = request_options(
            self.provider,
            model,
            system=texts,
            situation=system.situation or None,
            tools=tools,
            max_tokens=options.pop("max_tokens", None) or min(reserve, profile.max_output_tokens),
            cache=self.config.cache,
            cache_ttl=self.config.cache_ttl,
            **options,
        )
        layer = _Layer(
            profile=profile,
            request=made,
            tools=tools,
            system_tokens=header_tokens(self.provider, model, system=[*texts, system.situation]),
            tool_tokens=header_tokens(self.provider, model, tools=tools),
        )
        self._layers[session] = (key, layer)
        return layer

    def _renderer(self, session: str) -> SessionRenderer | None:
        """The renderer ``session``'s requests are rendered with (None: the provider has
        no built-in wire).  Called under the session's lock, so one call at a time uses
        a session's renderer."""
        wire = self.provider.wire
        if wire is None:
            return None
        with self._kept:
            found = self._renderers.get(session)
            if found is None:
                found = self._renderers[session] = SessionRenderer(wire)
                if len(self._renderers) > _RENDERERS_KEPT:
                    self._renderers.popitem(last=False)
            self._renderers.move_to_end(session)
            return found

    def _prep(
        self,
        session: str,
        head: str,
        appended: tuple[str, ...],
        refs: tuple[Reference, ...],
        composed: _Composed,
        now: float,
        *,
        attempt: int,
        compaction: CompactResult | None = None,
    ) -> TurnPrep:
        # The row the request was composed from: nothing of the step wrote the session
        # since (the commit is stored apart from it).
        metadata = composed.session.metadata
        if self._own(session, metadata):  # a recording's setup stays the recording's
            remember_setup(
                self.store,
                session,
                self.provider.name,
                composed.rendered,
                composed.system,
                metadata=metadata,
            )
        tokens = self._fuse(session, head, composed.estimate)
        with self._kept:
            self._prepared[(session, head)] = composed.estimate
            self._prepared.move_to_end((session, head))
            if len(self._prepared) > _PREPARED_KEPT:
                self._prepared.popitem(last=False)
            # What the provider caches from this request (engine/compacting.py).
            sent = Sent(now, composed.rendered.model, composed.rendered.estimate)
            self._sent[session] = sent
            self._sent.move_to_end(session)
            if len(self._sent) > _RENDERERS_KEPT:
                self._sent.popitem(last=False)
            # And per model: a provider caches per model, so a return to a model finds
            # its own last request's entry while it lives.
            self._sent_by_model.setdefault(session, {})[sent.model] = sent
            self._sent_by_model.move_to_end(session)
            if len(self._sent_by_model) > _RENDERERS_KEPT:
                self._sent_by_model.popitem(last=False)
        plan = budget(
            composed.profile,
            self.config,
            system=composed.system_tokens,
            tools=composed.tool_tokens,
            used=tokens.fused,
        )
        return TurnPrep(
            session_id=session,
            head=head,
            appended=appended,
            provider=self.provider.name,
            model=composed.rendered.model,
            commit=composed.commit,
            request=composed.rendered,
            system=composed.system,
            tools=composed.tools,
            references=refs,
            budget=plan,
            tokens=tokens,
            usage=UsageRecord.estimate(composed.profile.context_window, composed.estimate),
            created_at=now,
            compaction=compaction,
            attempt=attempt,
        )

    def _categories(self, composed: _Composed) -> dict[str, float]:
        """Local estimates per category of the request (scaled to the record later)."""
        prov, model = self.provider, composed.rendered.model
        system = composed.system

        def tokens(*texts: str) -> float:
            return float(header_tokens(prov, model, system=[t for t in texts if t]))

        instruction = [s.text for s in system.sources if s.name == "instruction_files"]
        other = [s.text for s in system.sources if s.name != "instruction_files"]
        parts: dict[str, float] = {
            "system_prompt": tokens(system.identity, system.situation),
            "instruction_files": tokens(*instruction),
            "context_sources": tokens(*other),
            "skills": tokens(system.skills),
            "memory": tokens(system.memory),
            "tools": float(composed.tool_tokens),
        }
        states = {"full": 0.0, "aged": 0.0, "cleared": 0.0, "summary": 0.0}
        for it in composed.commit.items:
            if it.state == "summarized":
                continue
            if it.role == "system":
                parts["system_prompt"] += it.tokens * composed.profile.calibration
            else:
                states[it.state] += it.tokens * composed.profile.calibration
        parts.update({f"messages_{k}": v for k, v in states.items()})
        return parts

    def _boundaries(self, session: str, head: str) -> list[dict[str, Any]]:
        """The compaction records on the branch to ``head``, oldest first."""
        return [
            {"node": node.id, **msgspec.to_builtins(record)}
            for node, record in boundaries(self.store, session, head)
        ]


def resolve_model_ok(provider: Provider, model: str) -> bool:
    """Whether ``model`` resolves for ``provider`` (a recorded name we can count) and is
    not a model of another family (``model_in_family``), which ``render`` refuses."""
    if model_in_family(model, provider.model_family) is False:
        return False
    try:
        provider.model_profile(model)
    except Exception:
        return False
    return True
