"""Importers: real transcripts (Claude Code, OpenAI, Anthropic, SWE-agent, …) into the DAG.

Importers are a plugin kind: each is registered through the ``register_importers`` hook
(the built-ins too, from ``ctxrules.importers._plugin``) and implements ``Importer``.
``import_report`` (and ``import_paths``, its sessions only) is the one way in: it
parses every file first and then writes each file's sessions in one transaction, so a
bad file writes nothing, and re-importing the same bytes finds the sessions already
there instead of duplicating them.  A directory stands for every file under it (sorted,
hidden entries left out); a file there that no importer claims is skipped and
reported.  A transcript that grows (a live Claude Code session) appends its new lines
to the session its earlier import made.  An importer's ``companion`` files (Claude Code
sub-agent transcripts) are parsed last, and skipped when a session of the same import
read them already.

``--format auto`` asks every importer's ``detect`` in registration order and parses
with the first that claims the file; if that parse fails it tries the next claimant,
and the final error names every format it tried.

A file that parses into a session without a single node is refused
(``EmptyTranscriptError``, as is a file of a known format holding no conversation): nothing
is stored as an empty session.  Named on its own such a file is an error; in a directory
it is skipped and listed with the reason.

Before anything is written, every parsed node passes ``limits.check_node`` (the store's
own write check) and every session's metadata ``limits.check_metadata``, so a node the
store would refuse is named by file:line; and one file may store at most
``limits.import_budget(file size)`` bytes, so content repeated by reference cannot
turn a small file into a huge store.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import msgspec

from ..errors import (
    CtxrulesError,
    DagError,
    EmptyTranscriptError,
    ImportFormatError,
    ValidationError,
)
from ..limits import IMPORT_EXPANSION, check_metadata, check_node, import_budget
from ..plugins import registry
from ..store import SessionInfo, Store
from ._common import ImportedSession, empty, fail, file_size, read_bytes, session_id_for
from ._growth import STATE_KEY, Sessions
from ._json import JsonImporter, detached, forget_json
from ._messages import LIST_KEYS, read_messages

__all__ = [
    "HEAD_BYTES",
    "LIST_KEYS",
    "ImportReport",
    "ImportResult",
    "ImportedSession",
    "Importer",
    "Skipped",
    "detect_formats",
    "import_paths",
    "import_report",
    "parse_file",
    "read_messages",
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

    Optional: an importer with ``grows = True`` takes ``parse(path, store=...)`` (the
    store it imports into, read only) and returns a grown transcript's new part
    (``ImportedSession.base``); ``companion(path)`` says a file is normally read as
    part of another file's session (listed in that session's ``files``).  The session
    metadata an importer fills is described in docs/sessions.md.
    """

    name: str
    description: str
    auto: bool

    def detect(self, path: str, head: bytes) -> bool: ...

    def parse(self, path: str) -> list[ImportedSession]: ...


class ImportResult(msgspec.Struct, frozen=True, kw_only=True):
    """One session an import produced (or found already imported: ``created=False``).

    ``added`` counts the nodes this import stored: all of a new session's, the new
    ones of a transcript that grew, none when the session was there already.
    """

    id: str
    calls: int
    source: str
    format: str
    created: bool
    added: int = 0


