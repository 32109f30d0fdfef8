"""Attach and merge: another branch's context expanded into a session (docs/engine.md).

Both write the same thing into the history graph, an *attach pointer*: a user node
whose metadata names a source session, a head of it and the commit at that head
(``{"attach": {"session", "head", "commit"}}``).  The next commit made over the pointer
expands that commit's items between open and close markers, each marked
``attached_from`` (``ctxrules.commit.items.attach_items``; docs/items.md).

* ``attach`` is passive: it stages one pointer at HEAD and nothing else happens until
  the next request is prepared, which then carries the block.
* ``merge`` is active: one pointer per peer head (the base peer's locked, so the merge
  sees it as its source showed it, never summarised), then the merge instruction, a user
  node naming the peer commits (``{"merge": {"into", "peers", "base"}}``).  The commit at
  the instruction is the merge commit: derived from the target's previous commit, it
  names the peer commits as its further parents (``parent_ids = [target_prev, peer_1,
  …]``), because the instruction node says so — the same graph always gives the same
  commit.  One turn is run on it (``call``, or the caller sends ``prep.body`` and hands
  the answer to ``record_merge``), and the peers' sessions record that their heads were
  merged (session metadata ``merged``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from .. import dag
from ..commit import Pipeline, make_commit
from ..commit.items import ATTACH_KEY, MERGE_KEY, attach_ref
from ..commit.persist import clear_cache
from ..config import PipelineConfig
from ..errors import DagError, ValidationError
from ..limits import check_now
from ..model import Node, ToolUseBlock
from ..store import CommitStore
from .results import Recorded, TurnPrep
from .turn import Engine

__all__ = [
    "MERGED_KEY",
    "MergeResult",
    "Peer",
    "PeerSpec",
    "attach",
    "check_answer",
    "merge",
    "merged_into",
    "record_merge",
]

#: Session metadata key listing where the session's heads were merged.
MERGED_KEY = "merged"

#: A peer as a caller names it: a session id (its HEAD), or ``(session, head)``.
PeerSpec = str | tuple[str, str | None]


class Peer(msgspec.Struct, frozen=True, kw_only=True):
    """One merged head: its session, the conversation node, the commit there, and whether
    it is the base (its block locked)."""

    session: str
    head: str
    commit: str
    base: bool = False


class MergeResult(msgspec.Struct, frozen=True, kw_only=True):
    """What ``merge`` / ``record_merge`` did.

    ``node`` is the merge instruction, ``pointers`` the attach pointers before it (one
    per peer), ``commit`` / ``parent_ids`` the merge commit (the commit at ``node``),
    ``prep`` the turn's request and ``recorded`` its recorded answer (``None``: not
    answered yet — send ``prep.body`` and call ``record_merge``).  With ``dry_run``
    nothing was stored: the ids name nodes and commits that were rolled back.
    """

    target: str
    node: str
    pointers: tuple[str, ...]
    peers: tuple[Peer, ...]
    commit: str
    parent_ids: tuple[str, ...]
    prep: TurnPrep
    recorded: Recorded | None = None
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (what ``ctxrules merge --json`` prints)."""
        rec = self.recorded
        return {
            "target": self.target,
            "node": self.node,
            "pointers": list(self.pointers),
            "peers": [msgspec.to_builtins(p) for p in self.peers],
            "commit": self.commit,
            "parent_ids": list(self.parent_ids),
            "answer": rec.node.id if rec is not None else None,
            "tool_calls": [b.id for b in rec.tool_calls] if rec is not None else [],
            "dry_run": self.dry_run,
        }


# -- checks ------------------------------------------------------------------------------


def _conversation_node(store: CommitStore, node_id: str) -> Node:
    """The node a head shows through: a call (a tool node) is shown under its caller."""
    node = store.get_node(node_id)
    while node.caller is not None:
        node = store.get_node(node.caller)
    return node


def _source_head(store: CommitStore, session: str, head: str | None) -> tuple[str, str]:
    """``(session id, conversation node)`` of a source head (``head``: an id or unique
    prefix; default HEAD); ``DagError`` if the session is empty or the node is not part
    of it."""
    info = store.get_session(session)
    if head is None and info.head is None:
        raise DagError(
            f"session {session!r} has no nodes: there is nothing to attach",
            hint="name a session with history",
        )
    node = dag.resolve_node(store, info.id, head) if head is not None else None
    return info.id, _conversation_node(store, node.id if node else str(info.head)).id


def _check_off_branch(store: CommitStore, session: str, head: str | None, source: str) -> None:
    """Refuse a source node the session's current branch already holds (HEAD or one of
    its predecessors): attaching it would show the same turns twice."""
    if head is None or not store.is_visible(session, source):
        return  # another session's node, not inherited: never on this branch
    node: Node | None = store.get_node(head)
    while node is not None:
        if node.id == source:
            raise DagError(
                f"node {source} is on the current branch of session {session} already",
                where=f"session {session}",
                hint="attach the head of another branch or session",
            )
        node = store.get_node(node.predecessor) if node.predecessor else None


