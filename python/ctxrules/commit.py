"""ContextCommits: the immutable snapshot of the model input at a head (SPEC §3).

``ensure_latest_commit(session, head)`` finds the nearest commit on the head's ancestor
chain (``_commit_plan``: an indexed lookup per node walked back, so the cost is the
number of nodes since that commit, not the history length).  If it is for this head it is returned;
otherwise ``generate_commit`` derives a new one from it.

``derive_commit`` is the pure heart: parent commit + new nodes + rules + ``now`` →
new commit.  It copies the parent's item list (a pointer copy: unchanged items are the
same objects, never re-rendered and never recounted), turns the new nodes into
``full`` items, runs the pipeline through a ``RuleContext`` and counts the tokens of
every new or changed item in one batch with the Rust counter's content cache.

A commit's id is a hash of its parent id, its head, its rules and the *delta* it makes
against its parent (Merkle style), so identical inputs give the identical id and the id
never needs the whole item list re-hashed.  The store keeps that delta, not the list.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from . import _commit_store as cstore
from ._commit_items import attach_items, attach_ref, find_native, item_for_call
from ._commit_plan import Plan
from ._commit_plan import plan as plan_commit
from .config import PipelineConfig, find_config
from .errors import RuleError
from .model import Call, ContextCommit, ContextItem
from .rules.base import Rule, RuleContext
from .store import SessionInfo, Store
from .tokenizers import get_tokenizer

__all__ = [
    "CommitDiff",
    "Generated",
    "Pipeline",
    "derive_commit",
    "diff_commits",
    "ensure_latest_commit",
    "generate_commit",
    "load_commit",
    "rules_version",
]

#: Cursor keys that survive a change of rules (they describe the items, not a rule).
_STICKY = ("anchor", "attach:")
#: Cursor keys describing the graph a commit was made from; each commit sets its own.
_MARKS = ("seq:", "variants:")


def rules_version(rules: Sequence[Rule], *, encoding: str, anchor_task: bool) -> str:
    """The id of a rule set: a hash of every rule's name, version and parameters, in order."""
    text = "\n".join(
        [f"encoding={encoding}", f"anchor_task={anchor_task}"] + [r.signature() for r in rules]
    )
    return "rv_" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Pipeline:
    """Built rules in order plus the options of generation; ``version`` is its ``rules_version``."""

    rules: tuple[Rule, ...]
    encoding: str = "o200k_base"
    anchor_task: bool = True
    version: str = ""

    @classmethod
    def from_config(cls, config: PipelineConfig | None = None) -> Pipeline:
        """Build the pipeline of ``config`` (default: ``find_config()`` from the cwd)."""
        cfg = config if config is not None else find_config()
        rules = tuple(cfg.build())
        return cls(
            rules,
            cfg.encoding,
            cfg.anchor_task,
            rules_version(rules, encoding=cfg.encoding, anchor_task=cfg.anchor_task),
        )

    @classmethod
    def of(
        cls, rules: Sequence[Rule], *, encoding: str = "o200k_base", anchor_task: bool = True
    ) -> Pipeline:
        """A pipeline of already built rules (what the test kit and plugins use)."""
        rules = tuple(rules)
        version = rules_version(rules, encoding=encoding, anchor_task=anchor_task)
        return cls(rules, encoding, anchor_task, version)


class Generated(NamedTuple):
    """A derived commit and its delta against the parent (what the store keeps)."""

    commit: ContextCommit
    delta: bytes


_encoder = msgspec.msgpack.Encoder(order="sorted")


def _place(items: Sequence[ContextItem], call: Call) -> int:
    """Where a new node's item goes: the end, or a tool right after its caller's calls."""
    if call.caller is None:
        return len(items)
    p = find_native(items, call.caller)
    if p < 0:
        return len(items)  # caller absent: a "missing pairing" item, rendered as user text
    p += 1
    while p < len(items) and items[p].role == "tool" and items[p].caller == call.caller:
        p += 1
    return p


