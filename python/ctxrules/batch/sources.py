"""The sessions a rerender reads: stores, and transcripts imported on the fly.

A SOURCE is a store — a ``postgresql://`` URL, ``memory:NAME``, a SQLite file or a
directory holding one (``ctxrules.db``) — or transcript files and folders, which are
imported together into one private in-memory store (``importers.import_report``: the
same session ids an import into any store gives them; ``format`` forces an importer,
and the files of a folder no importer reads are listed in ``Sources.skipped`` with
why).  ``exclude`` leaves sessions out, named by id or by the transcript file they
came from.  Sessions are read from the
stores in the main process, one at a time as they are handed out
(``Sources.data``), so a worker never opens a store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec

from ..errors import NotFoundError, ValidationError
from ..importers import Skipped, import_report
from ..store import DB_NAME, MEMORY_PREFIX, POSTGRES_PREFIXES, CommitStore, MemoryStore, open_store
from .requests import session_data

__all__ = ["Sources", "is_store", "open_sources"]

_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_store(source: str) -> bool:
    """Whether ``source`` names a store rather than transcripts (see the module docstring)."""
    if source.startswith((MEMORY_PREFIX, *POSTGRES_PREFIXES)):
        return True
    path = Path(source)
    if path.is_dir():
        return (path / DB_NAME).is_file()
    try:
        with path.open("rb") as fh:
            return fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


class Sources:
    """The opened SOURCEs: which store holds each session, sessions sorted by id."""

    def __init__(
        self, stores: list[CommitStore], where: dict[str, int], every: frozenset[str] = frozenset()
    ):
        self._stores = stores
        self._where = where
        self._every = every or frozenset(where)
        #: The files of the transcript folders that no importer reads, and why.
        self.skipped: list[Skipped] = []
        #: The sessions ``exclude`` left out, by id.
        self.excluded: list[str] = []

    @property
    def session_ids(self) -> list[str]:
        """Every session of every source, sorted by id (the order of the results)."""
        return sorted(self._where)

    def holds(self, session_id: str) -> bool:
        """Whether any source holds the session (chosen by ``sessions`` or not)."""
        return session_id in self._every

    def data(self, session_id: str) -> bytes:
        """The session as a worker receives it (``SessionData``, MessagePack)."""
        store = self._stores[self._where[session_id]]
        return msgspec.msgpack.encode(session_data(store, session_id))

    def close(self) -> None:
        """Close every store opened."""
        for store in self._stores:
            store.close()


class _Exclusions:
    """The ``exclude`` entries: session ids, or transcript files (matched resolved)."""

    def __init__(self, entries: Sequence[str]):
        self.entries = list(entries)
        self.files = {str(Path(e).resolve()): e for e in entries if Path(e).exists()}
        self.used: set[str] = set()
        self.dropped: list[str] = []

    def drops(self, session_id: str, source: str) -> bool:
        hit = session_id if session_id in self.entries else self.files.get(source)
        if hit is None and source:
            hit = self.files.get(str(Path(source).resolve()))
        if hit is None:
            return False
        self.used.add(hit)
        self.dropped.append(session_id)
        return True

    def check(self) -> None:
        unused = [e for e in self.entries if e not in self.used]
        if unused:
            raise NotFoundError(
                f"--exclude-session {unused[0]!r} names no session of the sources",
                where="--exclude-session",
                hint="give a full session id (`ctxrules sessions` lists a store's) or a "
                "transcript file among the sources",
            )


@contextlib.contextmanager
def open_sources(
    sources: Sequence[str],
    *,
    sessions: Sequence[str] = (),
    format: str = "auto",
    exclude: Sequence[str] = (),
) -> Iterator[Sources]:
    """Open every SOURCE (stores read as they are; transcripts imported into a private
    memory store with the importer ``format``), closed when the block ends.

    ``sessions`` keeps only those sessions (full ids); ``exclude`` leaves out the
    sessions it names, by id or by transcript file (each entry must name one).  A SOURCE
    that does not exist, a store that cannot be opened and a transcript no importer
    reads are errors naming it; so is a session found in two SOURCEs.
    """
    if not sources:
        raise ValidationError("no SOURCE given", hint="name a store or transcript files")
    stores: list[CommitStore] = []
    names: list[str] = []
    try:
        transcripts: list[str] = []
        skipped: list[Skipped] = []
        for source in sources:
            if is_store(source):
                stores.append(open_store(source, create=False))
                names.append(source)
            elif Path(source).exists():
                transcripts.append(source)
            else:
                raise ValidationError(
                    "no such file, folder or store",
                    where=source,
                    hint="give a store (a directory or .db file, postgresql://…) or "
                    "transcript files and folders",
                )
        if transcripts:
            memory = MemoryStore()
            stores.append(memory)
            names.append(", ".join(transcripts))
            skipped = import_report(memory, transcripts, format=format).skipped
        where: dict[str, int] = {}
        out = _Exclusions(exclude)
        for i, store in enumerate(stores):
            for info in store.list_sessions():
                if out.drops(info.id, info.source):
                    continue
                if info.id in where:
                    raise ValidationError(
                        f"session {info.id} is in two sources: {names[where[info.id]]} "
                        f"and {names[i]}",
                        where=names[i],
                        hint="rerender each source on its own",
                    )
                where[info.id] = i
        for sid in sessions:
            if sid not in where:
                raise NotFoundError(
                    f"no session {sid!r} in the sources",
                    where="--session",
                    hint="give full session ids (`ctxrules sessions` lists a store's)",
                )
        every = frozenset(where)
        if sessions:
            where = {sid: where[sid] for sid in sessions}
        out.check()
        src = Sources(stores, where, every)
        src.skipped, src.excluded = skipped, out.dropped
        yield src
    finally:
        for store in stores:
            store.close()
