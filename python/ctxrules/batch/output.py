"""The results of a rerender: one JSON line per session, and their totals.

A line is the session's record (``replay_session``) encoded with sorted keys; floats
are rounded where they are made, so the same record prints the same bytes everywhere.
``OutFile`` keeps them in a file as they finish (flushed per line), resumes from it — a
session already in the file is not replayed again; a last line cut short by an
interrupted run is dropped — and, once every session is in, puts the lines in session
order, so one run and any number of resumed ones leave the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..errors import ConfigError, ValidationError

__all__ = ["OutFile", "encode_record", "totals"]


def encode_record(record: Mapping[str, Any]) -> bytes:
    """One record as its line (without the newline): JSON, keys sorted."""
    return msgspec.json.encode(record, order="sorted")


class OutFile:
    """A results file being written (see the module docstring).

    ``lines`` holds the line of every session in it, by session id.  ``ValidationError``
    when a line before the last is not a session's record, ``ConfigError`` when the
    file holds results made under other rules, provider or model than ``expect`` says.
    """

    def __init__(self, path: str | os.PathLike[str], expect: Mapping[str, Any]):
        self.path = Path(path)
        self.lines: dict[str, bytes] = {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            raise ValidationError(f"cannot read it: {exc.strerror}", where=str(path)) from None
        keep = 0
        rows = data.split(b"\n")
        for number, line in enumerate(rows, 1):
            if number == len(rows):
                break  # what follows the last newline: empty, or a line cut short
            record = _record(line)
            if record is None:
                if number == len(rows) - 1 and not rows[-1]:
                    break  # the last line is broken: an interrupted write, dropped
                raise ValidationError(
                    "not a rerender result line", where=f"{path}:{number}", hint="use another --out"
                )
            _check(record, expect, f"{path}:{number}")
            self.lines.setdefault(str(record["session"]), line)
            keep += len(line) + 1
        try:
            self._fh = self.path.open("ab")
            if keep < len(data):
                self._fh.truncate(keep)
        except OSError as exc:
            raise ValidationError(f"cannot write it: {exc.strerror}", where=str(path)) from None

    def add(self, session: str, line: bytes) -> None:
        """Append a session's line and flush it (a run stopped later keeps it)."""
        self._fh.write(line + b"\n")
        self._fh.flush()
        self.lines[session] = line

    def finish(self) -> None:
        """Put the lines in session order (atomically, when they are not already)."""
        self._fh.close()
        ordered = [self.lines[k] for k in sorted(self.lines)]
        if list(self.lines.values()) == ordered:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(line + b"\n" for line in ordered))
        os.replace(tmp, self.path)
        self.lines = dict(sorted(self.lines.items()))

    def close(self) -> None:
        """Close the file as it is (an interrupted run: the next one resumes from it)."""
        self._fh.close()


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        record = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return None
    ok = isinstance(record, dict) and isinstance(record.get("session"), str)
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
        if key == "cost_usd":
            # A session with a model that has no prices: its cost is left out, counted.
            if value is None:
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
    quality share recomputed from the facts found of the total; ``sessions``,
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
        if isinstance(section.get("cost_usd"), float):
            section["cost_usd"] = round(section["cost_usd"], 6)
    quality = out.get("rules", {}).get("quality")
    if quality:
        quality.pop("share", None)
        quality.pop("retained_ratio", None)
        quality["share"] = (
            round(quality["found"] / quality["total"], 4) if quality["total"] else None
        )
    return out
