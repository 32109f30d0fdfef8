"""What a sweep writes: the table on the terminal, CSV, JSON, the plots and the TOML.

``write_report(result, out)`` fills ``out`` with

* ``results.json`` — the whole ``TuneResult`` (every setting with its per-session
  figures, the frontier, the chosen setting and its TOML);
* ``results.csv`` — one row per setting: its parameter values, the figures, and
  whether it is on the frontier, chosen, the default, dropped by halving, cached;
* ``frontier.png`` and ``sweep.png`` (``ctxrules.tune.plot``; only with matplotlib, the
  optional extra ``ctxrules[plot]``);
* ``chosen.toml`` — the chosen configuration, for ``--config`` (when one was chosen).

``report_targets(out)`` checks those files before a sweep starts
(``ctxrules.outfiles.OutputFile``): an existing one is replaced only when it is one a
tune wrote, recognised by its content (the folder's ``results.json`` is a tune's
result, or the file itself is: JSON of a result, the CSV's header, a PNG whose
metadata names ``ctxrules tune``, TOML of a configuration) — unless ``force``.  Each
file is written to a temporary name beside it and renamed into place.
"""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from ..outfiles import OutputFile, checked_dir
from . import plot

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib
from .results import OBJECTIVES, SettingResult
from .sweep import TuneResult

__all__ = ["FIGURES", "REPORT_FILES", "print_table", "report_targets", "rows", "write_report"]

#: The files of a report, by the name ``write_report`` returns them under.
REPORT_FILES: dict[str, str] = {
    "json": "results.json",
    "csv": "results.csv",
    "frontier": "frontier.png",
    "sweep": "sweep.png",
    "toml": "chosen.toml",
}

#: The first columns of ``results.csv``'s header (the parameters' columns follow).
_CSV_HEAD = b"setting,"
_CSV_TAIL = b",frontier,chosen,default,status,cached"
_PNG = b"\x89PNG\r\n\x1a\n"

#: The figures of a setting, in table order: (column, SettingResult field).
FIGURES: tuple[tuple[str, str], ...] = (
    ("sessions", "sessions"),
    ("requests", "requests"),
    ("prompt_tokens", "prompt_tokens"),
    ("cache_read_tokens", "cache_read_tokens"),
    ("cost_usd", "cost_usd"),
    ("compactions", "compactions"),
    ("quality", "quality"),
    ("violations", "violation_count"),
)


def _marks(result: TuneResult) -> list[dict[str, Any]]:
    """Each setting of ``results`` then ``partial`` with its role in the outcome."""
    front = set(result.frontier)
    out = []
    for i, r in enumerate(result.results):
        out.append(
            {
                "result": r,
                "frontier": i in front,
                "chosen": i == result.chosen,
                "status": "measured" if r.ok else "violations",
            }
        )
    for r in result.partial:
        out.append({"result": r, "frontier": False, "chosen": False, "status": "dropped"})
    return out


def rows(result: TuneResult) -> list[dict[str, Any]]:
    """The table as plain rows (what the CSV holds), best first within each group:
    the settings measured on every session by objective, then the dropped ones."""
    keys = [p.key for p in result.params]
    out = []
    for m in _marks(result):
        r: SettingResult = m["result"]
        row: dict[str, Any] = {"setting": r.label}
        row.update({k: _cell(r.setting.get(k)) for k in keys})
        row.update({col: getattr(r, field) for col, field in FIGURES})
        row.update(
            frontier=m["frontier"],
            chosen=m["chosen"],
            default=r.default,
            status=m["status"],
            cached=r.cached,
        )
        out.append(row)
    column = OBJECTIVES[result.objective]  # the objective's field is also its column

    def order(row: dict[str, Any]) -> tuple[bool, float, float]:
        value = row[column]
        return (
            row["status"] == "dropped",
            float("inf") if value is None else value,
            -row["quality"],
        )

    return sorted(out, key=order)


