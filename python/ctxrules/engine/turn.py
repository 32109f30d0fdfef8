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
   made (``ensure_latest_commit``: the rules run; one traversal of the branch);
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

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .. import dag
from ..commit import Pipeline, ensure_latest_commit
from ..compaction import CircuitBreaker, CompactResult, boundaries, compact, is_prompt_too_long
from ..config import PipelineConfig
from ..context_sources import SourceMemo, SourceRequest, SourceText
from ..errors import CompactionError, DagError, RenderError, ValidationError
from ..model import Call, Content, ContextCommit, TextBlock, ToolSpec, ToolUseBlock
from ..providers import (
    ModelProfile,
    Provider,
    RenderedRequest,
    Usage,
    get_provider,
    model_in_family,
    resolve_model,
)
from ..render import (
    estimate_request,
    header_tokens,
    render,
    render_side_request,
)
from ..replay import Request, recorded_usage, render_defaults, request_for, session_tool_names
from ..situation import commit_situation
from ..store import CommitStore
from .budget import Budget, budget, output_reserve
from .config import EngineConfig
from .references import Reference, find_references, reference_block
from .usage import Breakdown, UsageRecord, breakdown

__all__ = [
    "Engine",
    "Recorded",
    "SessionStats",
    "SystemPrompt",
    "TokenFigures",
    "ToolResult",
    "TurnPrep",
]

#: How many nodes ``prepare`` walks back looking for the last measured request (usage
#: fusion); sessions whose answers carry no usage stop there instead of at the root.
MEASUREMENT_LOOKBACK = 64


class ToolResult(msgspec.Struct, frozen=True):
    """The result of a tool call the model asked for, handed back to ``prepare``."""

    tool_use_id: str
    output: Content = ""
    is_error: bool = False


class SystemPrompt(msgspec.Struct, frozen=True, kw_only=True):
    """The system prompt of a request, by part (step 3).

    ``identity``, ``skills`` and ``memory`` come from the engine's configuration (or, for
    ``identity``, the session's recorded system prompt); ``sources`` are the context
    sources' texts (memoised per session); ``situation`` is the L1 text (empty unless the
    configuration asks for it).  ``texts`` is the session-constant layer in order.
    """

    identity: str = ""
    skills: str = ""
    memory: str = ""
    sources: tuple[SourceText, ...] = ()
    situation: str = ""

    def texts(self) -> list[str]:
        """The L0 texts, in the order they are sent (empty parts left out)."""
        return [t for t in (self.identity, self.skills, self.memory) if t] + [
            s.text for s in self.sources if s.text
        ]


class TokenFigures(msgspec.Struct, frozen=True, kw_only=True):
    """Step 5: the local estimate of this request, the last measurement it is fused with.

    ``estimate`` is our billed-prompt estimate of the body (``explain.input_tokens``);
    ``measured`` the provider's count of the last measured request of this branch as
    it was sent (``None``: none within reach; the billed prompt, or the vendor's
    compaction step's when it compacted that request on its side) and
    ``measured_estimate`` our estimate of that same request; ``fused`` =
    ``measured + (estimate - measured_estimate)``, or ``estimate`` without a
    measurement — the figure the budget uses.
    """

    estimate: int
    fused: int
    measured: int | None = None
    measured_estimate: int | None = None
    measured_node: str | None = None

    @property
    def calibration(self) -> float | None:
        """``measured / measured_estimate`` of the last measured request, if any."""
        if self.measured is None or not self.measured_estimate:
            return None
        return self.measured / self.measured_estimate


class TurnPrep(msgspec.Struct, frozen=True, kw_only=True):
    """Everything ``prepare`` made for one request; send ``body`` and ``record`` the answer.

    ``head`` is the node the request is made at (the new user message, or the assistant
    turn whose tool results it carries); ``appended`` the nodes this ``prepare`` added.
    ``request`` is the rendered body (bytes as sent), ``commit`` what it carries,
    ``system`` / ``tools`` its session-constant parts, ``budget`` the window split and
    level, ``tokens`` the estimate and usage fusion, ``usage`` the usage record of the
    session as this request leaves (``basis`` ``"estimated"``).  ``compaction`` is the
    ``CompactResult`` of a compaction made before it (``None``: none);
    ``compaction_error`` why an automatic compaction that was due did not happen (it
    failed, or the circuit breaker is open: the request goes as it is); ``attempt``
    counts the retries after prompt-too-long refusals (``retry_after_error``).
    """

    session_id: str
    head: str
    appended: tuple[str, ...]
    provider: str
    model: str
    commit: ContextCommit
    request: RenderedRequest
    system: SystemPrompt
    tools: tuple[ToolSpec, ...]
    references: tuple[Reference, ...]
    budget: Budget
    tokens: TokenFigures
    usage: UsageRecord
    created_at: float
    compaction: CompactResult | None = None
    compaction_error: str = ""
    attempt: int = 0

    @property
    def body(self) -> dict[str, Any]:
        """The request body as a dict, for an SDK call (``client.messages.create(**body)``)."""
        decoded: dict[str, Any] = json.loads(self.request.body)
        return decoded

    @property
    def level(self) -> str:
        """The budget level: ``ok``, ``warn``, ``compact`` or ``critical``."""
        return self.budget.level


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """What ``record`` stored: the answer node, the usage record it measured, and the tool
    calls that now wait for results (hand them back with ``prepare(tool_results=…)``)."""

    node: Call
    usage: UsageRecord
    tool_calls: tuple[ToolUseBlock, ...]
    stop_reason: str = ""


