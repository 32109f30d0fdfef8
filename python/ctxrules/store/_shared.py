"""What every backend checks and computes the same way, so the SQLite and the in-memory
store accept, refuse and answer alike: the node write check, edge and ``reads`` checks,
fork visibility, the run guard's liveness and the commit row checks."""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Callable, Collection
from typing import Any

import msgspec

from ..errors import AgentRunActiveError, DagError, NotFoundError, StoreError, ValidationError
from ..limits import check_node
from ..model import Node
from .base import CommitRow, RunInfo

__all__ = [
    "check_commit_row",
    "check_edges",
    "check_reads",
    "check_same_commit",
    "continuing",
    "decode_node",
    "fork_chain",
    "is_visible_in",
    "live_run",
    "merged_metadata",
    "missing_parent",
    "no_store",
    "node_body",
    "not_found",
    "take_run",
    "unknown_keys",
]

_json_decoder = msgspec.json.Decoder(Node)


#: What reading a stored value that was damaged on disk raises (bytes flipped inside a
#: page decode to garbage that SQLite itself does not notice).
DAMAGE = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, ValueError, TypeError)


def damaged(what: str, exc: Exception, location: str) -> StoreError:
    """The one-line error for a stored value that does not read back."""
    return StoreError(
        f"{what} cannot be read back ({type(exc).__name__}: {str(exc)[:200]}): the store is "
        "damaged",
        where=location or None,
        hint="restore it from a backup; `sqlite3 FILE .recover` saves what can still be read",
    )


def decode_node(body: bytes, location: str = "") -> Node:
    """A node from its stored JSON body (``StoreError`` when it does not decode)."""
    try:
        return _json_decoder.decode(body)
    except DAMAGE as exc:
        raise damaged("a stored node", exc, location) from None


def node_body(stored: Node) -> bytes:
    """The JSON body a backend stores for a node; ``ValidationError`` if it is not
    storable (``limits.check_node``: the one write check of every backend)."""
    return check_node(stored)


def continuing(call: Node, head: str | None) -> Node:
    """``call`` appended at HEAD: its predecessor is ``head``; a call with a caller cannot
    continue HEAD (``DagError``)."""
    if call.caller is not None:
        raise DagError(
            f"node {call.id!r} has a caller; it cannot also continue HEAD",
            hint="append tool and sub-LLM calls under their caller, not at HEAD",
        )
    return msgspec.structs.replace(call, predecessor=head)


def check_edges(session_id: str, call: Node, visible: Callable[[str], bool]) -> None:
    """``DagError`` unless both edges of ``call`` name nodes ``visible`` accepts."""
    for edge in (call.predecessor, call.caller):
        if edge is not None and not visible(edge):
            raise DagError(
                f"node {call.id!r} points at {edge!r}, which is not an earlier node "
                f"of session {session_id!r}",
                hint="a predecessor or caller must be an earlier node of the same session",
            )


def check_reads(
    call: Node, exists: Callable[[str], bool], batch: Collection[str] = frozenset()
) -> None:
    """``DagError`` unless every id in ``call.reads`` is stored (or earlier in ``batch``)."""
    for rid in call.reads:
        if rid not in batch and not exists(rid):
            raise DagError(
                f"node {call.id!r} declares it read {rid!r}, which does not exist",
                hint="'reads' may only name stored nodes",
            )


def fork_chain(
    session_id: str, base_of: Callable[[str], tuple[str | None, int] | None]
) -> list[tuple[str, int | None]]:
    """``(session, highest visible seq or None)`` from ``session_id`` down its fork bases.

    ``base_of(sid)`` is the session's ``(base_session, base_seq)``, or ``None`` if it does
    not exist; a fork sees its base's nodes up to the seq the base had when forked.
    """
    chain: list[tuple[str, int | None]] = []
    sid: str | None = session_id
    limit: int | None = None
    while sid is not None:
        base = base_of(sid)
        if base is None:
            break
        chain.append((sid, limit))
        sid, limit = base
    return chain


