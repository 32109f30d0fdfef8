"""The results of a rerender: one JSON line per session, and their totals.

A line is the session's record (``replay_session``) encoded with sorted keys; floats
are rounded where they are made, so the same record prints the same bytes everywhere.

``OutFile`` keeps them in a file (``ctxrules.outfiles.OutputFile``: checked before the
run starts, refused when it exists and is no results file — recognised by its first
line, whatever its name — unless ``force``, locked against a second writer).  The
target itself is only ever replaced whole, by a rename: each session's line goes to a
journal beside it (``.NAME.partial``, flushed per line) as it finishes, and when the
run ends — finished, interrupted, or stopped by an error — every line is written in
session order into a new file that replaces the target, and the journal is removed.
A run killed outright leaves the journal; the next run resumes from the target and
the journal together (a last journal line cut short is dropped), so a session already
in either is not replayed again.  Lines of sessions the sources no longer hold are
dropped, as are repeated lines of one session, so one run and any number of resumed
ones leave the same bytes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import msgspec

from ..errors import ConfigError, ValidationError
from ..outfiles import OutputFile, io_error

__all__ = ["OutFile", "encode_record", "is_results_file", "totals"]

#: How much of a file is read to recognise it as a results file (its first line).
_SNIFF = 1 << 20


def encode_record(record: Mapping[str, Any]) -> bytes:
    """One record as its line (without the newline): JSON, keys sorted."""
    return msgspec.json.encode(record, order="sorted")


def is_results_file(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` is a rerender results file, by its content: empty,
    or a first line (newline-terminated) that is a session's record."""
    with open(path, "rb") as fh:
        head = fh.read(_SNIFF)
    if not head:
        return True
    first, newline, _ = head.partition(b"\n")
    return bool(newline) and _record(first) is not None


class OutFile:
    """A results file being written (see the module docstring).

    ``lines`` holds the line of every session in it, by session id.  ``ValidationError``
    when a line before the last is not a session's record, ``ConfigError`` when the
    file holds results made under other rules, provider or model than ``expect`` says;
    ``CtxrulesError`` when the target is not a results file (without ``force``), cannot
    be written, or another run writes it now.
    """

    def __init__(
        self, path: str | os.PathLike[str], expect: Mapping[str, Any], *, force: bool = False
    ):
        self.path = Path(path)
        self._target = OutputFile(
            path, kind="a rerender results file", ours=is_results_file, force=force
        )
        self.lines: dict[str, bytes] = {}
        self._journal: IO[bytes] | None = None
        try:
            if self._target.exists and (force is False or is_results_file(self.path)):
                self._read(self.path, expect, strict=True)
            self.journal = self.path.with_name(f".{self.path.name}.partial")
            keep = self._read(self.journal, expect, strict=False) if self.journal.exists() else 0
            try:
                # Unbuffered: a line is in the file once add returns, and a write that
                # fails leaves nothing behind to fail again on close.
                self._journal = open(self.journal, "ab", buffering=0)
                self._journal.truncate(keep)
            except OSError as exc:
                raise io_error(exc, self.journal, "write the journal of the run") from None
        except BaseException:
            self._target.close()
            raise

    def _read(self, path: Path, expect: Mapping[str, Any], *, strict: bool) -> int:
        """Take the lines of ``path`` (later ones win); returns how many bytes of it are
        whole lines.  ``strict``: a bad line before the last is an error (a journal is
        read up to its first bad line instead)."""
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise io_error(exc, path, "read it") from None
        keep = 0
        rows = data.split(b"\n")
        for number, line in enumerate(rows, 1):
            if number == len(rows):
                break  # what follows the last newline: empty, or a line cut short
            record = _record(line)
            if record is None:
                if not strict or (number == len(rows) - 1 and not rows[-1]):
                    break  # an interrupted write: dropped
                raise ValidationError(
                    "not a rerender result line", where=f"{path}:{number}", hint="use another --out"
                )
            _check(record, expect, f"{path}:{number}")
            self.lines[str(record["session"])] = line
            keep += len(line) + 1
        return keep

    def add(self, session: str, line: bytes) -> None:
        """Add a session's line to the journal and flush it (a run killed later keeps it)."""
        assert self._journal is not None
        data = memoryview(line + b"\n")
        try:
            while data:
                data = data[self._journal.write(data) or 0 :]
        except OSError as exc:
            raise io_error(
                exc,
                self.journal,
                "write the journal of the run",
                what="the results file was kept as it was",
            ) from None
        self.lines[session] = line

    def finish(self, keep: Collection[str] | Callable[[str], bool] | None = None) -> None:
        """Replace the target by every line in session order (only the sessions ``keep``
        holds, when given), then remove the journal."""
        wanted = keep if keep is None or callable(keep) else keep.__contains__
        self.lines = {k: v for k, v in sorted(self.lines.items()) if wanted is None or wanted(k)}
        for line in self.lines.values():
            self._target.write(line + b"\n")
        self._target.commit()
        self._close_journal()
        self.journal.unlink(missing_ok=True)

    def _close_journal(self) -> None:
        if self._journal is not None:
            with contextlib.suppress(OSError):  # unbuffered: nothing is left to write
                self._journal.close()
            self._journal = None

    def close(self) -> None:
        """Release the target (a journal not finished stays: the next run resumes it)."""
        self._close_journal()
        self._target.close()


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        record = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return None
    ok = (
        isinstance(record, dict)
        and isinstance(record.get("session"), str)
        and isinstance(record.get("rules_version"), str)
    )
    return record if ok else None