class Skipped(msgspec.Struct, frozen=True):
    """A file found in a directory and not imported, and why."""

    path: str
    reason: str


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``import_report`` did: the sessions, in file order, and the files skipped."""

    sessions: list[ImportResult]
    skipped: list[Skipped]


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


def _parse_with(imp: Importer, path: str, store: Sessions | None = None) -> list[ImportedSession]:
    try:
        if getattr(imp, "grows", False):
            sessions = imp.parse(path, store=store)  # type: ignore[call-arg]
        else:
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
    size = file_size(path)  # a gzip file's decompressed size
    budget, used = import_budget(size), 0
    for s in sessions:
        if not s.nodes and s.base is None:  # nothing is stored as an empty session
            raise empty(
                path,
                f"no conversation: the {s.format} importer read no message from the file",
                f"it is not a {s.format} transcript: pass another --format, or auto",
            )
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


def parse_file(
    path: str, *, format: str = "auto", store: Store | None = None
) -> tuple[str, list[ImportedSession]]:
    """Parse one file; returns ``(format used, sessions)``; writes nothing.

    With ``store``, a transcript that grew since its import there parses into its
    stored session's continuation (``ImportedSession.base``).
    """
    try:
        return _parse_claimed(path, *_claimants(path, format), store)
    finally:
        forget_json()  # the decoded document served this file's detection and parse


def _claimants(
    source: str, format: str
) -> tuple[Importer | None, list[str], list[ImportFormatError]]:
    """The importer forced by ``format`` (``None`` under ``auto``), and the detected ones
    with what the failing detectors said."""
    if format != "auto":
        return registry("importers").get(format), [], []
    found, errors = _detect(source)
    return None, found, errors


def _parse_claimed(
    path: str,
    imp: Importer | None,
    candidates: list[str],
    errors: list[ImportFormatError],
    store: Sessions | None,
) -> tuple[str, list[ImportedSession]]:
    """Parse with the importer ``format`` forced (``imp``), else with the detected ones
    (``_claimants``)."""
    if imp is not None:
        return imp.name, _parse_with(imp, path, store)
    return _parse_detected(path, candidates, errors, store)


def _parse_detected(
    path: str, candidates: list[str], errors: list[ImportFormatError], store: Sessions | None
) -> tuple[str, list[ImportedSession]]:
    tried = [imp.name for imp in _importers() if getattr(imp, "auto", True)]
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
            return name, _parse_with(imp, path, store)
        except ImportFormatError as exc:
            first = first or exc
    assert first is not None
    raise type(first)(
        first.message,
        where=first.where,
        hint=f"{first.hint}; detected as {', '.join(candidates)} (tried: {', '.join(tried)}); "
        "pass --format to choose",
    )


def _write(store: Store, fmt: str, sessions: list[ImportedSession]) -> list[ImportResult]:
    out: list[ImportResult] = []
    with store.transaction():
        for s in sessions:
            if s.base is not None:
                out.append(_append(store, fmt, s))
                continue
            info: SessionInfo | None = store.find_session(s.key)
            created = info is None
            if info is None:
                info = store.create_session(
                    session_id=session_id_for(s.id_seed or s.key),
                    source=s.source,
                    import_key=s.key,
                    metadata={**s.metadata, "format": s.format},
                    nodes=s.nodes,
                    head=s.head,
                )
            out.append(
                ImportResult(
                    id=info.id,
                    calls=info.calls,
                    source=info.source,
                    format=fmt,
                    created=created,
                    added=len(s.nodes) if created else 0,
                )
            )
    return out


def _append(store: Store, fmt: str, s: ImportedSession) -> ImportResult:
    """Store what a grown transcript added to its session (inside the transaction)."""
    assert s.base is not None
    info = store.get_session(s.base)
    before: Any = info.metadata.get(STATE_KEY)
    if before != s.base_state:
        raise ImportFormatError(
            "the session changed while the file was read (another import of it?)",
            where=s.source,
            hint="import the file again; nothing was imported",
        )
    for node in s.nodes:
        store.append(info.id, node)
    # HEAD follows the transcript unless someone moved it since the last import.
    was = before.get("head") if isinstance(before, dict) else None
    if s.head is not None and s.head != info.head and info.head == was:
        store.set_head(info.id, s.head)
    patch = {**s.metadata, "format": s.format}
    if any(info.metadata.get(k) != v for k, v in patch.items()):
        store.update_metadata(info.id, patch)
    now = store.get_session(info.id)
    return ImportResult(
        id=now.id, calls=now.calls, source=now.source, format=fmt, created=False, added=len(s.nodes)
    )


def import_paths(store: Store, paths: Sequence[str], *, format: str = "auto") -> list[ImportResult]:
    """Import files and directories (see ``import_report``); returns the sessions."""
    return import_report(store, paths, format=format).sessions


def _walk(folder: Path) -> list[Path]:
    """Every file under ``folder``, sorted, hidden files and folders left out."""
    out: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [Path(root, f) for f in sorted(files) if not f.startswith(".")]
    return out


def _files(paths: Sequence[str]) -> list[tuple[str, str | None]]:
    """``(resolved file, the directory given that holds it)`` for every path, each file
    once, in the order first met (``None``: the file was named itself)."""
    seen: dict[str, str | None] = {}
    for p in paths:
        path = Path(p).resolve()
        if path.is_dir():
            for f in _walk(path):
                seen.setdefault(str(f.resolve()), str(path))
        else:
            seen[str(path)] = None  # named: a file no importer reads is an error
    return list(seen.items())


def _no_transcript(folder: str, skipped: list[Skipped]) -> ImportFormatError:
    """The error for a directory given to import that holds no transcript at all."""
    mine = [s for s in skipped if s.path.startswith(folder + os.sep)]
    shown = "; ".join(f"{s.path}: {s.reason}" for s in mine[:3]) + ("; …" if mine[3:] else "")
    return ImportFormatError(
        f"no transcript in the directory ({len(mine)} files{': ' + shown if mine else ''})",
        where=folder,
        hint="pass a folder holding transcripts (a Claude Code projects folder, an "
        "evaluation output folder); nothing was imported",
    )


class _Pending:
    """The store as a parse sees it during an import: with the sessions that files
    parsed earlier in the same import will create (so two copies of one transcript
    do not both take the same ids)."""

    def __init__(self, store: Store):
        self.store = store
        self.ids: set[str] = set()

    def find_session(self, import_key: str) -> SessionInfo | None:
        return self.store.find_session(import_key)

    def get_session(self, session_id: str) -> SessionInfo:
        if session_id in self.ids:
            return SessionInfo(id=session_id, created_at=0.0)
        return self.store.get_session(session_id)

    def add(self, sessions: list[ImportedSession]) -> None:
        for s in sessions:
            if s.base is None:
                self.ids.add(session_id_for(s.id_seed or s.key))


def _claims(imp: Importer, source: str) -> bool:
    try:
        return bool(imp.detect(source, read_bytes(source, HEAD_BYTES)))
    except (CtxrulesError, *_UNANTICIPATED):
        return False


def import_report(store: Store, paths: Sequence[str], *, format: str = "auto") -> ImportReport:
    """Import files and directories: every file is parsed before anything is written;
    each file's sessions are written in one transaction.

    Any parse error (``ImportFormatError``) leaves the store untouched.  Re-importing a
    file with the same bytes returns its existing sessions with ``created=False``; a
    transcript that grew appends to its session (``added`` new nodes).  A file found
    in a directory that no importer claims is ``skipped``, as is a companion file (a
    Claude Code sub-agent transcript) that a session of the same import read.
    """
    skipped: list[Skipped] = []
    parsed: list[tuple[str, str, list[ImportedSession]]] = []
    read: dict[str, str] = {}  # file -> the file whose session read it
    later: list[tuple[str, Importer | None, list[str], list[ImportFormatError], bool]] = []
    files = _files(paths)
    folders = {str(Path(p).resolve()) for p in paths if Path(p).is_dir()}
    used: set[str | None] = set()  # the folders a transcript was found in
    pending = _Pending(store)

    def parse(
        source: str, imp: Importer | None, found: list[str], errors: list[Any], in_folder: bool
    ) -> None:
        if source in read:
            skipped.append(Skipped(source, f"read with {read[source]} (its sub-agent transcript)"))
            return
        try:
            fmt, sessions = _parse_claimed(source, imp, found, errors, pending)
        except EmptyTranscriptError as exc:
            if not in_folder:
                raise
            skipped.append(Skipped(source, exc.message))  # no conversation: nothing to do
            return
        pending.add(sessions)
        for s in sessions:
            for f in s.files:
                read.setdefault(f, source)
        parsed.append((source, fmt, sessions))

    for source, folder in files:
        in_folder = folder is not None
        if source in read:  # a session parsed before read it (a sub-agent's metadata)
            skipped.append(Skipped(source, f"read with {read[source]} (part of its session)"))
            continue
        try:  # detection and parse share the decoded JSON document (see _json.load_json)
            imp, found, errors = _claimants(source, format)
            if in_folder and imp is None and not found:
                why = errors[0].message if errors else _why_unknown(read_bytes(source, HEAD_BYTES))
                skipped.append(Skipped(source, why))
                continue
            if in_folder and imp is not None and not _claims(imp, source):
                skipped.append(Skipped(source, f"not a {imp.name} transcript"))
                continue
            used.add(folder)
            first = imp if imp is not None or not found else registry("importers").get(found[0])
            companion = getattr(first, "companion", None)
            if companion is not None and companion(source):
                later.append((source, imp, found, errors, in_folder))
            else:
                parse(source, imp, found, errors, in_folder)
        finally:
            forget_json()
    for entry in later:
        try:
            parse(*entry)
        finally:
            forget_json()
    bare = sorted(folders - used)
    if bare:
        raise _no_transcript(bare[0], skipped)
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
    return ImportReport(sessions=out, skipped=skipped)