def derive_commit(
    parent: ContextCommit | None,
    calls: Sequence[Call],
    *,
    session_id: str,
    head_node_id: str,
    pipeline: Pipeline,
    now: float,
    load_commit: Callable[[str], ContextCommit | None] | None = None,
    marks: Mapping[str, int] | None = None,
) -> Generated:
    """Derive the commit at ``head_node_id``: ``parent`` plus ``calls`` through the pipeline.

    Pure: the same arguments give the same commit, id included.  ``calls`` are the new
    branch nodes in branch order (``dag.branch_path`` order).  ``load_commit`` resolves
    attach pointers.  ``marks`` (e.g. the session's seq watermark) are recorded in the
    cursors so a later generation can tell whether the graph changed under this commit.
    A rule that breaks its contract raises ``RuleError`` naming it.
    """
    items = _working_list(parent)
    cursors = (
        {k: v for k, v in parent.cursors.items() if not k.startswith(_MARKS)}
        if parent is not None
        else {}
    )
    full_pass = parent is not None and parent.rules_version != pipeline.version
    if full_pass:
        cursors = {k: v for k, v in cursors.items() if k.startswith(_STICKY)}
    counter = get_tokenizer(pipeline.encoding)
    new_ids: set[str] = set()
    ctx = RuleContext(
        items,
        now=now,
        cursors=cursors,
        new_ids=new_ids,
        first_new=len(items),
        counter=counter,
        total_tokens=parent.total_tokens if parent is not None else 0,
        full_pass=full_pass,
    )
    for call in calls:
        ref = attach_ref(call)
        if ref is not None:
            key = f"attach:{ref['commit']}"
            if key in cursors:
                continue  # expanded once, however many pointers name it (invariant 6)
            cursors[key] = 1
            new_items = attach_items(call, ref, load_commit, now=now)
        else:
            anchor = pipeline.anchor_task and call.role == "user" and "anchor" not in cursors
            if anchor:
                cursors["anchor"] = 1
            new_items = [item_for_call(call, anchor=anchor, now=now)]
        pos = _place(items, call)
        for it in new_items:
            new_ids.add(it.source_node_id)
            ctx.insert(pos, it)
            pos += 1
    for call in calls:  # a node that declares it read another makes that one "cited"
        for read in call.reads:
            p = find_native(items, read)
            if (
                p >= 0
                and not items[p].locked
                and not items[p].is_anchor
                and (items[p].state != "summarized")
            ):
                ctx.replace(p, is_anchor=True, reason=f"cited_by:{call.id}")
    for rule in pipeline.rules:
        ctx.rule_name = rule.name
        before = len(items) - ctx.inserted_count()
        try:
            rule.apply(ctx)
        except RuleError:
            raise
        except Exception as exc:
            raise RuleError(
                f"rule failed: {type(exc).__name__}: {exc}", where=f"rule {rule.name!r}"
            ) from exc
        if len(items) - ctx.inserted_count() != before:
            raise RuleError(
                "changed the number of items without ctx.insert / ctx.fold "
                "(items are never removed from a commit)",
                where=f"rule {rule.name!r}",
            )
    ctx.rule_name = ""
    if marks:
        cursors.update(marks)
    inserted, changed, folds = ctx.delta()
    summary = parent.summary if parent is not None else ""
    for _, it in changed:
        if it.state == "summary":
            summary = it.rendered
    parent_ids = (parent.id,) if parent is not None else ()
    delta = _encoder.encode((inserted, changed, folds))
    notes = tuple(ctx.notes)
    total = ctx.total_tokens()
    digest = hashlib.blake2b(digest_size=16)
    digest.update(
        _encoder.encode(
            (
                session_id,
                parent_ids,
                head_node_id,
                pipeline.version,
                now,
                total,
                notes,
                summary,
                cursors,
            )
        )
    )
    digest.update(delta)
    commit = ContextCommit(
        id=f"cc_{digest.hexdigest()}",
        session_id=session_id,
        parent_ids=parent_ids,
        created_at=now,
        head_node_id=head_node_id,
        rules_version=pipeline.version,
        total_tokens=total,
        items=tuple(items),
        summary=summary,
        notes=notes,
        cursors=cursors,
    )
    _keep_working_list(commit, items)
    return Generated(commit, delta)


# The list a derive worked on holds exactly the new commit's items.  Handing it to the
# commit's first child saves one of the two O(n) pointer copies a derive makes (the
# other is building the commit's tuple).  It is popped when used, so no two derives
# ever share a list; a second child (a branch) copies the tuple as usual.
_SPARE_LISTS = 4
_spare: OrderedDict[str, list[ContextItem]] = OrderedDict()
_spare_lock = threading.Lock()


def _working_list(parent: ContextCommit | None) -> list[ContextItem]:
    if parent is None:
        return []
    with _spare_lock:
        spare = _spare.pop(parent.id, None)
    n = len(parent.items)
    if spare is not None and len(spare) == n and (n == 0 or spare[-1] is parent.items[-1]):
        return spare
    return list(parent.items)


def _keep_working_list(commit: ContextCommit, items: list[ContextItem]) -> None:
    with _spare_lock:
        _spare[commit.id] = items
        while len(_spare) > _SPARE_LISTS:
            _spare.popitem(last=False)


