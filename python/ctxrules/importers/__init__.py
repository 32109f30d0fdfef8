"""Importers: real transcripts (Claude Code, OpenAI, Anthropic, SWE-agent, …) into the DAG.

Importers are a plugin kind: each is registered through the ``register_importers`` hook
(the built-ins too, from ``ctxrules.importers._plugin``) and implements ``Importer``.
``import_paths`` is the one way in: it parses every file first and then writes each
file's sessions in one transaction, so a bad file writes nothing, and re-importing the
same bytes finds the sessions already there instead of duplicating them.

``--format auto`` asks every importer's ``detect`` in registration order and parses
with the first that claims the file; if that parse fails it tries the next claimant,
and the final error names every format it tried.

Before anything is written, every parsed node passes ``limits.check_node`` (the store's
own write check) and every session's metadata ``limits.check_metadata``, so a node the
store would refuse is named by file:line; and one file may store at most
``limits.import_budget(file size)`` bytes, so content repeated by reference cannot
turn a small file into a huge store.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import msgspec

from ..errors import CtxrulesError, DagError, ImportFormatError, ValidationError
from ..limits import IMPORT_EXPANSION, check_metadata, check_node, import_budget
from ..plugins import registry
from ..store import SessionInfo, Store
from ._common import ImportedSession, fail, read_bytes
from ._json import JsonImporter, detached, forget_json

__all__ = [
    "HEAD_BYTES",
    "ImportResult",
    "ImportedSession",
    "Importer",
    "detect_formats",
    "import_paths",
    "parse_file",
    "session_id_for",
]

#: How much of a file ``detect`` sees.
HEAD_BYTES = 64 * 1024


@runtime_checkable
class Importer(Protocol):
    """A transcript format.

    ``detect(path, head)`` answers quickly from the first ``HEAD_BYTES`` (it may parse
    the file; ``_json.load_json`` caches that for ``parse``); ``parse(path)`` returns
    the sessions or raises ``ImportFormatError`` naming file, line and what to do.
    ``auto`` says whether ``--format auto`` may pick this importer.  A format stored
    as one JSON document can subclass ``_json.JsonImporter`` and write only
    ``claims(data)`` and ``sessions(path, data, key)``.
    """

    name: str
    description: str
    auto: bool

    def detect(self, path: str, head: bytes) -> bool: ...

    def parse(self, path: str) -> list[ImportedSession]: ...


class ImportResult(msgspec.Struct, frozen=True, kw_only=True):
    """One session an import produced (or found already imported: ``created=False``)."""

    id: str
    calls: int
    source: str
    format: str
    created: bool


def session_id_for(key: str) -> str:
    """The session id an import key gets (stable: the same file names the same session)."""
    return "s_" + hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


def _importers() -> list[Importer]:
    return list(registry("importers").items.values())


def detect_formats(path: str) -> list[str]:
    """Names of the auto-detectable importers that claim the file, in trial order."""
    return _detect(path)[0]


def _detect(path: str) -> tuple[list[str], list[ImportFormatError]]:
    # The claimants, and what the detectors that failed said (a JSON detector meeting a
    # broken JSON file raises "bad JSON at line N": the reason to show if none claims it).
    head = read_bytes(path, HEAD_BYTES)
    found: list[str] = []
    errors: list[ImportFormatError] = []
    for imp in _importers():
        if not getattr(imp, "auto", True):
            continue
        try:
            if imp.detect(path, head):
                found.append(imp.name)
        except ImportFormatError as exc:
            errors.append(detached(exc))
        except CtxrulesError:
            continue
        except _UNANTICIPATED as exc:  # a detector that could not read the file
            errors.append(_unanticipated(imp, path, exc))
    return found, errors


# What a parser raises on a structure it did not anticipate; anything else is a bug.
_UNANTICIPATED = (
    KeyError,
    TypeError,
    AttributeError,
    ValueError,
    IndexError,
    RecursionError,
    OverflowError,
)


def _unanticipated(imp: Importer, path: str, exc: BaseException) -> ImportFormatError:
    if isinstance(exc, RecursionError):
        why = "values nest deeper than Python can read"
    else:
        why = f"{type(exc).__name__}: {exc}"
    return ImportFormatError(
        f"unknown structure for format {imp.name!r}: {why}",
        where=path,
        hint="check that the file is a complete transcript of that format; nothing was imported",
    )


def _parse_with(imp: Importer, path: str) -> list[ImportedSession]:
    try:
        sessions = imp.parse(path)
    except CtxrulesError:
        raise
    except _UNANTICIPATED as exc:  # last line of defence
        raise _unanticipated(imp, path, exc) from None
    _check(path, sessions)
    return sessions


def _check(path: str, sessions: list[ImportedSession]) -> None:
    """Refuse, before anything is written, what the store would refuse, and more than
    ``import_budget`` bytes in all: every node and metadata is encoded once here."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    budget, used = import_budget(size), 0
    for s in sessions:
        for n in s.nodes:
            origin = s.origins.get(n.id)
            line = origin if isinstance(origin, int) else None
            at = origin if isinstance(origin, str) else None
            try:
                used += len(check_node(n))
            except ValidationError as exc:
                raise fail(
                    path, line, f"node {n.id}: {exc.message}", exc.hint or "fix it", at=at
                ) from None
            if used > budget:
                raise fail(
                    path,
                    line,
                    f"importing the file would store more than {budget:,} bytes, over "
                    f"{IMPORT_EXPANSION}x its {size:,} bytes (limits.import_budget): its "
                    "content repeats (one tool call answered many times, say)",
                    "import a file whose content is written out once",
                    at=at,
                )
        try:
            used += len(check_metadata({**s.metadata, "format": s.format}, where=path))
        except ValidationError as exc:
            raise ImportFormatError(
                f"the session metadata cannot be stored: {exc.message}",
                where=path,
                hint=f"{exc.hint or 'fix the file'}; nothing was imported",
            ) from None
        if used > budget:
            raise fail(
                path,
                None,
                f"importing the file would store more than {budget:,} bytes, over "
                f"{IMPORT_EXPANSION}x its {size:,} bytes (limits.import_budget)",
                "import a file whose content is written out once",
            )