def _check_no_pending(store: CommitStore, session: str, head: str | None) -> None:
    """Refuse while HEAD is an answer whose tool calls wait for results: their results
    hang under that answer, so nothing may come between them."""
    if head is None:
        return
    node = store.get_node(head)
    calls = {
        b.id
        for b in (node.output if isinstance(node.output, list) else [])
        if isinstance(b, ToolUseBlock)
    }
    if not calls or node.role != "assistant":
        return
    answered = {
        str(c.metadata.get("tool_use_id"))
        for c in store.children(head, session_id=session, edge="caller")
    }
    waiting = sorted(calls - answered)
    if waiting:
        raise DagError(
            f"HEAD {head} has tool calls waiting for results ({', '.join(waiting)})",
            where=f"session {session}",
            hint="hand the results back (Engine.prepare(tool_results=…)) first",
        )


# -- attach ------------------------------------------------------------------------------


def attach(
    store: CommitStore,
    session: str,
    source: str,
    head: str | None = None,
    *,
    locked: bool = False,
    config: PipelineConfig | Pipeline | Engine | None = None,
    now: float,
) -> Node:
    """Stage an attach pointer at ``session``'s HEAD to ``source`` at ``head`` (a node id
    or unique prefix; default its HEAD); returns the pointer node.

    The source's commit is made (or reused) under ``config`` at ``now``, and the pointer
    names it: an ``Engine`` — its rules priced at the model of ``session``'s next
    request (``Engine.next_model``), the request the block is attached for — a
    ``Pipeline`` or ``PipelineConfig`` as given (default ``find_config()``).  Nothing
    else happens now: the next commit of ``session`` — the next ``Engine.prepare`` —
    expands it into a marked block (once, however many pointers name the same commit).
    ``locked`` locks the block against every rule.

    ``NotFoundError`` for an unknown session; ``DagError`` for an empty source, a
    ``head`` outside it or already on ``session``'s current branch, or a HEAD whose tool
    calls still wait for results.  Nothing is stored on error.
    """
    now = check_now(now)
    info = store.get_session(session)
    src, at = _source_head(store, source, head)
    _check_off_branch(store, info.id, info.head, at)
    _check_no_pending(store, info.id, info.head)
    if isinstance(config, Engine):
        config = config.pipeline_for(config.next_model(info.id))
    commit = make_commit(src, at, now=now, store=store, config=config)
    return _append_pointers(store, info.id, info.head, [(src, at, commit.id, locked)], now)[0]


def _pointer(
    session: str, head: str, commit: str, locked: bool, *, predecessor: str | None, now: float
) -> Node:
    metadata: dict[str, Any] = {ATTACH_KEY: {"session": session, "head": head, "commit": commit}}
    if locked:
        metadata["locked"] = True
    return Node(
        id=dag.new_id(),
        seq=0,
        created_at=now,
        role="user",
        output=f"[attach session {session} at {head}]",
        predecessor=predecessor,
        metadata=metadata,
    )


def _append_pointers(
    store: CommitStore,
    session: str,
    head: str | None,
    sources: Sequence[tuple[str, str, str, bool]],
    now: float,
    then: Callable[[str | None], Node] | None = None,
) -> list[Node]:
    """Append one pointer per ``(session, head, commit, locked)`` at ``head`` (and the
    node ``then`` makes after them) in one transaction, refused if HEAD moved."""
    out: list[Node] = []
    with store.transaction():
        now_head = store.get_session(session).head
        if now_head != head:
            raise DagError(
                f"HEAD moved from {head} to {now_head} meanwhile; nothing was stored",
                where=f"session {session}",
                hint="try again",
            )
        prev = head
        for src, at, commit, locked in sources:
            node = store.append(
                session, _pointer(src, at, commit, locked, predecessor=prev, now=now), set_head=True
            )
            out.append(node)
            prev = node.id
        if then is not None:
            out.append(store.append(session, then(prev), set_head=True))
    return out


# -- merge -------------------------------------------------------------------------------


class _DryRun(Exception):
    """Raised inside the store transaction of a dry run so that it rolls back."""

    def __init__(self, result: MergeResult):
        super().__init__("dry run")
        self.result = result