# -- the store side --------------------------------------------------------------------


def _session_id(session: str | SessionInfo) -> str:
    return session.id if isinstance(session, SessionInfo) else session


@contextlib.contextmanager
def _open(store: Store | None) -> Iterator[Store]:
    """The caller's store, or the default one (``open_store()``), closed after use."""
    if store is not None:
        yield store
        return
    from .store import open_store

    opened = open_store()
    try:
        yield opened
    finally:
        opened.close()


def load_commit(commit_id: str, *, store: Store | None = None) -> ContextCommit:
    """A stored commit by id (``NotFoundError`` if unknown)."""
    with _open(store) as st:
        return cstore.load(st, commit_id)


def generate_commit(
    session: str | SessionInfo,
    head: str | None = None,
    now: float | None = None,
    *,
    store: Store | None = None,
    config: PipelineConfig | Pipeline | None = None,
) -> ContextCommit:
    """Derive and store a new commit at ``head`` (default HEAD) from its nearest ancestor
    commit, even when one exists for this head (then it re-runs the rules at ``now``).

    ``config`` defaults to ``find_config()``; ``now`` to the current time.
    """
    return _commit_at(session, head, now, store, config, reuse=False)


def _commit_at(
    session: str | SessionInfo,
    head: str | None,
    now: float | None,
    store: Store | None,
    config: PipelineConfig | Pipeline | None,
    *,
    reuse: bool,
) -> ContextCommit:
    """Plan the commit at ``head``; return the stored one if ``reuse`` and it is current,
    else derive and store a new one."""
    pipeline = config if isinstance(config, Pipeline) else Pipeline.from_config(config)
    sid = _session_id(session)
    with _open(store) as st:
        planned = plan_commit(st, sid, head, pipeline)
        parent = planned.parent
        if (
            reuse
            and parent is not None
            and not planned.calls
            and parent.head_node_id == planned.head
        ):  # the plan only builds on this session's commits of this rule set
            return parent
        return _derive_and_save(st, planned, pipeline, time.time() if now is None else now)


def _derive_and_save(st: Store, plan: Plan, pipeline: Pipeline, now: float) -> ContextCommit:
    def load_attached(cid: str) -> ContextCommit | None:
        try:
            return cstore.load(st, cid)
        except Exception:
            return None

    gen = derive_commit(
        plan.parent,
        plan.calls,
        session_id=plan.session_id,
        head_node_id=plan.head,
        pipeline=pipeline,
        now=now,
        load_commit=load_attached,
        marks=plan.marks,
    )
    cstore.save(st, gen)
    return gen.commit


def ensure_latest_commit(
    session: str | SessionInfo,
    head: str | None = None,
    now: float | None = None,
    *,
    store: Store | None = None,
    config: PipelineConfig | Pipeline | None = None,
) -> ContextCommit:
    """The commit for ``head`` (default HEAD) under ``config``: the stored one if it is
    current (same head, same calls, same rules, same session), else a new one."""
    return _commit_at(session, head, now, store, config, reuse=True)


# -- diff ------------------------------------------------------------------------------


class CommitDiff(msgspec.Struct, frozen=True, kw_only=True):
    """What changed from commit ``a`` to ``b``.

    Items are matched by ``source_node_id`` (and ``attached_from``).  ``changed`` lists
    ``(id, state in a, state in b)``; ``rewritten`` items kept their state but render
    differently.  ``prefix_items`` / ``prefix_tokens`` measure the leading rendered
    items ``a`` and ``b`` share exactly: what a provider's prompt cache can reuse.
    """

    a: str
    b: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[tuple[str, str, str], ...]
    rewritten: tuple[str, ...]
    prefix_items: int
    prefix_tokens: int
    tokens_a: int
    tokens_b: int


def diff_commits(a: ContextCommit, b: ContextCommit) -> CommitDiff:
    """Diff two commits in Rust: one boundary crossing (both item lists as msgpack)."""
    from . import _core

    added, removed, changed, rewritten, prefix_items, prefix_tokens = _core.diff_items(
        msgspec.msgpack.encode(a.items), msgspec.msgpack.encode(b.items)
    )
    return CommitDiff(
        a=a.id,
        b=b.id,
        added=tuple(added),
        removed=tuple(removed),
        changed=tuple((k, x, y) for k, x, y in changed),
        rewritten=tuple(rewritten),
        prefix_items=prefix_items,
        prefix_tokens=prefix_tokens,
        tokens_a=a.total_tokens,
        tokens_b=b.total_tokens,
    )
