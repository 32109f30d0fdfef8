"""How tune measures a setting: one call of the batch engine (``ctxrules.batch``).

``opened(sources)`` reads a sweep's sources once.  Transcripts are imported into one
named in-memory store, which every ``measure`` call then names as its source, so the
batch engine does not import them again for every setting; stores are passed as they
are (the batch engine replays in memory stores of its own and writes nothing to
them).  The session ids are the batch engine's (``batch.open_sources``).

``measure`` is one ``batch.rerender`` call over some of those sessions under one
configuration; each session's record becomes a ``SessionMetrics`` (the figures of the
replay under the rules: prompt tokens, predicted cache reads, cost, compactions, the
needed-fact recall of its requests, and the violations the test kit found in either replay).
A session the engine could not replay keeps its reason in ``error``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..batch import ReplayOptions, is_store, open_sources, rerender
from ..batch.session import check_options
from ..config import PipelineConfig
from ..importers import Skipped, import_report
from ..store import MEMORY_PREFIX, open_store
from ..store.memory import forget
from .results import SessionMetrics

__all__ = ["Inputs", "check", "is_store", "measure", "opened"]


@dataclass(frozen=True)
class Inputs:
    """A sweep's sources, read once: ``sources`` is what every ``measure`` call takes,
    ``session_ids`` their sessions sorted by id."""

    sources: tuple[str, ...]
    session_ids: tuple[str, ...]
    skipped: tuple[Skipped, ...] = ()
    excluded: tuple[str, ...] = ()


def check(config: PipelineConfig, provider: str | None, model: str | None) -> None:
    """The batch engine's own check of a configuration, provider and model, made
    before anything runs: a bad rule, parameter, provider or model raises here."""
    check_options(ReplayOptions.of(config, provider=provider, model=model))


@contextmanager
def opened(
    sources: Sequence[str], *, format: str = "auto", exclude: Sequence[str] = ()
) -> Iterator[Inputs]:
    """Read ``sources`` once for a sweep (see the module docstring; ``format``: the
    importer of the transcripts, ``exclude``: sessions left out, by id or transcript
    file); the in-memory store of the transcripts is dropped when the block ends.  A
    source that does not exist, or a session found in two sources, is an error naming
    it (the importers' or ``batch.open_sources``'s)."""
    transcripts = [s for s in sources if not is_store(s)]
    stores = [s for s in sources if is_store(s)]
    name = f"tune-{uuid.uuid4().hex}"
    skipped: list[Skipped] = []
    try:
        if transcripts:
            memory = open_store(MEMORY_PREFIX + name)
            try:
                skipped = import_report(memory, transcripts, format=format).skipped
            finally:
                memory.close()
            stores.append(MEMORY_PREFIX + name)
        with open_sources(stores, exclude=exclude) as src:
            ids = tuple(src.session_ids)
            excluded = tuple(src.excluded)
        yield Inputs(
            sources=tuple(stores), session_ids=ids, skipped=tuple(skipped), excluded=excluded
        )
    finally:
        forget(name)


def measure(
    sources: Sequence[str],
    config: PipelineConfig,
    *,
    provider: str | None,
    model: str | None,
    sessions: Sequence[str],
    jobs: int | None = None,
) -> list[SessionMetrics]:
    """Replay ``sessions`` of ``sources`` under ``config`` with one ``rerender`` call:
    one ``SessionMetrics`` per session, in the order given."""
    options = ReplayOptions.of(config, provider=provider, model=model)
    result = rerender(list(sources), options, jobs=jobs, sessions=list(sessions))
    records = {r["session"]: r for r in result.records}
    return [_metrics(records[sid]) for sid in sessions]


def _metrics(record: Mapping[str, Any]) -> SessionMetrics:
    sid = record["session"]
    if "error" in record:
        return SessionMetrics(
            session_id=sid,
            requests=0,
            prompt_tokens=0,
            cache_read_tokens=0,
            cost_usd=None,
            compactions=0,
            older_kept=0,
            older_needed=0,
            error=str(record["error"]),
        )
    rules = record["rules"]
    quality = rules.get("quality") or {}
    return SessionMetrics(
        session_id=sid,
        requests=int(record["requests"]),
        prompt_tokens=int(rules["prompt_tokens"]),
        cache_read_tokens=int(rules["cache_read_tokens"]),
        cost_usd=rules.get("cost_usd"),
        compactions=int(rules.get("compactions", 0)),
        older_kept=int(quality.get("older_kept", 0)),
        older_needed=int(quality.get("older_needed", 0)),
        kept=int(quality.get("kept", 0)),
        needed=int(quality.get("needed", 0)),
        input_cost_usd=rules.get("input_cost_usd"),
        violations=tuple(f"{sid}: {v}" for v in record.get("violations", ())),
    )