def _peers(
    store: CommitStore, target: str, head: str, peers: Sequence[PeerSpec], base: PeerSpec | None
) -> list[tuple[str, str]]:
    """The peers as ``(session, conversation node)``, the base last; checked."""
    if not peers:
        raise ValidationError("a merge needs at least one peer", where="peers")
    out: list[tuple[str, str]] = []
    for spec in peers:
        session, at = (spec, None) if isinstance(spec, str) else spec
        found = _source_head(store, session, at)
        _check_off_branch(store, target, head, found[1])
        if found in out:
            raise ValidationError(f"peer {found[0]} at {found[1]} is named twice", where="peers")
        out.append(found)
    if base is None:
        return [*out[1:], out[0]]
    session, at = (base, None) if isinstance(base, str) else base
    named = _source_head(store, session, at)
    matches = [p for p in out if p == named or (at is None and p[0] == named[0])]
    if len(matches) != 1:
        raise ValidationError(
            f"the base {base!r} is {'not one' if not matches else 'several'} of the peers",
            where="base",
            hint="name the base as one of the peers, by session (and head if it is ambiguous)",
        )
    out.remove(matches[0])
    return [*out, matches[0]]


def merge(
    engine: Engine,
    target: str,
    peers: Sequence[PeerSpec],
    *,
    instruction: str,
    base: PeerSpec | None = None,
    call: Callable[[TurnPrep], Any] | None = None,
    now: float,
    dry_run: bool = False,
) -> MergeResult:
    """Merge the heads of ``peers`` into ``target`` with one turn of the model.

    ``peers`` are session ids (their HEAD) or ``(session, head)`` pairs; ``base`` (one of
    them, default the first) is attached locked, the others as ordinary items the rules
    may compress.  Each peer's commit is made (or reused) under the engine's pipeline
    priced at the model the merge turn goes to (``Engine.next_model``),
    one pointer per peer — the others in the order given, then the base, next to the
    instruction — and the instruction are appended at ``target``'s HEAD, and the
    request is prepared at the instruction: its commit — the merge commit — has
    ``parent_ids = [target's previous commit, peer commits…]`` in pointer order.

    ``call`` sends the request (it gets the ``TurnPrep`` and returns the response, as
    ``Engine.record`` accepts it); the answer is then recorded and the peers marked
    merged (``record_merge``).  Without ``call`` the merge is left staged: send
    ``result.prep.body`` yourself and hand the response to ``record_merge``.  If
    ``call`` raises, the pointers and the instruction stay in the history (it is
    append-only) and ``Engine.prepare(target, now=…)`` rebuilds the same request.
    With ``dry_run`` everything, commits included, is made inside a store transaction
    that is rolled back: the result shows the request and nothing is stored.

    ``ValidationError`` for an empty instruction, no peers, a peer named twice or a base
    that is not a peer; ``DagError`` for an empty target or peer, a peer on the target's
    current branch or attached there already, a HEAD whose tool calls still wait, or a
    HEAD that moved meanwhile.  On these errors nothing is added to the history (the
    commits of the heads it read may be stored, as any read stores them).
    """
    now = check_now(now)
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValidationError(
            "a merge needs an instruction (what to do with the peers' work)", where="instruction"
        )
    store = engine.store
    info = store.get_session(target)
    if info.head is None:
        raise DagError(
            f"session {target!r} is empty: there is nothing to merge into",
            hint="fork one of the peers and merge the others into it",
        )
    _check_no_pending(store, info.id, info.head)
    heads = _peers(store, info.id, info.head, peers, base)
    if not dry_run:
        result = _stage_and_prepare(engine, info.id, info.head, heads, instruction, now)
        if call is None:
            return result
        return record_merge(engine, result.prep, call(result.prep), now=now)
    try:
        with store.transaction():
            raise _DryRun(_stage_and_prepare(engine, info.id, info.head, heads, instruction, now))
    except _DryRun as rolled_back:
        return msgspec.structs.replace(rolled_back.result, dry_run=True)
    finally:
        clear_cache(store)  # commits loaded inside the transaction are not stored


def _stage_and_prepare(
    engine: Engine,
    target: str,
    head: str,
    heads: list[tuple[str, str]],
    instruction: str,
    now: float,
) -> MergeResult:
    # Every commit of the merge is priced at the model the merge turn goes to, so the
    # turn's commit builds on the target's and the peers' commits made here.
    store, pipeline = engine.store, engine.pipeline_for(engine.next_model(target))
    before = make_commit(target, head, now=now, store=store, config=pipeline)
    peers: list[Peer] = []
    for k, (session, at) in enumerate(heads):
        commit = make_commit(session, at, now=now, store=store, config=pipeline)
        if f"attach:{commit.id}" in before.cursors:
            raise DagError(
                f"the commit {commit.id} of peer {session} at {at} is attached in session "
                f"{target} already (a commit is expanded once)",
                where=f"session {target}",
                hint="merge a later head of that peer, or leave it out",
            )
        if any(p.commit == commit.id for p in peers):
            raise ValidationError(
                f"peers {session} at {at} and another one have the same commit {commit.id}",
                where="peers",
            )
        peers.append(Peer(session=session, head=at, commit=commit.id, base=k == len(heads) - 1))
    record = {
        "into": before.id,
        "base": peers[-1].commit,
        "peers": [{"session": p.session, "head": p.head, "commit": p.commit} for p in peers],
    }

    def instruction_node(prev: str | None) -> Node:
        return Node(
            id=dag.new_id(),
            seq=0,
            created_at=now,
            role="user",
            output=instruction,
            predecessor=prev,
            metadata={MERGE_KEY: record},
        )

    nodes = _append_pointers(
        store,
        target,
        head,
        [(p.session, p.head, p.commit, p.base) for p in peers],
        now,
        then=instruction_node,
    )
    prep = engine.prepare(target, now=now)
    return MergeResult(
        target=target,
        node=nodes[-1].id,
        pointers=tuple(n.id for n in nodes[:-1]),
        peers=tuple(peers),
        commit=prep.commit.id,
        parent_ids=prep.commit.parent_ids,
        prep=prep,
    )


