"""``compact``: one compaction of a session, whatever started it.

Manual, partial (``from`` / ``up_to`` a pivot), automatic (a threshold) and reactive
(the provider refused the prompt as too long) compactions are the same flow with a
different ``trigger``:

1. the commit at HEAD (``make_commit``) and its size (``tokens_before``);
2. the ``pre_compact`` hooks (their text joins the instructions);
3. the summary: the boundary node is built in memory and a commit derived over it
   (``ctxrules.commit.boundary`` folds; the summary request is answered through the
   store's kept answers, else the summarizer — ``run_summarizer`` retries it and
   budgets its input);
4. the restore message (``ctxrules.compaction.restore``) and the ``session_start``
   hooks' text;
5. the size after (``tokens_after``), derived with the final boundary and restore node;
6. both nodes appended in one transaction (refused if HEAD moved meanwhile), the
   commit at the new HEAD stored (its summary comes from the record: no second call);
7. the ``post_compact`` hooks.

The boundary node is final when it is appended (the graph is append-only), which is
why steps 3–5 derive before anything is stored.  Nothing is written unless the
compaction succeeds, except its failure: a summary that failed or came back empty,
nothing to fold, or a summary that leaves the request no smaller (the restore message
is bounded on its own by ``RestoreLimits``) raises ``CompactionError`` after
recording it in the session metadata (``compaction_failures``, the last ten) — and
nothing of the history is folded or lost.  Tokens are the billed-prompt estimate of
the request for ``provider`` / ``model`` (``ctxrules.render.estimate_request``), or the
commit's item tokens without a provider.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

import msgspec

from ..commit import (
    Answer,
    Compaction,
    Pipeline,
    derive_with_summaries,
    make_commit,
    persist,
    stored_answers,
)
from ..commit.boundary import COMPACTION_KEY, RESTORE_KEY, STEP
from ..commit.items import find_native
from ..config import PipelineConfig
from ..dag import branch_path
from ..errors import (
    CompactionDeclined,
    CompactionError,
    ConfigError,
    DagError,
    NotFoundError,
    PluginError,
    ValidationError,
)
from ..model import ContextCommit, Node
from ..plugins import call_hook, registry
from ..providers import Provider, get_provider
from ..render import estimate_request, render, session_defaults
from ..requests import session_tool_names
from ..store import CommitStore
from ..summarizers import SummaryRequest, SummaryResult, run_summarizer
from .restore import compose_restore
from .types import (
    CompactOptions,
    CompactResult,
    PostCompactEvent,
    PreCompactEvent,
    Restored,
    SessionStartEvent,
)

__all__ = ["FAILURES_KEY", "compact", "failures"]

#: Session metadata key of the recorded failed compactions (the last ``KEPT_FAILURES``).
FAILURES_KEY = "compaction_failures"
KEPT_FAILURES = 10
_MANUAL = ("manual", "partial", "auto", "reactive")


class _Measure:
    """How the request's size is measured: the billed-prompt estimate of the request a
    provider would be sent (the session's recorded defaults, as ``render`` sends them),
    or the commit's item tokens."""

    def __init__(
        self,
        store: CommitStore,
        session_id: str,
        provider: str | Provider | None,
        model: str | None,
    ):
        self.provider = get_provider(provider) if isinstance(provider, str) else provider
        self.defaults: dict[str, Any] = {}
        self.model = model
        if self.provider is not None:
            info = store.get_session(session_id)
            self.defaults = session_defaults(
                info.metadata,
                self.provider,
                used_tools=session_tool_names(store, session_id),
                model=model,
            ).options
            self.model = self.defaults.pop("model", None)
        self.label = "items"

    def __call__(self, commit: ContextCommit) -> int:
        if self.provider is None:
            return commit.total_tokens
        rendered = render(commit, self.provider, self.model, **self.defaults)
        self.label = f"{self.provider.name}:{rendered.model}"
        return estimate_request(rendered, self.provider).input_tokens


def _check(trigger: str | None, direction: str, pivot: str | None, summarizer: str) -> str:
    if direction not in ("full", "from", "up_to"):
        raise ValidationError(
            f"unknown compaction direction {direction!r}",
            where="direction",
            hint="full, from or up_to",
        )
    if (direction == "full") != (pivot is None):
        raise ValidationError(
            "a pivot goes with direction 'from' or 'up_to', and only with them",
            where="pivot",
        )
    chosen = trigger or ("manual" if direction == "full" else "partial")
    if chosen not in _MANUAL:
        raise ValidationError(
            f"unknown compaction trigger {chosen!r}", where="trigger", hint=", ".join(_MANUAL)
        )
    if (chosen == "partial") != (direction != "full"):
        raise ValidationError(
            f"trigger {chosen!r} does not go with direction {direction!r}",
            where="trigger",
            hint="a partial compaction has a pivot; the others fold in full",
        )
    known = registry("summarizers")
    if summarizer not in known:
        raise ConfigError(
            f"no summarizer named {summarizer!r}",
            where="CompactOptions.summarizer",
            hint=f"installed: {', '.join(known.names()) or 'none'}",
        )
    return chosen


def _record_failure(
    store: CommitStore, session_id: str, now: float, trigger: str, error: str
) -> None:
    kept = list(store.get_session(session_id).metadata.get(FAILURES_KEY) or [])
    kept.append({"at": now, "trigger": trigger, "error": error})
    store.update_metadata(session_id, {FAILURES_KEY: kept[-KEPT_FAILURES:]})


def failures(store: CommitStore, session_id: str) -> list[dict[str, Any]]:
    """The session's recorded failed compactions, oldest first (the last ten):
    ``{"at", "trigger", "error"}``."""
    raw = store.get_session(session_id).metadata.get(FAILURES_KEY)
    return [dict(f) for f in raw] if isinstance(raw, list) else []


def compact(
    store: CommitStore,
    session_id: str,
    *,
    now: float,
    trigger: str | None = None,
    direction: str = "full",
    pivot: str | None = None,
    instructions: str = "",
    config: PipelineConfig | Pipeline | None = None,
    options: CompactOptions | None = None,
    provider: str | Provider | None = None,
    model: str | None = None,
    working_directory: str | os.PathLike[str] | None = None,
    answer: Answer | None = None,
    min_saving_tokens: int = 0,
) -> CompactResult:
    """Compact ``session_id`` at its HEAD; returns the stored compaction.

    ``trigger``: ``"manual"`` (default for a full compaction), ``"partial"`` (default
    with a pivot), ``"auto"`` or ``"reactive"``.  ``direction`` ``"full"``, or
    ``"from"`` / ``"up_to"`` with ``pivot`` (a node the commit at HEAD shows).
    ``instructions`` guide the summary.  ``now`` is the clock the commits are made at
    and the boundary's time.  ``config`` is the rule configuration (default
    ``find_config()``), ``options`` how to summarise and restore, ``provider`` /
    ``model`` what the tokens are measured for (default: the commit's item tokens),
    ``working_directory`` where restored files are re-read from, ``answer`` the
    summary answer function (default ``run_summarizer``; the store's kept answers are
    asked first either way).  ``min_saving_tokens`` > 0 asks the compaction to leave
    the request (restore message included) at least that many tokens smaller, else
    ``CompactionDeclined`` and nothing is stored or recorded (what the engine asks
    for a compaction to pay for its cache rewrite).

    ``CompactionError`` when the summary failed or was empty, nothing could be folded
    or the fold leaves the request no smaller (recorded: ``failures``); ``DagError``
    for an empty session, a pivot the commit does not show, or a HEAD that moved
    during the compaction; ``ValidationError`` / ``ConfigError`` for bad arguments.
    Only success changes the history.
    """
    opts = options or CompactOptions()
    chosen = _check(trigger, direction, pivot, opts.summarizer)
    pipeline = config if isinstance(config, Pipeline) else Pipeline.from_config(config)
    wd = os.fspath(working_directory) if working_directory is not None else None
    info = store.get_session(session_id)
    head = info.head
    if head is None:
        raise DagError(f"session {session_id!r} has no nodes: nothing to compact")
    if pivot is not None and not store.is_visible(session_id, pivot):
        raise DagError(
            f"node {pivot!r} is not part of session {session_id!r}",
            hint="`ctxrules log SESSION` lists its nodes",
        )
    ask = _Asker(stored_answers(store, answer or run_summarizer))
    before = make_commit(session_id, head, now=now, store=store, config=pipeline, answer=answer)
    measure = _Measure(store, session_id, provider, model)
    tokens_before = measure(before)
    if pivot is not None:
        _check_pivot(session_id, before, pivot)
    extra = call_hook(
        "pre_compact",
        PreCompactEvent(
            session_id=session_id,
            head=head,
            trigger=chosen,
            direction=direction,
            pivot=pivot,
            instructions=instructions,
            tokens_before=tokens_before,
            working_directory=wd,
        ),
    )
    said = [instructions.strip()] + [t.strip() for t in extra if isinstance(t, str)]
    record = Compaction(
        trigger=chosen,  # type: ignore[arg-type]  # checked by _check
        direction=direction,  # type: ignore[arg-type]
        pivot=pivot,
        instructions="\n\n".join(t for t in said if t),
        tokens_before=tokens_before,
        measured=measure.label,
        previous=head,
        summarizer=opts.summarizer,
        budget=opts.summary_budget_tokens,
        timeout_seconds=opts.timeout_seconds,
        keep_tail_tokens=opts.keep_tail_tokens,
    )
    boundary = Node(
        id=_node_id(store, session_id, head, record, now, "boundary"),
        seq=0,
        created_at=now,
        role="system",
        predecessor=head,
        metadata={COMPACTION_KEY: record.to_metadata()},
    )

    def derive(calls: list[Node]) -> ContextCommit:
        return derive_with_summaries(
            before,
            calls,
            session_id=session_id,
            head_node_id=calls[-1].id,
            pipeline=pipeline,
            now=now,
            load_commit=lambda cid: _load(store, cid),
            answer=ask,
        ).commit

    def fail(error: str) -> CompactionError:
        _record_failure(store, session_id, now, chosen, error)
        return CompactionError(
            f"compaction failed, nothing was folded or stored: {error}",
            where=f"session {session_id} at {head}",
            hint="see the notes; `ctxrules compact --instructions` or another summarizer may help",
        )

    folded = derive([boundary])
    summary = _summary_item(folded, boundary.id)
    if summary is None:
        raise fail(ask.problem() or _step_note(folded, boundary.id) or "nothing to fold")
    # The fold itself must make the request smaller; the restore message then adds back
    # what it restores, within its own limits.
    tokens_folded = measure(folded)
    if tokens_folded >= tokens_before:
        raise fail(
            f"the summary leaves the request at {tokens_folded:,} tokens, not fewer than the "
            f"{tokens_before:,} before"
        )
    record = msgspec.structs.replace(
        record,
        summary=summary.rendered,
        folded_items=sum(1 for it in folded.items if it.merged_into == summary.source_node_id),
    )
    hook_texts = call_hook(
        "session_start",
        SessionStartEvent(
            session_id=session_id, source="compact", boundary=boundary.id, working_directory=wd
        ),
    )
    text, restored = compose_restore(
        branch_path(store, session_id, head),
        folded,
        metadata=info.metadata,
        limits=opts.restore,
        counter=pipeline.tokenizer,
        working_directory=wd,
        hook_texts=[t for t in hook_texts if isinstance(t, str)],
    )
    boundary = _with_record(boundary, record)
    nodes = [boundary]
    if text:
        nodes.append(
            Node(
                id=_node_id(store, session_id, head, record, now, "restore"),
                seq=0,
                created_at=now,
                role="user",
                output=text,
                predecessor=boundary.id,
                metadata={RESTORE_KEY: {"boundary": boundary.id, **msgspec.to_builtins(restored)}},
            )
        )
    tokens_after = measure(derive(nodes))
    if min_saving_tokens > 0 and tokens_before - tokens_after < min_saving_tokens:
        saved = tokens_before - tokens_after
        raise CompactionDeclined(
            f"not compacted: it would leave the request no smaller ({tokens_before:,} → "
            f"{tokens_after:,} tokens with the restore message)"
            if saved <= 0
            else f"not compacted: it would take {saved:,} tokens off the request "
            f"({tokens_before:,} → {tokens_after:,}), less than the {min_saving_tokens:,} "
            "that pay for rewriting the cached prompt",
            where=f"session {session_id} at {head}",
        )
    record = msgspec.structs.replace(record, tokens_after=tokens_after)
    nodes[0] = boundary = _with_record(boundary, record)
    # The boundary, the restore message, HEAD and the commit land in one transaction:
    # a failure at any step (a full disk at the commit) leaves none of them.
    with store.transaction():
        _append(store, session_id, head, nodes)
        commit = make_commit(session_id, None, now=now, store=store, config=pipeline, answer=answer)
    result = CompactResult(
        session_id=session_id,
        boundary=boundary.id,
        restore=nodes[1].id if len(nodes) > 1 else None,
        commit=commit.id,
        record=record,
        restored=restored if text else Restored(),
        notes=tuple(n for n in commit.notes if n.startswith(f"{STEP}: ")),
    )
    try:
        call_hook("post_compact", PostCompactEvent(result=result))
    except PluginError as exc:  # the compaction is stored: report, do not pretend it failed
        result = msgspec.structs.replace(result, notes=(*result.notes, f"post_compact: {exc}"))
    return result


class _Asker:
    """The answer function of a compaction's derives; remembers what the boundary's own
    summary request got, to say why a compaction failed."""

    def __init__(self, answer: Callable[[SummaryRequest], SummaryResult]):
        self.answer = answer
        self.results: list[SummaryResult] = []

    def __call__(self, request: SummaryRequest) -> SummaryResult:
        result = self.answer(request)
        if request.rule == STEP:
            self.results.append(result)
        return result

    def problem(self) -> str:
        for r in reversed(self.results):
            if r.timed_out:
                return "the summarizer timed out"
            if r.error:
                return f"the summarizer failed: {r.error}"
            if not r.text.strip():
                return "the summarizer returned nothing"
        return ""


def _load(store: CommitStore, commit_id: str) -> ContextCommit | None:
    try:
        return persist.load(store, commit_id)
    except Exception:  # an unloadable attach source degrades to one item
        return None


def _summary_item(commit: ContextCommit, boundary_id: str) -> Any:
    return next(
        (
            it
            for it in commit.items
            if it.state == "summary" and it.reason.endswith(f":{boundary_id}")
        ),
        None,
    )


def _step_note(commit: ContextCommit, boundary_id: str) -> str:
    for note in commit.notes:
        if note.startswith(f"{STEP}: boundary {boundary_id}"):
            return note.split(": ", 2)[-1]
    return ""


def _with_record(boundary: Node, record: Compaction) -> Node:
    return msgspec.structs.replace(
        boundary, metadata={**boundary.metadata, COMPACTION_KEY: record.to_metadata()}
    )


def _check_pivot(session_id: str, commit: ContextCommit, pivot: str) -> None:
    pos = find_native(commit.items, pivot)
    if pos < 0 or commit.items[pos].state == "summarized":
        raise DagError(
            f"the pivot {pivot} is not shown in the commit at HEAD (it is folded already, or "
            "not on the current branch)",
            where=f"session {session_id}",
            hint="pick a node the current request still shows in full or compressed",
        )


def _node_id(
    store: CommitStore, session_id: str, head: str, record: Compaction, now: float, part: str
) -> str:
    """The id of a compaction's boundary or restore node: a digest of what it compacts
    (session, HEAD, the record as asked, the time), so the same compaction replayed gives
    the same nodes and commits (``ctxrules rerender`` output is byte-identical run to
    run).  The same compaction asked again at that HEAD (after checking it out again)
    gets the next free digest."""
    for attempt in range(1000):
        content = msgspec.json.encode([session_id, head, record.to_metadata(), now, part, attempt])
        node_id = f"n_{hashlib.blake2b(content, digest_size=14).hexdigest()}"
        try:
            store.get_node(node_id)
        except NotFoundError:
            return node_id
    raise CompactionError(f"no free node id for the compaction at {head}", where=session_id)


def _append(store: CommitStore, session_id: str, head: str, nodes: list[Node]) -> None:
    """Append the boundary (and restore) node at ``head`` in one transaction."""
    with store.transaction():
        now_head = store.get_session(session_id).head
        if now_head != head:
            raise DagError(
                f"HEAD moved from {head} to {now_head} while compacting; nothing was stored",
                where=f"session {session_id}",
                hint="compact again",
            )
        for node in nodes:
            store.append(session_id, node, set_head=True)
