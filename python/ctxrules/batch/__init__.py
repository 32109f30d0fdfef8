"""Batch work over many recorded sessions, usable without the command line.

``rerender(sources, options)`` replays every session of stores or transcript files
request by request through the turn engine, with no rules and under a rule set, on a
local process pool or a Dask cluster, and reports per session and in total what the
rules change (docs/rerender.md).  ``replay_session`` is the work done per session
(``replay_detail`` the same with every request kept: ``ctxrules quality``, the
quality benchmark), ``run_batch`` the task every backend runs, ``batch.output`` the
results file.
"""

from __future__ import annotations

from .output import OutFile, encode_record, is_results_file, totals
from .requests import SessionData, session_data
from .run import (
    BACKENDS,
    MAX_JOBS,
    RerenderResult,
    check_jobs,
    local_cluster,
    rerender,
    run_batch,
)
from .session import Bill, Replayed, ReplayOptions, replay_detail, replay_session
from .sources import Sources, is_store, open_sources

__all__ = [
    "BACKENDS",
    "MAX_JOBS",
    "Bill",
    "OutFile",
    "ReplayOptions",
    "Replayed",
    "RerenderResult",
    "SessionData",
    "Sources",
    "check_jobs",
    "encode_record",
    "is_results_file",
    "is_store",
    "local_cluster",
    "open_sources",
    "replay_detail",
    "replay_session",
    "rerender",
    "run_batch",
    "session_data",
    "totals",
]