def is_visible_in(chain: list[tuple[str, int | None]], owner: str, seq: int) -> bool:
    """Whether a node (its owning session and seq) is visible through a ``fork_chain``."""
    for sid, limit in chain:
        if sid == owner:
            return limit is None or seq <= limit
    return False


def live_run(run: RunInfo | None, now: float) -> RunInfo | None:
    """``run`` if it still holds its guard at ``now``: not expired, and its process alive
    when it ran on this host (a crashed agent never locks a session for good)."""
    if run is None or run.expires_at <= now:
        return None
    if run.host == socket.gethostname() and not _pid_alive(run.pid):
        return None
    return run


def take_run(session_id: str, run_id: str, ttl: float, held: RunInfo | None) -> RunInfo:
    """The guard ``run_id`` takes for ``ttl`` seconds where ``held`` is the stored one;
    ``AgentRunActiveError`` naming the holder if another live run holds it."""
    now = time.time()
    live = live_run(held, now)
    if live is not None and live.run_id != run_id:
        raise AgentRunActiveError(
            f"an agent run ({live.run_id}, pid {live.pid} on {live.host}) is active "
            f"on session {session_id!r}",
            hint="wait for it to finish; checkout works meanwhile",
        )
    return RunInfo(
        session_id=session_id,
        run_id=run_id,
        pid=os.getpid(),
        host=socket.gethostname(),
        started_at=now,
        expires_at=now + ttl,
    )


def merged_metadata(meta: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with ``patch`` merged in (a ``None`` value deletes the key)."""
    merged = dict(meta)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_commit_row(row: CommitRow) -> None:
    """``ValidationError`` for a row no reader could use (a non-finite time, an empty id)."""
    if not isinstance(row.created_at, (int, float)) or not math.isfinite(row.created_at):
        raise ValidationError(
            f"commit {row.id!r}: created_at must be a finite number, got {row.created_at!r}",
            where=f"session {row.session_id}",
            hint="pass now= as finite seconds since the epoch",
        )
    for name in ("id", "session_id", "head_node_id", "rules_version"):
        if not getattr(row, name):
            raise ValidationError(f"commit row field {name!r} is empty", where=row.id or "?")


def check_same_commit(stored: CommitRow, row: CommitRow, location: str) -> None:
    """``StoreError`` unless ``row`` is the row already stored under its id.

    Ids are content hashes, so the same id means the same row; a difference means a
    writer computed the id wrongly, and dropping either row silently would hide it.
    """
    if stored != row:
        diff = [f for f in row.__struct_fields__ if getattr(stored, f) != getattr(row, f)]
        raise StoreError(
            f"commit {row.id!r} is stored already with different content "
            f"({', '.join(diff)} differ)",
            where=location,
            hint="commit ids are content hashes: the writer that made this row is inconsistent",
        )


_LISTS = {
    "session": "`ctxrules sessions` lists the sessions of this store",
    "node": "`ctxrules log SESSION` lists node ids",
    "commit": "`ctxrules commit SESSION --json` shows the current commit's id",
}


def not_found(kind: str, ident: str, location: str) -> NotFoundError:
    """The error for a session, node or commit id the store does not hold."""
    return NotFoundError(f"no {kind} {ident!r}", where=location, hint=_LISTS[kind])


def no_store(location: str, what: str) -> StoreError:
    """The error for a location that holds no store where one must exist already."""
    return StoreError(
        what,
        where=location,
        hint="`ctxrules import FILE --store PATH` creates a store and imports into it; "
        "check the path, --store and $CTXRULES_STORE",
    )


def missing_parent(row: CommitRow, location: str) -> StoreError:
    """The error for a row whose parent commit is not stored."""
    return StoreError(
        f"commit {row.id!r} names parent {row.parent_id!r}, which is not stored",
        where=location,
        hint="store a commit's parent before the commit",
    )


def unknown_keys(spec: dict[str, Any], allowed: Collection[str]) -> None:
    """``TypeError`` for keyword arguments ``create_session`` does not take."""
    unknown = set(spec) - set(allowed)
    if unknown:  # what a keyword-only signature would have refused
        raise TypeError(f"create_session() got unexpected arguments {sorted(unknown)}")
