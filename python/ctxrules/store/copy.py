"""Copying sessions and commits from one store to another (``ctxrules store copy``).

Works between any two ``CommitStore``s (SQLite, PostgreSQL, memory) through the
Protocol alone.  Nodes and commits are content under an id: the copy adds what the
destination lacks, checks that what it has under the same id is the same, and refuses
(before writing anything) where it is not.  A session the destination has already
must hold a prefix of the source's nodes, at the same ``seq``; the missing tail is
appended.  HEAD and metadata, which are a session's state rather than content, are
set to the source's.  A session row's ``created_at`` is the time of the copy.

A fork sees its base up to the seq the base had when it was forked, so a base's nodes
are written up to each fork point, the fork is created, and the base goes on: the
destination's forks see exactly what the source's see.  Nodes are written one
transaction per session (or per stretch between fork points), commits in batches,
so a copy that stops half-way leaves whole sessions, and running it again finishes it.
Afterwards every node and commit of the source is read back from the destination and
compared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from ..errors import NotFoundError, StoreError
from ..model import Node
from .base import CommitRow, CommitStore, SessionInfo

__all__ = ["CopyReport", "copy_store"]

#: Commit rows put per transaction.
_COMMIT_BATCH = 500
#: Session fields that never change once the session exists.
_FIXED = ("source", "import_key", "base_session", "base_node", "base_seq")


class CopyReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``copy_store`` did: sessions of the source and how many it created in the
    destination, nodes and commits written, and how many of each it verified there."""

    sessions: int
    created: int
    nodes_copied: int
    commits_copied: int
    nodes_verified: int
    commits_verified: int


def _conflict(what: str, dst: CommitStore) -> StoreError:
    return StoreError(
        f"{what}; nothing was copied",
        where=dst.location,
        hint="ids are content: copy into another store, or find out which store is right",
    )


def _ordered(sessions: list[SessionInfo]) -> list[SessionInfo]:
    """Bases before their forks (then the source's order)."""
    by_id = {s.id: s for s in sessions}
    out: list[SessionInfo] = []
    done: set[str] = set()

    def visit(s: SessionInfo) -> None:
        if s.id in done:
            return
        done.add(s.id)
        if s.base_session in by_id:
            visit(by_id[s.base_session])
        out.append(s)

    for s in sessions:
        visit(s)
    return out


def _dst_session(dst: CommitStore, sid: str) -> SessionInfo | None:
    try:
        return dst.get_session(sid)
    except NotFoundError:
        return None


