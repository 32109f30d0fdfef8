"""One recorded session replayed request by request, with no rules and under a rule set.

The session's branch (``dag.branch_path``: the conversation and the tool calls the model
saw) is rebuilt node by node in two fresh in-memory stores, each node with its recorded
id, time, content and metadata.  At every point where the agent made a request — before
each recorded answer, and at the end when the recording holds the response to a last
request (a cassette) — each store's ``Engine.prepare`` builds the request, so the
thresholds, the budget and compaction act as they would live; then the recorded answer
is appended as the answer.  One store runs with no rules and no automatic compaction
(``plain``: what the agent sent), the other under the rule set (``rules``; an empty
rule set, such as the ``off`` preset, compacts no more than the plain one).

Recorded usage measured the request the agent sent, which the plain replay rebuilds:
each answer carries the plain estimate of its request as the estimate its usage pairs
with (``Engine`` usage fusion), so under the rules the engine's figure is the rules'
own estimate plus what the vendor counted beyond the plain estimate — never the size
of the unreduced request.  Each request is sent to the model that answered it
(``Engine.prepare(model=...)``, when that model has prices; else the session's), so the
rules are priced at that model's cache and the bill at its prices.

What the engine is set up with comes from the recording: the provider (``provider``,
else the one the session was recorded for, else the one whose models the session
used), the model, the tool declarations and parameters (``render.session_defaults``,
as ``ctxrules render --for`` sends them).  Nothing comes from the machine replaying:
no context sources (instruction files, git status, date) and no ``@path`` references;
the recorded system prompt is in the history as a system node, so it is not added
again.  ``now`` for the rules is when each request was sent (``replay.sent_time``).

A harness may send text its transcript does not hold (Claude Code records neither its
own system prompt nor its tool schemas).  For a session whose recording holds neither,
as in ``replay.compare_usage``, that constant prefix is estimated once, from the first
request with recorded usage (recorded prompt minus the plain estimate, at least 0),
and added to every request of both replays, cached like the rest.

Each request is estimated once, by the core, with its body (``Engine.prepare``); the
accounting reads that estimate (``TurnPrep.request.estimate``), with the harness
prefix added in the core, and the cache rules read it there too.

Where the requests are and what the recording says of them is ``batch.requests``.
``replay_session`` returns one plain record (its keys: docs/rerender.md); the same data
and options always give the same record.  A session that fails part way keeps what
was measured up to the failure: its record has the figures of the requests replayed
before it, with ``error`` saying why and ``failed_at`` which request it was.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

import msgspec

from .. import dag
from ..commit import Generated, Pipeline, is_boundary, persist, reason_rules, rule_savings
from ..commit._chain_check import ChainChecker
from ..commit.invariants import InvariantViolation, check_promises
from ..compaction import boundaries
from ..config import PipelineConfig
from ..context_sources import SourcesConfig
from ..engine import EngineConfig, TurnPrep
from ..errors import CtxrulesError, ValidationError
from ..model import ContextCommit, Node, content_text
from ..providers import (
    ModelProfile,
    Provider,
    Usage,
    get_provider,
    model_in_family,
)
from ..providers.estimate import Estimate
from ..quality import assess
from ..quality.needed import RecallReport, session_recalls
from ..render import check_model, estimate_request, recorded_request, session_defaults
from ..store import MemoryStore
from ..store.memory import SharedNodes
from ._recording import ReplayEngine
from .requests import RequestPoint, SessionData, family_provider, render_provider, request_points

__all__ = [
    "LOST_SHOWN",
    "Bill",
    "ReplayOptions",
    "Replayed",
    "check_options",
    "recall_figures",
    "replay_detail",
    "replay_session",
]

#: No context source reads the replaying machine: the recording holds what was sent.
_NO_SOURCES = SourcesConfig(git_status=False, instruction_files=False, date=False)


class ReplayOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The plain settings of a replay, the same for every session (what crosses into a
    worker): the rule configuration as ``PipelineConfig`` fields, and the provider and
    model to render for (``None``: each session's own)."""

    config: dict[str, Any]
    provider: str | None = None
    model: str | None = None
    #: ``EngineConfig`` fields the rules replay is set up with besides the recording's
    #: (the thresholds, ``auto_compact``, ``compaction`` …): a compaction policy.
    engine: dict[str, Any] = {}

    @classmethod
    def of(
        cls,
        config: PipelineConfig,
        *,
        provider: str | None = None,
        model: str | None = None,
        engine: dict[str, Any] | None = None,
    ) -> ReplayOptions:
        """The options of a ``PipelineConfig``, the provider / model to render for and
        the engine settings of the rules replay."""
        fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        fields["rules"] = {k: dict(v) for k, v in config.rules.items()}
        return cls(config=fields, provider=provider, model=model, engine=dict(engine or {}))

    def pipeline_config(self) -> PipelineConfig:
        """The ``PipelineConfig`` these options name."""
        data = dict(self.config)
        for key in ("pipeline", "anchor_skip", "anchor_skip_patterns"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return PipelineConfig(**data)


# -- one replay ----------------------------------------------------------------------


class Bill:
    """The running bill of a sequence of requests to one provider: prompt tokens, the
    predicted cache reads and writes from each request to the next (the provider's
    cache rules, the recorded time between them) and the cost at each request's prices.

    ``input_cost`` is the prompt's part of ``cost`` (uncached input, cache reads at
    their discount, cache writes at their premium): what a context policy changes.
    Costs are ``None`` once a request's model has no prices.  The provider caches per
    model: a request reads what the last request to its own model left, while that
    entry lives (the recorded time since it), whatever other models were asked since."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self.prompt = self.read = self.write = 0
        self.cost: float | None = 0.0
        self.input_cost: float | None = 0.0
        #: The live entry per model: the last request sent to it and when (``None``:
        #: requests whose model is not known, taken as the previous request's).
        self._entries: dict[str | None, tuple[Estimate, float]] = {}
        self._model: str | None = None

    def add(
        self,
        est: Estimate,
        profile: ModelProfile,
        now: float,
        output_tokens: int,
        model: str | None = None,
    ) -> None:
        """Add a request whose billed prompt is ``est``, sent at ``now`` to ``model``
        (``None``: not known, taken as the previous request's), priced with ``profile``,
        answered with ``output_tokens``."""
        key = self._model if model is None else model
        if key is not None and self._model is None and None in self._entries:
            # The requests so far named no model: taken as this one's.
            self._entries.setdefault(key, self._entries.pop(None))
        # A cache is per model: a return to a model reads its own last entry, if alive
        # (``predict_cache`` takes the time since it), not what another model was sent.
        entry = self._entries.get(key)
        before, elapsed = (None, None) if entry is None else (entry[0], max(0.0, now - entry[1]))
        cache = self.provider.predict_cache(before, est, elapsed=elapsed, profile=profile)
        self._entries[key] = (est, now)
        self._model = key
        self.prompt += est.input_tokens
        self.read += cache.read_tokens
        self.write += cache.write_tokens
        usage = Usage(
            input_tokens=max(0, est.input_tokens - cache.read_tokens - cache.write_tokens),
            cache_read_tokens=cache.read_tokens,
            cache_write_tokens=cache.write_tokens,
            output_tokens=output_tokens,
        )
        self.cost = _add_cost(self.cost, profile.cost(usage))
        prompt_only = msgspec.structs.replace(usage, output_tokens=0)
        self.input_cost = _add_cost(self.input_cost, profile.cost(prompt_only))


#: Commits each replay's store keeps loaded (``commit.persist.keep``); a longer session
#: rebuilds the older ones, each from its parent, loaded just before.
_KEPT_COMMITS = 256


class _Track:
    """One of the two replays of a session: its store, engine and running figures."""

    def __init__(
        self,
        data: SessionData,
        pipeline: Pipeline,
        config: EngineConfig,
        provider: Provider,
        shared: SharedNodes,
        *,
        in_memory: bool = False,
    ):
        # The replay's two stores hold the same recorded nodes: each decoded and
        # checked once for both (none of the replay's readers changes a node).
        self.store = MemoryStore(shared_nodes=shared)
        # The check of every commit at the end (``violations``) loads them in order:
        # kept, they are the engine's own objects, not rebuilt from their deltas.
        persist.keep(self.store, _KEPT_COMMITS)
        # The recorded system prompt is the history's first node (docs/sessions.md):
        # the engine would send the metadata's copy as well.
        meta = {k: v for k, v in data.metadata.items() if k != "system"}
        self.store.create_session(session_id=data.id, metadata=meta)
        self.session = data.id
        self.pipeline = pipeline
        self.provider = provider
        # Each commit planned from what the replay appended (``_recording``); the plain
        # replay's, which nothing but the replay reads, kept in memory, never stored.
        self.engine = ReplayEngine(self.store, config, pipeline=pipeline, stored=not in_memory)
        self.preps: list[TurnPrep] = []
        self.prompt_recorded = self.items = self.body = self.degraded = 0
        self.bill = Bill(provider)
        self.levels: Counter[str] = Counter()
        #: Every request accounted: (point, prep, prefix, output tokens, priced as).
        self.accounted: list[tuple[RequestPoint, TurnPrep, int, int, str | None]] = []
        self._nodes: dict[str, Node] | None = None

    def append(self, node: Node, metadata: dict[str, Any]) -> None:
        """Append a recorded node with ``metadata`` (``_metadata``: the same dict for
        both replays, so the node is checked and encoded once)."""
        stored = dag.append(
            self.store,
            self.session,
            node.role,
            node.output,
            name=node.name,
            input=node.input,
            caller=node.caller,
            reads=node.reads,
            metadata=metadata,
            node_id=node.id,
            created_at=node.created_at,
        )
        self.engine.appended(stored.id)

    def prepare(self, now: float, model: str | None = None) -> TurnPrep:
        """The request due at ``now``, sent to ``model`` (``None``: the engine's choice)."""
        prep = self.engine.prepare(self.session, now=now, model=model)
        self.preps.append(prep)
        return prep

    def account(
        self,
        prep: TurnPrep,
        point: RequestPoint,
        prefix: int,
        output_tokens: int,
        priced_as: str | None = None,
    ) -> None:
        """Add one request's figures: its billed-prompt estimate (with the harness
        prefix), the predicted cache use against the previous request, its cost at the
        prices of ``priced_as`` (the model that answered it; ``None``: the model the
        request was rendered for)."""
        est = estimate_request(prep.request, self.provider, prefix_tokens=prefix)
        # The engine resolved this model to make the request: it resolves here too.
        profile = self.provider.model_profile(prep.model)
        if priced_as is not None:
            profile = _profile(self.provider, priced_as) or profile
        self.bill.add(est, profile, point.now, output_tokens, prep.model)
        self.accounted.append((point, prep, prefix, output_tokens, priced_as))
        if point.usage is not None:
            self.prompt_recorded += est.input_tokens
        self.items += prep.commit.total_tokens
        self.body += len(prep.request.body)
        self.degraded += int(prep.request.meta.get("degraded", 0) or 0)
        self.levels[prep.level] += 1

    def figures(self) -> dict[str, Any]:
        bill = self.bill
        return {
            "prompt_tokens": bill.prompt,
            "prompt_tokens_where_recorded": self.prompt_recorded,
            "item_tokens": self.items,
            "cache_read_tokens": bill.read,
            "cache_write_tokens": bill.write,
            "cost_usd": _round_cost(bill.cost),
            "input_cost_usd": _round_cost(bill.input_cost),
            "body_bytes": self.body,
            "degraded_tool_items": self.degraded,
        }

    def stored_nodes(self) -> dict[str, Node]:
        """The nodes the replay stored, by id, read once (after the replay: they no
        longer change)."""
        if self._nodes is None:
            self._nodes = {n.id: n for n in self.store.nodes(self.session)}
        return self._nodes

    def violations(self) -> list[str]:
        """Every commit the replay stored, checked by the test kit: the invariants and
        tool pairing against its parent (``check_step``) and the rules' promises."""
        nodes = self.stored_nodes()
        # Each commit through what its delta changed; check_step where that proves nothing.
        steps = ChainChecker(self.pipeline, nodes, self.pipeline.tokenizer)
        out: list[str] = []
        for parent, gen in self._commits():
            try:
                steps.check(parent, gen)
                check_promises(gen.commit, self.pipeline, nodes)
            except InvariantViolation as exc:
                out.append(str(exc))
        return out

    def _commits(self) -> Iterator[tuple[ContextCommit | None, Generated]]:
        """Every commit the replay made, in order, with its parent: from memory (the
        plain replay's) or from the store."""
        if not self.engine.stored:
            made = {g.commit.id: g.commit for g in self.engine.generated}
            for gen in self.engine.generated:
                ids = gen.commit.parent_ids
                yield made.get(ids[0]) if ids else None, gen
            return
        for row in self.store.session_commits(self.session):
            commit = persist.load(self.store, row.id)
            parent = persist.load(self.store, row.parent_id) if row.parent_id else None
            yield parent, Generated(commit, row.delta)


def _metadata(node: Node, measured_estimate: int | None) -> dict[str, Any]:
    """A recorded node's metadata as both replays store it: an answer gets
    ``measured_estimate``, our estimate of the request its usage measured (see
    ``_replay``), unless it records one."""
    metadata = dict(node.metadata)
    if measured_estimate is not None and "request" not in metadata:
        metadata["request"] = {"estimate": measured_estimate}
    return metadata


def _profile(provider: Provider, model: str) -> ModelProfile | None:
    try:
        return provider.model_profile(model)
    except CtxrulesError:
        return None


def _add_cost(total: float | None, cost: float | None) -> float | None:
    """A sum of costs that is unknown (``None``) once any part is."""
    return None if total is None or cost is None else total + cost


def _round_cost(cost: float | None) -> float | None:
    # Rounded so the figure prints the same wherever it was summed.
    return None if cost is None else round(cost, 6)


# -- the replay ------------------------------------------------------------------------


class _Setup(NamedTuple):
    pipeline: Pipeline
    plain: Pipeline  # the same options, no rules


_SETUPS: dict[bytes, _Setup] = {}


def _setup(options: ReplayOptions) -> _Setup:
    """The pipelines of ``options``, built once per process."""
    key = msgspec.json.encode(options.config, order="sorted")
    found = _SETUPS.get(key)
    if found is None:
        pipeline = Pipeline.from_config(options.pipeline_config())
        found = _SETUPS[key] = _Setup(pipeline, pipeline.with_rules([]))
    return found


class Replayed(NamedTuple):
    """A replay in detail (``replay_detail``): the record, with every lost fact and a
    row per request in ``rules.quality`` (``requests``: answer, needed, kept, older
    needed, older kept), and each replay's requests as accounted — ``(point, prep,
    harness prefix, output tokens, model priced as)`` — and needed-fact reports."""

    record: dict[str, Any]
    plain: list[tuple[RequestPoint, TurnPrep, int, int, str | None]]
    rules: list[tuple[RequestPoint, TurnPrep, int, int, str | None]]
    plain_recall: RecallReport
    rules_recall: RecallReport
    provider: Provider


def replay_session(data: SessionData, options: ReplayOptions) -> dict[str, Any]:
    """Replay ``data`` (see the module docstring) and return its record; a session that
    cannot be replayed gives a record with ``error`` (and, when it failed part way,
    the figures measured before the failure).  Any exception of the replay is the
    session's error, not the run's: the other sessions go on."""
    setup = _setup(options)
    try:
        return _replay(data, options, setup).record
    except Exception as exc:
        return {"session": data.id, "rules_version": setup.pipeline.version, "error": _why(exc)}


def _why(exc: Exception) -> str:
    """What a failed session's record says: the message of our errors, else the type
    and message of an unexpected one."""
    return str(exc) if isinstance(exc, CtxrulesError) else f"{type(exc).__name__}: {exc}"


def replay_detail(data: SessionData, options: ReplayOptions) -> Replayed:
    """Replay ``data`` like ``replay_session``, keeping the detail (``Replayed``); a
    session that cannot be replayed raises its ``CtxrulesError``."""
    return _replay(data, options, _setup(options), detail=True)


def _replay(
    data: SessionData, options: ReplayOptions, setup: _Setup, *, detail: bool = False
) -> Replayed:
    provider = get_provider(
        render_provider(options.provider, options.model, data.metadata, data.nodes)
    )
    recorded_as = get_provider(recorded_request(data.metadata).provider or provider.name)
    points = request_points(data, recorded_as)
    defaults = session_defaults(
        data.metadata,
        provider,
        used_tools=sorted({n.name for n in data.nodes if n.role == "tool" and n.caller and n.name}),
        answer_model=next((n.name for n in data.nodes if n.role == "assistant" and n.name), None),
        model=options.model,
    ).options
    base = EngineConfig(
        provider=provider.name,
        model=defaults.get("model"),
        tools=tuple(defaults.get("tools", ())),
        max_tokens=defaults.get("max_tokens"),
        extra=dict(defaults.get("extra", {})),
        sources=_NO_SOURCES,
        references=False,
    )
    recording = msgspec.structs.replace(base, auto_compact=False, emergency_compact=False)
    shared = SharedNodes()
    plain = _Track(data, setup.plain, recording, provider, shared, in_memory=True)
    # With no rules the replay is the recording: the engine does not compact either
    # (the recording holds the agent's own compactions), so ``off`` changes nothing,
    # unless the options set a compaction policy.
    chosen = base if setup.pipeline.rules or options.engine else recording
    if options.engine:
        chosen = msgspec.convert({**msgspec.to_builtins(chosen), **options.engine}, EngineConfig)
    rules = _Track(data, setup.pipeline, chosen, provider, shared)
    rec = recorded_request(data.metadata)
    first_recorded = (
        next((k for k, p in enumerate(points) if p.usage is not None), None)
        if rec.system is None and rec.tools is None
        else None  # the recording holds the whole request: no harness text to add
    )
    prefix: int | None = 0 if first_recorded is None else None
    waiting: list[tuple[TurnPrep, TurnPrep, RequestPoint, int]] = []
    recorded = {"requests": 0, "prompt_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0}
    recorded_cost: float | None = 0.0
    output = 0
    measured: dict[int, int] = {}
    k = 0
    failed: Exception | None = None
    try:
        for i in range(len(data.nodes) + 1):
            while k < len(points) and points[k].index == i:
                point = points[k]
                # Sent to the model that answered it, so the rules are priced at its cache.
                sent_to = _priced_as(point, provider, options.model)
                p, r = plain.prepare(point.now, sent_to), rules.prepare(point.now, sent_to)
                out_tokens = _output_tokens(point, r.model, provider)
                output += out_tokens
                if point.usage is not None:
                    recorded["requests"] += 1
                    recorded["prompt_tokens"] += point.usage.prompt_tokens
                    recorded["cache_read_tokens"] += point.usage.cache_read_tokens
                    recorded["cache_write_tokens"] += point.usage.cache_write_tokens
                    model = point.answer.name if point.answer is not None else ""
                    profile = _profile(recorded_as, model or p.model)
                    recorded_cost = _add_cost(
                        recorded_cost, profile.cost(point.usage) if profile is not None else None
                    )
                if prefix is None and k == first_recorded and point.usage is not None:
                    prefix = max(0, point.usage.prompt_tokens - p.tokens.estimate)
                waiting.append((p, r, point, out_tokens))
                if prefix is not None:
                    for wp, wr, wpoint, wout in waiting:
                        priced = _priced_as(wpoint, provider, options.model)
                        plain.account(wp, wpoint, prefix, wout, priced)
                        rules.account(wr, wpoint, prefix, wout, priced)
                    waiting.clear()
                # The recorded usage measured the request the agent sent, which the plain
                # replay rebuilds: both replays pair it with the plain estimate, so the
                # engine's fused figure under the rules is the rules' estimate plus what the
                # vendor counted beyond ours (the harness's text), never the unreduced size.
                measured[i] = p.tokens.estimate
                k += 1
            if i < len(data.nodes):
                metadata = _metadata(data.nodes[i], measured.get(i))
                plain.append(data.nodes[i], metadata)
                rules.append(data.nodes[i], metadata)
    except Exception as exc:
        if detail:
            raise
        failed = exc
        # Requests prepared in both replays before the failure count (with no harness
        # prefix, when none could be worked out yet); a half-made one does not.
        n = min(len(plain.preps), len(rules.preps))
        del plain.preps[n:], rules.preps[n:]
        for wp, wr, wpoint, wout in waiting:
            if wp in plain.preps and wr in rules.preps:
                priced = _priced_as(wpoint, provider, options.model)
                plain.account(wp, wpoint, prefix or 0, wout, priced)
                rules.account(wr, wpoint, prefix or 0, wout, priced)
    memo: dict[bytes, str] = {}  # every message's text, read once (recall, checks)
    plain_recall, rules_recall = _recall(data, [plain, rules], points, memo)
    record = _record(
        data,
        options,
        setup,
        provider,
        plain,
        rules,
        recorded,
        recorded_cost,
        output,
        prefix or 0,
    )
    record["plain"]["quality"] = recall_figures(plain_recall, lost=0)
    record["rules"]["quality"] = {
        **recall_figures(rules_recall, lost=None if detail else LOST_SHOWN),
        "checks": _checks(rules, plain, setup, memo) if rules.preps else None,
    }
    if detail:
        record["rules"]["quality"]["requests"] = [
            [r.answer, r.needed, r.kept, r.older_needed, r.older_kept]
            for r in rules_recall.requests
        ]
    if failed is not None:
        record.update(error=_why(failed), failed_at=k)
    return Replayed(record, plain.accounted, rules.accounted, plain_recall, rules_recall, provider)


#: The lost facts a record lists (``lost_count`` counts them all; ``replay_detail`` and
#: ``ctxrules quality`` list every one).
LOST_SHOWN = 20


def _recall(
    data: SessionData, tracks: list[_Track], points: list[RequestPoint], memo: dict[bytes, str]
) -> list[RecallReport]:
    """Needed-fact recall of each replay's requests (``ctxrules.quality.needed``), in one
    walk of the branch."""
    bodies = [
        {
            point.answer.id: prep.request.body
            for point, prep in zip(points, track.preps)
            if point.answer is not None
        }
        for track in tracks
    ]
    return session_recalls(data.id, data.nodes, bodies, memo=memo)


def _share(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def recall_figures(report: RecallReport, *, lost: int | None = LOST_SHOWN) -> dict[str, Any]:
    """A ``RecallReport`` as a record's plain figures: the counts, the two recalls and
    the first ``lost`` lost facts (``None``: all; ``0``: none) with ``lost_count``."""
    out: dict[str, Any] = {
        "needed": report.needed,
        "kept": report.kept,
        "recall": _share(report.recall),
        "older_needed": report.older_needed,
        "older_kept": report.older_kept,
        "older_recall": _share(report.older_recall),
    }
    if lost != 0:
        shown = report.lost if lost is None else report.lost[:lost]
        out["lost_count"] = len(report.lost)
        out["lost"] = [
            {
                "text": f.text,
                "kind": f.kind,
                "source": f.source,
                "needed_by": f.needed_by,
                "older": f.older,
            }
            for f in shown
        ]
    return out


def _priced_as(point: RequestPoint, provider: Provider, model: str | None) -> str | None:
    """The model a request is priced at: the one that answered it, as recorded, when the
    replay renders each session for its own models (no ``model`` option) and the name
    belongs to the provider's family; ``None``: the model it was rendered for."""
    name = point.answer.name if point.answer is not None else ""
    if model or not name or model_in_family(name, provider.model_family) is False:
        return None
    profile = _profile(provider, name)
    return name if profile is not None and profile.prices is not None else None


def _output_tokens(point: RequestPoint, model: str, provider: Provider) -> int:
    """The answer's output tokens: as recorded, else our count of its text."""
    if point.output_tokens is not None:
        return point.output_tokens
    if point.answer is None:
        return 0
    profile = _profile(provider, model)
    text = content_text(point.answer.output)
    return profile.estimate_tokens([text]) if profile is not None and text else 0


def _record(
    data: SessionData,
    options: ReplayOptions,
    setup: _Setup,
    provider: Provider,
    plain: _Track,
    rules: _Track,
    recorded: dict[str, int],
    recorded_cost: float | None,
    output: int,
    prefix: int,
) -> dict[str, Any]:
    plain_fig, rules_fig = plain.figures(), rules.figures()
    saved: Counter[str] = Counter()
    if plain.preps:
        reasons = reason_rules(rules.store, data.id)
        for before, prep in zip(plain.preps, rules.preps):
            # Against the plain request made at the same point: what it shows of each
            # item (a recorded compaction folds some and adds a summary there too).
            full = {
                it.source_node_id: 0 if it.state == "summarized" else it.tokens
                for it in before.commit.items
            }
            saved.update(rule_savings(prep.commit, full, reasons))
    recorded_boundaries = sum(1 for n in data.nodes if n.caller is None and is_boundary(n))
    rules_fig.update(
        saved_by_rule={k: v for k, v in sorted(saved.items()) if v},
        compactions=len(boundaries(rules.store, data.id)) - recorded_boundaries,
        levels=dict(sorted(rules.levels.items())),
    )
    violations = plain.violations() + rules.violations()
    last = rules.preps[-1] if rules.preps else None
    return {
        "session": data.id,
        "format": str(data.metadata.get("format") or ""),
        "provider": provider.name,
        "model": last.model if last is not None else "",
        "rules_version": setup.pipeline.version,
        "requests": len(rules.preps),
        "harness_prefix_tokens": prefix,
        "output_tokens": output,
        "recorded": {**recorded, "cost_usd": _round_cost(recorded_cost)},
        "recorded_compactions": recorded_boundaries,
        "plain": plain_fig,
        "rules": rules_fig,
        "violations": violations,
    }


def _checks(rules: _Track, plain: _Track, setup: _Setup, memo: dict[bytes, str]) -> dict[str, Any]:
    """The second line of quality: the key facts of the folded history (task statement,
    constraints, identifiers, files, todos; ``ctxrules.quality.assess``) found in the
    last request under the rules, where the rules have folded the most."""
    prep = rules.preps[-1]
    commit = prep.commit
    nodes = rules.stored_nodes()
    branch = dag.branch_path(rules.store, rules.session, commit.head_node_id)
    report = assess(
        commit,
        nodes,
        branch,
        body=prep.request.body,
        baseline_tokens=plain.preps[-1].commit.total_tokens,
        provider=prep.provider,
        model=prep.model,
        anchor_skip=setup.pipeline.anchor_skip,
        memo=memo,
    )
    return {
        "found": report.found,
        "total": report.total,
        "share": round(report.found / report.total, 4) if report.total else None,
        "folded_nodes": report.folded_nodes,
        "retained_ratio": round(report.retained_ratio, 4),
    }


def check_options(options: ReplayOptions) -> None:
    """Build the pipeline and check the provider and model of ``options`` before any
    work is handed out: a bad rule, parameter, provider or model is one error here
    rather than one per session."""
    _setup(options)
    if options.provider:
        get_provider(options.provider)
    if options.model:
        name = options.provider or family_provider(options.model)
        if name is None:
            raise ValidationError(
                f"no provider's models include {options.model!r}",
                where="--model",
                hint="name the provider too (--provider)",
            )
        check_model(get_provider(name), options.model)