def _cell(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(map(str, value)) + "]"
    return value


def _is_result(path: Path) -> bool:
    try:
        data = msgspec.json.decode(path.read_bytes())
    except msgspec.DecodeError:
        return False
    return isinstance(data, dict) and {"objective", "search", "results", "version"} <= set(data)


def _is_csv(path: Path) -> bool:
    with path.open("rb") as fh:
        first = fh.readline(1 << 16).rstrip(b"\r\n")
    return first.startswith(_CSV_HEAD) and first.endswith(_CSV_TAIL)


def _is_png(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(1 << 12)
    return head.startswith(_PNG) and plot.SOFTWARE.encode() in head


def _is_toml(path: Path) -> bool:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return "pipeline" in data and "encoding" in data


_RECOGNISE: dict[str, Callable[[Path], bool]] = {
    "json": _is_result,
    "csv": _is_csv,
    "frontier": _is_png,
    "sweep": _is_png,
    "toml": _is_toml,
}


def report_targets(out: str | os.PathLike[str], *, force: bool = False) -> dict[str, OutputFile]:
    """The report's files in ``out`` (made if missing), checked and locked before the
    sweep (see the module docstring); close each (``OutputFile.close``) when done."""
    folder = checked_dir(out, option="--out")
    first = folder / REPORT_FILES["json"]
    ours_folder = first.is_file() and not first.is_symlink() and _is_result(first)
    targets: dict[str, OutputFile] = {}
    try:
        for key, name in REPORT_FILES.items():
            targets[key] = OutputFile(
                folder / name,
                kind="a file of ctxrules tune",
                ours=(lambda _: True) if ours_folder else _RECOGNISE[key],
                force=force,
            )
    except BaseException:
        for target in targets.values():
            target.close()
        raise
    return targets


def write_report(
    result: TuneResult,
    out: str | Path,
    targets: dict[str, OutputFile] | None = None,
    *,
    force: bool = False,
) -> dict[str, Path]:
    """Write the files listed in the module docstring into ``out`` (created if
    missing); returns them by name.  ``targets``: the files ``report_targets`` checked
    (else they are checked now, ``force`` as there).  Without matplotlib (the optional
    extra ``ctxrules[plot]``) the plots are left out and everything else is written."""
    own = targets is None
    files = report_targets(out, force=force) if targets is None else targets
    written: dict[str, Path] = {}
    try:
        files["json"].write(msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n")
        table = rows(result)
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=list(table[0]) if table else ["setting"])
        writer.writeheader()
        writer.writerows(table)
        files["csv"].write(text.getvalue().encode("utf-8"))
        if plot.available():
            for key, draw in (("frontier", plot.plot_frontier), ("sweep", plot.plot_sweep)):
                png = io.BytesIO()  # drawn in memory: a write error is the file's, in one line
                draw(result, png)
                files[key].write(png.getvalue())
        if result.toml:
            files["toml"].write(result.toml.encode("utf-8"))
        for key, target in files.items():
            if target.started:
                target.commit()
                written[key] = target.path
            elif target.exists:
                target.remove()  # an earlier run's plot or choice: no longer true
    finally:
        if own:
            for target in files.values():
                target.close()
    return written


def _fmt(col: str, value: Any) -> str:
    if value is None:
        return "-"
    if col == "cost_usd":
        return f"${value:.4f}"
    if col == "quality":
        return f"{value:.1%}"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def print_table(result: TuneResult, console: Console | None = None) -> None:
    """Print the table (``rows``) with rich: ★ frontier, → chosen, ◆ default,
    ✗ violations, … dropped by halving."""
    console = console or Console()
    keys = [p.key for p in result.params]
    table = Table(
        title=f"ctxrules tune: {len(result.sessions)} session(s), provider "
        f"{result.provider or 'as recorded'}, model {result.model or 'as recorded'}, "
        f"objective {result.objective}, search {result.search}",
        title_justify="left",
    )
    table.add_column("", no_wrap=True)
    for k in keys:
        table.add_column(k.partition(".")[2], justify="right")
    for col, _ in FIGURES:
        table.add_column(col.replace("_", " "), justify="right")
    for row in rows(result):
        mark = (
            ("→" if row["chosen"] else "")
            + ("★" if row["frontier"] else "")
            + ("◆" if row["default"] else "")
            + ("✗" if row["status"] == "violations" else "")
            + ("…" if row["status"] == "dropped" else "")
        )
        cells = [str(row[k]) for k in keys] + [_fmt(col, row[col]) for col, _ in FIGURES]
        table.add_row(mark, *cells, style="bold" if row["chosen"] else None)
    console.print(table)
    console.print(
        "→ chosen  ★ frontier (Pareto-optimal)  ◆ default  ✗ violations (excluded)  "
        f"… dropped by halving; measured {result.measured}, reused {result.reused} "
        f"from the cache ({result.replayed_sessions} session replays, "
        f"{result.replayed_requests:,} requests)"
    )
