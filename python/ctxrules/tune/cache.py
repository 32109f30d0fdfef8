"""The cache of measured settings in ``--out``: a second run measures only what is new.

One JSON file per measurement under ``OUT/cache/``, named by the SHA-256 of what
decides its figures: the setting, the rules version of the whole configuration (every
rule with its version and every parameter value, so a change of the base config or a
rule's behaviour misses), the inputs' content hash, the sessions measured, the
provider and model, and the ctxrules version.  A file is written whole (to a
temporary name, then renamed), so an interrupted run leaves no half entry; an entry
that does not decode is measured again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from ..outfiles import io_error
from ..store import open_store
from .results import SessionMetrics

__all__ = ["ResultCache", "inputs_hash"]


def inputs_hash(sources: Sequence[str], is_store: Any, format: str = "auto") -> str:
    """A SHA-256 of the sources' content, in the order given (and of the importer that
    reads the transcripts, when one is forced: another ``format`` reads other sessions).

    A transcript file counts by its bytes (a folder by every non-hidden file under it,
    sorted, as the importers read it); a store (``is_store(source)``) by the ids of
    its sessions and of their nodes (append-only content under an id).
    """
    h = hashlib.sha256()
    if format != "auto":
        h.update(f"format {format}\n".encode())
    for source in sources:
        if is_store(source):
            store = open_store(source, create=False)
            try:
                for info in store.list_sessions():
                    h.update(f"session {info.id}\n".encode())
                    for node in store.iter_nodes(info.id):
                        h.update(f"{node.id}\n".encode())
            finally:
                store.close()
            continue
        path = Path(source)
        files = (
            sorted(
                (f for f in path.rglob("*") if f.is_file() and not _hidden(f, path)),
                key=lambda f: f.relative_to(path).parts,
            )
            if path.is_dir()
            else [path]
        )
        for f in files:
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _hidden(f: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in f.relative_to(root).parts)


class ResultCache:
    """Measurements stored under ``folder`` (created when first written)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    @staticmethod
    def key(**material: Any) -> str:
        """The entry name for ``material`` (JSON-encodable, order of keys irrelevant)."""
        body = msgspec.json.encode(material, order="sorted")
        return hashlib.sha256(body).hexdigest()

    def get(self, key: str) -> list[SessionMetrics] | None:
        """The measurement stored under ``key``, if any."""
        try:
            data = (self.folder / f"{key}.json").read_bytes()
            return msgspec.json.decode(data, type=list[SessionMetrics])
        except (OSError, msgspec.DecodeError):
            return None  # missing, unreadable or damaged: measured again

    def put(self, key: str, metrics: Sequence[SessionMetrics]) -> None:
        """Store a measurement under ``key``, atomically."""
        final = self.folder / f"{key}.json"
        tmp = final.with_name(f".{key}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(msgspec.json.encode(list(metrics)))
            tmp.replace(final)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise io_error(exc, final, "store a measurement in the cache") from None