class SessionStats(msgspec.Struct, frozen=True, kw_only=True):
    """A session's window occupancy now: the usage record, its breakdown, the budget and
    level of the next request, and the compaction boundaries on the branch."""

    session_id: str
    head: str | None
    provider: str
    model: str
    usage: UsageRecord
    breakdown: Breakdown
    budget: Budget
    boundaries: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (what ``ctxrules stats --json`` prints)."""
        return {
            "session": self.session_id,
            "head": self.head,
            "provider": self.provider,
            "model": self.model,
            "usage": self.usage.as_dict(),
            "level": self.budget.level,
            "budget": msgspec.to_builtins(self.budget),
            "breakdown": self.breakdown.as_dict(),
            "compactions": list(self.boundaries),
        }


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


class Engine:
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
        self.pipeline = (
            pipeline if isinstance(pipeline, Pipeline) else Pipeline.from_config(pipeline)
        )
        self.sources = SourceMemo()
        self._estimates: dict[str, int] = {}
        self._breakers: dict[str, CircuitBreaker] = {}
        self._called: dict[str, tuple[set[str], int]] = {}

    # -- the loop ------------------------------------------------------------------------

    def prepare(
        self,
        session: str,
        user_input: Content | None = None,
        *,
        tool_results: Sequence[ToolResult] = (),
        now: float,
    ) -> TurnPrep:
        """Append the input (a user message, or tool results) and build the next request.

        With neither, the request is the one due at HEAD (e.g. after an import that ended
        with the user's message).  ``RenderError`` when HEAD is the model's answer and no
        input is given (there is nothing to ask).  See the module docstring for the steps.
        """
        now = _finite(now)
        info = self.store.get_session(session)
        appended: list[str] = []
        refs: tuple[Reference, ...] = ()
        if tool_results:
            if user_input is not None:
                raise ValidationError(
                    "pass either user_input or tool_results, not both",
                    where=f"session {session}",
                    hint="hand the tool results back first; the user's message comes after",
                )
            appended += self._append_results(info.id, info.head, tool_results, now)
        elif user_input is not None:
            node, refs = self._append_user(info.id, user_input, now)
            appended.append(node.id)
        head = self.store.get_session(session).head
        if head is None:
            raise DagError(
                f"session {session!r} is empty: there is nothing to send",
                hint="pass the user's message as user_input",
            )
        composed = self._compose(session, head, now)
        if not user_input and not tool_results:
            last = next(
                (it for it in reversed(composed.commit.items) if it.state != "summarized"), None
            )
            if last is not None and last.role == "assistant" and last.caller is None:
                raise RenderError(
                    f"HEAD {head} is the model's answer and no input was given: there is no "
                    "request to make",
                    where=f"session {session}",
                    hint="pass the user's next message (user_input) or the tool results",
                )
        prep = self._prep(session, head, tuple(appended), refs, composed, now, attempt=0)
        trigger = self._due(prep.level)
        if trigger is None:
            return prep
        try:
            result = self._compact(session, trigger, prep.model, now)
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
        circuit breaker is open after consecutive failures.
        """
        now = _finite(now)
        if not is_prompt_too_long(error, self.provider) or prep.attempt >= 1:
            raise error
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

    def breaker(self, session: str) -> CircuitBreaker:
        """The circuit breaker of ``session``'s compactions (automatic and reactive):
        after 3 consecutive failures it stops trying until ``reset()``."""
        return self._breakers.setdefault(session, CircuitBreaker())

    def record(self, prep: TurnPrep, response: Any, *, now: float) -> Recorded:
        """Append the model's answer to ``prep``'s request (a response body, JSON text, or
        the SDK's response object) with the provider's usage; HEAD moves to it."""
        now = _finite(now)
        parsed = self.provider.read_response(response)
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
                sent=_sent(parsed.usage),
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
        profile = resolve_model(f"{self.provider.family or self.provider.name}:{model}")
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
        now = _finite(now)
        info = self.store.get_session(session)
        at = head if head is not None else info.head
        if at is None:
            raise DagError(f"session {session!r} is empty", hint="import or append something first")
        composed = self._compose(session, at, now)
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

    def _due(self, level: str) -> str | None:
        """The trigger of the compaction a request at ``level`` calls for, if any."""
        if level == "critical" and (self.config.emergency_compact or self.config.auto_compact):
            return "auto"
        if level == "compact" and self.config.auto_compact:
            return "auto"
        return None

    def _compact(self, session: str, trigger: str, model: str, now: float) -> CompactResult:
        """One compaction of ``session`` at its HEAD through its circuit breaker."""
        return self.breaker(session).call(
            lambda: compact(
                self.store,
                session,
                now=now,
                trigger=trigger,
                config=self.pipeline,
                options=self.config.compaction,
                provider=self.provider,
                model=model,
                working_directory=self._workdir(),
            )
        )

    def _after_compaction(
        self, prep: TurnPrep, result: CompactResult, now: float, *, attempt: int
    ) -> TurnPrep:
        """``prep``'s turn prepared again after ``result``: the context sources are
        collected afresh (a compaction is a new start) and the request carries the
        commit at the new HEAD."""
        self.sources.refresh(prep.session_id)
        head = self.store.get_session(prep.session_id).head
        assert head is not None  # a compaction appended its nodes
        composed = self._compose(prep.session_id, head, now)
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
    ) -> tuple[Call, tuple[Reference, ...]]:
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

    def _append_results(
        self, session: str, head: str | None, results: Sequence[ToolResult], now: float
    ) -> list[str]:
        if head is None:
            raise DagError(f"session {session!r} is empty: no tool call to answer")
        answer = self.store.get_node(head)
        pending = {
            b.id: b
            for b in (answer.output if isinstance(answer.output, list) else [])
            if isinstance(b, ToolUseBlock)
        }
        answered = {
            str(c.metadata.get("tool_use_id"))
            for c in self.store.children(head, session_id=session, edge="caller")
        }
        ids = [r.tool_use_id for r in results]
        for r in results:
            if r.tool_use_id not in pending:
                raise DagError(
                    f"no tool call {r.tool_use_id!r} is waiting at HEAD {head}",
                    where=f"session {session}",
                    hint=f"the calls of HEAD are {sorted(pending) or 'none'}",
                )
            if r.tool_use_id in answered or ids.count(r.tool_use_id) > 1:
                raise DagError(
                    f"tool call {r.tool_use_id!r} already has its result",
                    where=f"session {session}, node {head}",
                )
        out = []
        for r in results:
            use = pending[r.tool_use_id]
            node = dag.append(
                self.store,
                session,
                "tool",
                r.output,
                name=use.name,
                input=use.input,
                caller=head,
                metadata={"tool_use_id": r.tool_use_id, "is_error": r.is_error},
                created_at=now,
            )
            out.append(node.id)
        return out

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

    def _defaults(self, request: Request) -> tuple[str, dict[str, Any]]:
        """The model and render options of a request of the session: the configuration's,
        else what the session recorded (``render_defaults``, the one choice the CLI and
        replay make too): its model when it belongs to the provider (and we can count
        it), its tool declarations (or the tools it called), its parameters."""
        cfg = self.config
        chosen = render_defaults(
            self.store,
            request,
            self.provider,
            used_tools=self._tool_names(request.session_id),
            model=cfg.model,
            tools=list(cfg.tools) or None,
            max_tokens=cfg.max_tokens,
            extra=dict(cfg.extra) or None,
        )
        options = dict(chosen.options)
        model = options.pop("model", None) or self.provider.default_model
        if not cfg.model and not resolve_model_ok(self.provider, model):
            model = self.provider.default_model
        return model, options

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

    def _compose(self, session: str, head: str, now: float) -> _Composed:
        info = self.store.get_session(session)
        commit = ensure_latest_commit(
            session, head, now=now, store=self.store, config=self.pipeline
        )
        system = self._system(session, commit, info.metadata, now)
        model, options = self._defaults(
            Request(session_id=session, commit=commit, situation="", sent_at=now)
        )
        tools: tuple[ToolSpec, ...] = tuple(options.pop("tools", ()))
        spec = f"{self.provider.family or self.provider.name}:{model}"
        profile = resolve_model(spec)
        reserve = output_reserve(profile, self.config)
        rendered = render(
            commit,
            self.provider,
            model,
            system=system.texts(),
            situation=system.situation or None,
            tools=tools,
            max_tokens=options.pop("max_tokens", None) or min(reserve, profile.max_output_tokens),
            cache=self.config.cache,
            cache_ttl=self.config.cache_ttl,
            **options,
        )
        estimate = estimate_request(rendered, self.provider).input_tokens
        system_tokens = header_tokens(
            self.provider, model, system=[*system.texts(), system.situation]
        )
        tool_tokens = header_tokens(self.provider, model, tools=tools)
        return _Composed(
            commit=commit,
            system=system,
            tools=tuple(tools),
            rendered=rendered,
            profile=profile,
            estimate=estimate,
            system_tokens=min(system_tokens, estimate),
            tool_tokens=min(tool_tokens, max(0, estimate - system_tokens)),
        )

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
        tokens = self._fuse(session, head, composed.estimate)
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

    # -- measurements --------------------------------------------------------------------

    def _request_estimate(self, session: str, answer: Call) -> int:
        """Our estimate of the request that produced ``answer``: as recorded by ``record``,
        else computed once (an imported answer) and remembered."""
        req = answer.metadata.get("request")
        if isinstance(req, Mapping) and isinstance(req.get("estimate"), int):
            return int(req["estimate"])
        if answer.id not in self._estimates:
            request = request_for(self.store, session, answer.id, config=self.pipeline)
            info = self.store.get_session(session)
            model, options = self._defaults(request)
            rendered = render(
                request.commit,
                self.provider,
                model,
                system=self._system(
                    session, request.commit, info.metadata, request.sent_at
                ).texts(),
                **options,
            )
            self._estimates[answer.id] = estimate_request(rendered, self.provider).input_tokens
        return self._estimates[answer.id]

    def _last_measurement(self, session: str, head: str) -> tuple[Call, int] | None:
        """The newest answer at or before ``head`` on its branch whose request the provider
        measured, and that measurement (within ``MEASUREMENT_LOOKBACK`` nodes)."""
        node: Call | None = self.store.get_node(head)
        for _ in range(MEASUREMENT_LOOKBACK):
            if node is None:
                return None
            if node.metadata.get("compaction") is not None:
                return None  # what was measured before a compaction is not carried now
            if node.role == "assistant" and node.caller is None:
                usage = recorded_usage(self.provider, node.metadata.get("usage"))
                if usage is not None and usage.prompt_tokens > 0:
                    # Paired with our estimate of the request as sent: when the vendor
                    # compacted it, its count of that request is the compaction step's.
                    sent = _sent(usage)
                    return node, sent if sent is not None else usage.prompt_tokens
            node = self.store.get_node(node.predecessor) if node.predecessor else None
        return None

    def _fuse(self, session: str, head: str, estimate: int) -> TokenFigures:
        found = self._last_measurement(session, head)
        if found is None:
            return TokenFigures(estimate=estimate, fused=estimate)
        answer, billed = found
        before = self._request_estimate(session, answer)
        return TokenFigures(
            estimate=estimate,
            fused=max(0, billed + estimate - before),
            measured=billed,
            measured_estimate=before,
            measured_node=answer.id,
        )

    def _measured_at(
        self, session: str, head: str, model: str
    ) -> tuple[int, int, int | None] | None:
        """``(billed, our estimate, the vendor's count of the request as sent when it
        compacted it)`` when ``head`` is still described by a measurement:
        the head is an answer with usage under ``model``, or only answers without usage
        follow the last one that had it, and no tool result came back since."""
        node: Call | None = self.store.get_node(head)
        if node is not None and self.store.children(node.id, session_id=session, edge="caller"):
            return None  # tool results came back since: the next request carries them
        while node is not None and node.role == "assistant" and node.caller is None:
            usage = recorded_usage(self.provider, node.metadata.get("usage"))
            if usage is not None and usage.prompt_tokens > 0:
                if node.name and model and not _same_model(node.name, model):
                    return None  # the model changed: the measurement says nothing now
                return usage.prompt_tokens, self._request_estimate(session, node), _sent(usage)
            if node.metadata.get("usage") is not None:
                return None
            node = self.store.get_node(node.predecessor) if node.predecessor else None
        return None

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


def _sent(usage: Usage) -> int | None:
    """The vendor's count of a request as it was sent, when the vendor compacted it on
    its side (``Usage.compaction``); ``None`` otherwise (the billed prompt is that)."""
    step = usage.compaction
    return step.prompt_tokens if step is not None and step.prompt_tokens > 0 else None


def _same_model(a: str, b: str) -> bool:
    """Whether two model names name the same model (a dated id and its alias match)."""
    return a == b or a.startswith(b + "-") or b.startswith(a + "-")


def resolve_model_ok(provider: Provider, model: str) -> bool:
    """Whether ``model`` resolves for ``provider`` (a recorded name we can count) and is
    not a model of another family (``model_in_family``), which ``render`` refuses."""
    if model_in_family(model, provider.family or provider.name) is False:
        return False
    try:
        resolve_model(f"{provider.family or provider.name}:{model}")
    except Exception:
        return False
    return True


def _finite(now: object) -> float:
    import math

    if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
        raise ValidationError(
            f"now must be a finite number of seconds since the epoch, got {now!r}",
            where="now",
            hint="pass now=time.time() for the current time",
        )
    return float(now)