class _Copy:
    def __init__(self, src: CommitStore, dst: CommitStore):
        self.src, self.dst = src, dst
        self.sessions = _ordered(src.list_sessions())
        self.forks: dict[str, list[SessionInfo]] = {}
        for s in self.sessions:
            if s.base_session is not None:
                self.forks.setdefault(s.base_session, []).append(s)
        self.dst_empty = not dst.list_sessions()
        #: What ``check_session`` found per session: how many of its nodes the
        #: destination has (``None``: not the session itself).
        self.have: dict[str, int | None] = {}
        self.nodes_copied = self.commits_copied = self.created = 0

    # -- checks (read only) ------------------------------------------------------------
    def check_session(self, s: SessionInfo, nodes: list[Node]) -> None:
        """Note in ``have`` how many of ``s``'s nodes the destination has (``None``: not
        the session); ``StoreError`` if what it has differs or the rest cannot be added
        as they are in the source."""
        dst, have = self.dst, _dst_session(self.dst, s.id)
        if have is None:
            other = s.import_key and dst.find_session(s.import_key)
            if other:
                raise _conflict(
                    f"import key {s.import_key!r} belongs to session {other.id!r} in the "
                    f"destination, to {s.id!r} in the source",
                    dst,
                )
            if not self.dst_empty:
                for n in nodes:
                    try:
                        taken = dst.get_node(n.id)
                    except NotFoundError:
                        continue
                    raise _conflict(
                        f"node {n.id!r} is in session {taken.session_id!r} of the "
                        f"destination, in {s.id!r} of the source",
                        dst,
                    )
            self.have[s.id] = None
            return
        for field in _FIXED:
            if getattr(have, field) != getattr(s, field):
                raise _conflict(
                    f"session {s.id!r} has another {field} in the destination "
                    f"({getattr(have, field)!r}, not {getattr(s, field)!r})",
                    dst,
                )
        theirs = dst.nodes(s.id)
        for mine, stored in zip(nodes, theirs):
            if mine != stored:
                raise _conflict(
                    f"session {s.id!r} holds node {stored.id!r} at seq {stored.seq} in the "
                    f"destination where the source has {mine.id!r}"
                    + (" with other content" if mine.id == stored.id else ""),
                    dst,
                )
        if len(theirs) < len(nodes):
            # A fork the destination lacks must be made where the base had its seq.
            for fork in self.forks.get(s.id, []):
                last = s.base_seq + len(theirs)
                if fork.base_seq < last and _dst_session(dst, fork.id) is None:
                    raise _conflict(
                        f"fork {fork.id!r} saw {s.id!r} up to seq {fork.base_seq}, but the "
                        f"destination's {s.id!r} is at seq {last} already",
                        dst,
                    )
        self.have[s.id] = min(len(theirs), len(nodes))

    def check_commits(self, s: SessionInfo) -> list[CommitRow]:
        """The source's commits of ``s`` the destination lacks; ``StoreError`` if one it
        has under the same id differs."""
        theirs = {r.id: r for r in self.dst.session_commits(s.id)}
        missing = []
        for row in self.src.session_commits(s.id):
            stored = theirs.get(row.id)
            if stored is None:
                missing.append(row)
            elif stored != row:
                raise _conflict(f"commit {row.id!r} differs in the destination", self.dst)
        return missing

    # -- writes --------------------------------------------------------------------------
    def write_session(self, s: SessionInfo, tick: Callable[[], None]) -> None:
        """Write ``s`` (its missing nodes, around its forks), then its forks; what the
        destination had is what ``check_session`` found before anything was written."""
        nodes = self.src.nodes(s.id)
        have = self.have[s.id]
        forks = sorted(self.forks.get(s.id, []), key=lambda f: f.base_seq)
        cuts = [f.base_seq - s.base_seq for f in forks] + [len(nodes)]
        done = have or 0
        if have is None:
            first = cuts[0] if forks else len(nodes)
            self.dst.create_session(
                session_id=s.id,
                source=s.source,
                import_key=s.import_key,
                metadata=s.metadata,
                base_session=s.base_session,
                base_node=s.base_node,
                nodes=nodes[:first],
            )
            self.created += 1
            self.nodes_copied += first
            done = first
        for fork, cut in zip([*forks, None], cuts):
            if cut > done:
                self._append(s.id, nodes[done:cut])
                done = cut
            if fork is not None:
                self.write_session(fork, tick)
        self._sync_state(s)
        tick()

    def _append(self, sid: str, nodes: list[Node]) -> None:
        with self.dst.transaction():
            for n in nodes:
                stored = self.dst.append(sid, n)
                if stored.seq != n.seq:  # another writer appended meanwhile: undo all
                    raise _conflict(
                        f"session {sid!r} grew in the destination while copying "
                        f"(node {n.id!r} would get seq {stored.seq}, not {n.seq})",
                        self.dst,
                    )
        self.nodes_copied += len(nodes)

    def _sync_state(self, s: SessionInfo) -> None:
        have = self.dst.get_session(s.id)
        if have.metadata != s.metadata:
            patch: dict[str, Any] = {k: None for k in have.metadata if k not in s.metadata}
            self.dst.update_metadata(s.id, {**patch, **s.metadata})
        if have.head != s.head:
            self.dst.set_head(s.id, s.head)

    def write_commits(self, rows: Iterable[CommitRow]) -> None:
        """Put ``rows``, each after its parent."""
        pending = {r.id: r for r in rows}
        ordered: list[CommitRow] = []

        def visit(row: CommitRow) -> None:
            if pending.pop(row.id, None) is None:
                return
            if row.parent_id in pending:
                visit(pending[row.parent_id])
            ordered.append(row)

        while pending:
            visit(next(iter(pending.values())))
        for start in range(0, len(ordered), _COMMIT_BATCH):
            with self.dst.transaction():
                for row in ordered[start : start + _COMMIT_BATCH]:
                    self.dst.put_commit(row)
        self.commits_copied += len(ordered)

    # -- verification ------------------------------------------------------------------
    def verify(self) -> tuple[int, int]:
        """Read every source node and commit back from the destination; their counts."""
        counts = {"node": 0, "commit": 0}
        for s in self.sessions:
            for kind, mine, theirs in (
                ("node", self.src.nodes(s.id), self.dst.nodes(s.id)),
                ("commit", self.src.session_commits(s.id), self.dst.session_commits(s.id)),
            ):
                stored: dict[str, Any] = {x.id: x for x in theirs}
                for x in mine:
                    if stored.get(x.id) != x:
                        raise StoreError(
                            f"verification failed: {kind} {x.id!r} of session {s.id!r} "
                            "is not the same in the destination",
                            where=self.dst.location,
                        )
                    counts[kind] += 1
        return counts["node"], counts["commit"]


def copy_store(
    src: CommitStore,
    dst: CommitStore,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> CopyReport:
    """Copy every session (nodes, HEAD, metadata) and commit of ``src`` into ``dst``,
    then verify them there (see the module docstring).

    Idempotent: a second run writes nothing.  ``StoreError``, with nothing written, if
    ``dst`` holds different content under an id of ``src`` or a session it cannot
    extend as it is in ``src``.  ``progress(done, total)`` is called after each
    session (and once at the start with ``done=0``).
    """
    job = _Copy(src, dst)
    total = len(job.sessions)
    commits: list[CommitRow] = []
    for s in job.sessions:  # everything is checked before anything is written
        job.check_session(s, src.nodes(s.id))
        commits.extend(job.check_commits(s))
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(0, total)
    for s in job.sessions:
        if s.base_session is None:  # forks are written with their base
            job.write_session(s, tick)
    job.write_commits(commits)
    nodes, rows = job.verify()
    return CopyReport(
        sessions=total,
        created=job.created,
        nodes_copied=job.nodes_copied,
        commits_copied=job.commits_copied,
        nodes_verified=nodes,
        commits_verified=rows,
    )
