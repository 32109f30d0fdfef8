"""Tuning by measurement: sweep rule parameters over recorded sessions and choose a setting.

``tune(sources, ["tool_aging.tail_turns=1..6", ...])`` measures every setting of the
grid (or a random sample, or successive halving over the sessions) with the batch
engine — prompt tokens sent, predicted cache reads, cost, compactions, the context
quality score and violations per setting — finds the trade-off frontier of the
objective (cost or tokens) against quality, and chooses the cheapest frontier
setting that keeps at least the default's quality.  ``write_report`` writes the
table (CSV, JSON), the plots (PNG) and the chosen configuration (TOML) into a folder,
which also caches measurements for the next run.  ``ctxrules tune`` is the command.
"""

from __future__ import annotations

from .frontier import choose, frontier_ranks, pareto_front, ranked
from .params import MAX_VALUES, Param, parse_param, parse_params
from .report import REPORT_FILES, print_table, report_targets, write_report
from .results import OBJECTIVES, SessionMetrics, SettingResult, aggregate
from .search import (
    DEFAULT_BUDGET,
    MAX_SETTINGS,
    SEARCHES,
    Setting,
    grid,
    grid_size,
    halving,
    halving_rounds,
    random_settings,
    setting_at,
    starting_settings,
)
from .sweep import ParamInfo, TuneResult, setting_config, tune

__all__ = [
    "DEFAULT_BUDGET",
    "MAX_SETTINGS",
    "MAX_VALUES",
    "OBJECTIVES",
    "REPORT_FILES",
    "SEARCHES",
    "Param",
    "ParamInfo",
    "SessionMetrics",
    "Setting",
    "SettingResult",
    "TuneResult",
    "aggregate",
    "choose",
    "frontier_ranks",
    "grid",
    "grid_size",
    "halving",
    "halving_rounds",
    "pareto_front",
    "parse_param",
    "parse_params",
    "print_table",
    "random_settings",
    "ranked",
    "report_targets",
    "setting_at",
    "setting_config",
    "starting_settings",
    "tune",
    "write_report",
]