def _merge_turn(store: CommitStore, prep: TurnPrep) -> tuple[Node, list[Node]]:
    """The merge instruction ``prep`` was made for (at its head, or before the nodes
    appended after it in the same turn) and the pointers before it."""
    node: Node | None = store.get_node(prep.head)
    while node is not None and MERGE_KEY not in node.metadata:
        if node.role == "assistant" and node.caller is None:
            node = None
            break
        node = store.get_node(node.predecessor) if node.predecessor else None
    if node is None:
        raise ValidationError(
            f"the request at {prep.head} is not a merge turn's (no merge instruction before it)",
            where=f"session {prep.session_id}",
            hint="pass the TurnPrep that merge() returned",
        )
    pointers: list[Node] = []
    prev = store.get_node(node.predecessor) if node.predecessor else None
    while prev is not None and attach_ref(prev) is not None:
        pointers.append(prev)
        prev = store.get_node(prev.predecessor) if prev.predecessor else None
    pointers.reverse()
    return node, pointers


def check_answer(engine: Engine, response: Any) -> None:
    """Refuse a response no merge can be recorded with: one the engine's provider cannot
    read (``ProviderError``) or that holds no content (``ValidationError``)."""
    if not engine.provider.read_response(response).content:
        raise ValidationError(
            "the answer holds no content: a merge turn needs the model's answer",
            where="response",
            hint=f"pass the {engine.provider.name} response body as the provider returned it",
        )


def record_merge(engine: Engine, prep: TurnPrep, response: Any, *, now: float) -> MergeResult:
    """Record the answer to a merge turn's request and mark the peer heads merged.

    ``prep`` is ``merge(...).prep`` (or a request prepared again at the staged
    instruction), ``response`` the model's answer as ``Engine.record`` takes it.  Each
    peer session's metadata ``merged`` gains ``{"head", "commit", "into", "node",
    "answer", "merge_commit", "base", "at"}`` (once per merge instruction).  If the
    answer calls tools, continue the turn with ``Engine.prepare(tool_results=…)``.
    ``ValidationError`` (nothing recorded) if ``prep`` is not a merge turn's request or
    the answer is empty (``check_answer``).
    """
    now = check_now(now)
    store = engine.store
    node, pointers = _merge_turn(store, prep)
    check_answer(engine, response)
    recorded = engine.record(prep, response, now=now)
    # The merge commit: the one the merge turn's request carried (priced at its model).
    commit = make_commit(
        prep.session_id, node.id, now=now, store=store, config=engine.pipeline_for(prep.model)
    )
    record = node.metadata[MERGE_KEY]
    peers = tuple(
        Peer(
            session=str(p["session"]),
            head=str(p["head"]),
            commit=str(p["commit"]),
            base=p["commit"] == record.get("base"),
        )
        for p in record["peers"]
    )
    for peer in peers:
        entry = {
            "head": peer.head,
            "commit": peer.commit,
            "into": prep.session_id,
            "node": node.id,
            "answer": recorded.node.id,
            "merge_commit": commit.id,
            "base": peer.base,
            "at": now,
        }
        with store.transaction():
            done = merged_into(store, peer.session)
            if not any(e.get("node") == node.id and e.get("head") == peer.head for e in done):
                store.update_metadata(peer.session, {MERGED_KEY: [*done, entry]})
    return MergeResult(
        target=prep.session_id,
        node=node.id,
        pointers=tuple(p.id for p in pointers),
        peers=peers,
        commit=commit.id,
        parent_ids=commit.parent_ids,
        prep=prep,
        recorded=recorded,
    )


def merged_into(store: CommitStore, session: str) -> list[dict[str, Any]]:
    """Where ``session``'s heads were merged, oldest first (its metadata ``merged``)."""
    raw = store.get_session(session).metadata.get(MERGED_KEY)
    return [dict(e) for e in raw if isinstance(e, Mapping)] if isinstance(raw, list) else []