def _check(record: Mapping[str, Any], expect: Mapping[str, Any], where: str) -> None:
    """``ConfigError`` when ``record`` was made under other settings than ``expect``
    (``None``: any); an error record carries only the rules version."""
    for key, value in expect.items():
        if value is None or (key != "rules_version" and "error" in record):
            continue
        if record.get(key) != value:
            raise ConfigError(
                f"the file holds results made with {key} {record.get(key)!r}, this run "
                f"uses {value!r}",
                where=where,
                hint="give another --out (or remove the file) to start over",
            )


# -- totals ----------------------------------------------------------------------------


def _add(total: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if key in ("cost_usd", "input_cost_usd"):
            # A session with a model that has no prices: its cost is left out, counted.
            if value is None:
                if key == "cost_usd":
                    total["cost_unpriced_sessions"] = total.get("cost_unpriced_sessions", 0) + 1
            else:
                total[key] = total.get(key, 0.0) + value
        elif isinstance(value, Mapping):
            _add(total.setdefault(key, {}), value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value


def totals(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of session records: every count and token figure added up (costs of the
    sessions that have one, ``cost_unpriced_sessions`` counting the others), the
    needed-fact recalls (and the checks' share) recomputed from the summed counts;
    ``sessions``,
    ``errors`` and ``violations`` counted."""
    out: dict[str, Any] = {"sessions": 0, "errors": 0, "violations": 0}
    for record in records:
        out["sessions"] += 1
        if "error" in record:
            out["errors"] += 1
            continue
        out["violations"] += len(record.get("violations", ()))
        _add(out, {k: v for k, v in record.items() if k in ("recorded", "plain", "rules")})
        _add(out, {k: record[k] for k in ("requests", "output_tokens", "recorded_compactions")})
    for group in ("recorded", "plain", "rules"):
        section = out.get(group, {})
        for key in ("cost_usd", "input_cost_usd"):
            if isinstance(section.get(key), float):
                section[key] = round(section[key], 6)
    for group in ("plain", "rules"):
        quality = out.get(group, {}).get("quality")
        if quality:
            for kept, needed, share in (
                ("kept", "needed", "recall"),
                ("older_kept", "older_needed", "older_recall"),
            ):
                total = quality.get(needed, 0)
                quality[share] = round(quality.get(kept, 0) / total, 4) if total else None
            checks = quality.get("checks")
            if checks:
                checks.pop("retained_ratio", None)
                checks["share"] = (
                    round(checks["found"] / checks["total"], 4) if checks.get("total") else None
                )
    return out
