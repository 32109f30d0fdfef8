"""What a sweep writes: the table on the terminal, CSV, JSON, the plots and the TOML.

``write_report(result, out)`` fills ``out`` with

* ``results.json`` — the whole ``TuneResult`` (every setting with its per-session
  figures, the frontier, the chosen setting and its TOML);
* ``results.csv`` — one row per setting: its parameter values, the figures, and
  whether it is on the frontier, chosen, the default, dropped by halving, cached;
* ``frontier.png`` and ``sweep.png`` (``ctxrules.tune.plot``; only with matplotlib, the
  optional extra ``ctxrules[plot]``);
* ``chosen.toml`` — the chosen configuration, for ``--config`` (when one was chosen).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from . import plot
from .results import OBJECTIVES, SettingResult
from .sweep import TuneResult

__all__ = ["FIGURES", "print_table", "rows", "write_report"]

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


def write_report(result: TuneResult, out: str | Path) -> dict[str, Path]:
    """Write the files listed in the module docstring into ``out`` (created if
    missing); returns them by name.  Without matplotlib (the optional extra
    ``ctxrules[plot]``) the plots are left out and everything else is written."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    path = folder / "results.json"
    path.write_bytes(msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n")
    written["json"] = path
    table = rows(result)
    path = folder / "results.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]) if table else ["setting"])
        writer.writeheader()
        writer.writerows(table)
    written["csv"] = path
    if plot.available():
        written["frontier"] = plot.plot_frontier(result, folder / "frontier.png")
        written["sweep"] = plot.plot_sweep(result, folder / "sweep.png")
    if result.toml:
        path = folder / "chosen.toml"
        path.write_text(result.toml, encoding="utf-8")
        written["toml"] = path
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