def _why_unknown(head: bytes) -> str:
    # Say what the file is when no importer claims it: empty and binary files are the
    # usual wrong-path mistakes, and "unknown format" alone hides that.
    if not head.strip():
        return "the file is empty: not a transcript"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not merely a character cut at the HEAD_BYTES edge
            return "not UTF-8 text (a binary file?): not a transcript format ctxrules knows"
    return "not a transcript format ctxrules knows"


def parse_file(path: str, *, format: str = "auto") -> tuple[str, list[ImportedSession]]:
    """Parse one file; returns ``(format used, sessions)``; writes nothing."""
    try:
        return _parse_file(path, format)
    finally:
        forget_json()  # the decoded document served this file's detection and parse


def _parse_file(path: str, format: str) -> tuple[str, list[ImportedSession]]:
    if format != "auto":
        imp = registry("importers").get(format)
        return imp.name, _parse_with(imp, path)
    tried = [imp.name for imp in _importers() if getattr(imp, "auto", True)]
    candidates, errors = _detect(path)
    if not candidates:
        if errors:  # e.g. the file is JSON with a syntax error: say where
            raise ImportFormatError(
                errors[0].message,
                where=errors[0].where,
                hint=f"{errors[0].hint}; tried: {', '.join(tried)}",
            )
        raise ImportFormatError(
            _why_unknown(read_bytes(path, HEAD_BYTES)),
            where=path,
            hint=f"tried: {', '.join(tried)}; pass --format to force one; nothing was imported",
        )
    first: ImportFormatError | None = None
    for name in candidates:
        imp = registry("importers").get(name)
        if not isinstance(imp, JsonImporter):
            # A JSON detector may have decoded the file whole (a one-line JSONL file is
            # a JSON document too); a parser that streams it must not pay for that copy.
            forget_json()
        try:
            return name, _parse_with(imp, path)
        except ImportFormatError as exc:
            first = first or exc
    assert first is not None
    raise ImportFormatError(
        first.message,
        where=first.where,
        hint=f"{first.hint}; detected as {', '.join(candidates)} (tried: {', '.join(tried)}); "
        "pass --format to choose",
    )


def _write(store: Store, fmt: str, sessions: list[ImportedSession]) -> list[ImportResult]:
    out: list[ImportResult] = []
    with store.transaction():
        for s in sessions:
            info: SessionInfo | None = store.find_session(s.key)
            created = info is None
            if info is None:
                info = store.create_session(
                    session_id=session_id_for(s.key),
                    source=s.source,
                    import_key=s.key,
                    metadata={**s.metadata, "format": s.format},
                    nodes=s.nodes,
                    head=s.head,
                )
            out.append(
                ImportResult(
                    id=info.id, calls=info.calls, source=info.source, format=fmt, created=created
                )
            )
    return out


def import_paths(store: Store, paths: Sequence[str], *, format: str = "auto") -> list[ImportResult]:
    """Import files: all are parsed before anything is written; each file is one transaction.

    Any parse error (``ImportFormatError``) leaves the store untouched.  Re-importing a
    file with the same bytes returns its existing sessions with ``created=False``.
    """
    parsed = []
    for p in paths:
        source = str(Path(p).resolve())
        fmt, sessions = parse_file(source, format=format)
        parsed.append((source, fmt, sessions))
    out: list[ImportResult] = []
    for source, fmt, sessions in parsed:
        try:
            out.extend(_write(store, fmt, sessions))
        except (DagError, ValidationError) as exc:  # an importer bug or a corrupt file
            raise ImportFormatError(
                f"the {fmt} transcript cannot be stored as a history graph: {exc.message}",
                where=source,
                hint="the file may be corrupt; nothing from it was imported",
            ) from None
    return out
