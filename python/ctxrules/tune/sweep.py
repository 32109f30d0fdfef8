"""``tune``: measure rule settings over recorded sessions and choose one.

Everything is checked before anything is measured: the ``--param`` specs against the
rules (``ctxrules.tune.params``), every planned setting's whole configuration (built
as a pipeline), the provider, the model and the objective.  Each setting is then
measured by one call of the batch engine on the sessions (``_batch.measure``), unless
the cache in the output folder has it already; the configuration being tuned is
measured too, as the *default* point.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from .. import __version__
from ..batch import check_jobs
from ..commit import Pipeline
from ..config import PipelineConfig, dump_config, find_config
from ..errors import ConfigError, CtxrulesError, CtxrulesWarning
from ..importers import Skipped
from . import _batch
from .cache import ResultCache, inputs_hash
from .frontier import choose, pareto_front, ranked
from .params import Param, parse_params
from .results import OBJECTIVES, SettingResult, aggregate
from .search import (
    DEFAULT_BUDGET,
    Search,
    Setting,
    grid_size,
    halving,
    halving_rounds,
    starting_settings,
)

__all__ = ["ParamInfo", "TuneResult", "setting_config", "tune"]

#: Called after each measurement: (settings measured so far, planned in all, label).
Progress = Callable[[int, int, str], None]


class ParamInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A swept parameter as the report shows it: ``rule.param``, its values, and the
    value the tuned configuration has without the sweep."""

    key: str
    values: tuple[Any, ...]
    default: Any


class TuneResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of ``tune``.

    ``results`` holds one entry per setting measured on every session (the default
    point among them, ``default`` set); ``partial`` the settings successive halving
    dropped, with the figures of the last round each took part in.  ``frontier``
    indexes ``results`` (the Pareto-optimal settings without violations, by objective);
    ``chosen`` is the setting to use (``None``: every setting broke something) and
    ``toml`` its whole configuration as ``ctxrules.toml`` text.  ``measured`` counts
    measurements run now (``replayed_sessions`` / ``replayed_requests``: the session
    replays and requests they made), ``reused`` those the cache answered.
    """

    objective: str
    search: str
    seed: int
    budget: int
    provider: str | None
    model: str | None
    sessions: tuple[str, ...]
    params: tuple[ParamInfo, ...]
    results: tuple[SettingResult, ...]
    partial: tuple[SettingResult, ...]
    frontier: tuple[int, ...]
    chosen: int | None
    toml: str
    measured: int
    reused: int
    replayed_sessions: int
    replayed_requests: int
    version: str
    skipped: tuple[Skipped, ...] = ()
    excluded: tuple[str, ...] = ()


def setting_config(base: PipelineConfig, setting: Setting) -> PipelineConfig:
    """``base`` with the setting's values."""
    config = base
    for rule, values in setting.by_rule().items():
        config = config.with_params(rule, **values)
    return config


def tune(
    sources: Sequence[str | os.PathLike[str]],
    params: Sequence[str | Param],
    *,
    base: PipelineConfig | None = None,
    provider: str | None = None,
    model: str | None = None,
    objective: str = "cost",
    search: Search = "auto",
    budget: int = DEFAULT_BUDGET,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    min_quality: float | None = None,
    jobs: int | None = None,
    progress: Progress | None = None,
    format: str = "auto",
    exclude: Sequence[str] = (),
) -> TuneResult:
    """Sweep ``params`` over the sessions of ``sources`` and choose a setting.

    ``sources`` are transcript files, folders of them, or stores; ``params`` are
    ``--param`` texts (or parsed ``Param``s) against ``base`` (default: the nearest
    configuration file, else the default preset).  ``provider`` / ``model``: what the
    requests are rendered for (``None``: each session's own); ``jobs``: the batch
    engine's worker processes; ``format``: the importer of the transcripts (``auto``:
    detected); ``exclude``: sessions left out, by id or transcript file.  ``objective`` (``cost`` or
    ``tokens``) is minimised with the quality score as the second axis; ``search``,
    ``budget`` and ``seed`` pick the settings (``ctxrules.tune.search``);
    ``min_quality`` is the least quality the chosen setting may have (default: the
    default point's).  ``cache_dir`` holds measurements across runs (``None``: none
    kept).  Raises ``ConfigError`` before anything is measured when anything given is
    wrong.
    """
    paths = [os.fspath(s) for s in sources]
    base = base if base is not None else find_config()
    if objective not in OBJECTIVES:
        raise ConfigError(
            f"unknown objective {objective!r}",
            where="--objective",
            hint=f"one of {', '.join(OBJECTIVES)}",
        )
    if min_quality is not None and not (0.0 <= min_quality <= 1.0):
        raise ConfigError(
            f"the quality score lies between 0 and 1, got {min_quality}", where="--min-quality"
        )
    check_jobs(jobs)
    _batch.check(base, provider, model)
    parsed = [p for p in params if isinstance(p, Param)]
    parsed += parse_params([p for p in params if isinstance(p, str)], base)
    if not parsed:
        raise ConfigError("nothing to tune", where="--param", hint="give at least one --param")
    chosen_search, settings = starting_settings(parsed, search, budget, seed)
    size = grid_size(parsed)
    if len(settings) < size:
        warnings.warn(
            f"the grid holds {size:,} settings; --search {chosen_search} measures "
            f"{len(settings):,} of them (--budget {budget:,})",
            CtxrulesWarning,
            stacklevel=2,
        )
    default_setting = Setting(tuple((p.key, p.default) for p in parsed))
    for s in [default_setting, *settings]:
        try:
            _batch.check(setting_config(base, s), provider, model)
        except ConfigError as exc:
            raise ConfigError(
                f"the setting {s.label} is not a valid configuration: {exc}", where="--param"
            ) from None

    with _batch.opened(paths, format=format, exclude=exclude) as inputs:
        digest = inputs_hash(paths, _batch.is_store, format) if cache_dir is not None else ""
        sessions = inputs.session_ids
        if not sessions:
            raise ConfigError("the sources hold no session", where=", ".join(paths))
        run = _Run(
            sources=list(inputs.sources),
            sessions=sessions,
            base=base,
            provider=provider,
            model=model,
            jobs=jobs,
            default=default_setting,
            cache=ResultCache(cache_dir) if cache_dir is not None else None,
            inputs_hash=digest,
            progress=progress,
        )
        run.planned = _planned(chosen_search, len(settings), len(sessions)) + (
            default_setting not in settings
        )
        default_result = run.measure(default_setting, sessions)
        for m in default_result.per_session:
            if m.error is not None:
                # The configuration being tuned cannot replay it: no setting will say
                # anything about it.
                raise CtxrulesError(
                    f"session {m.session_id} cannot be replayed: {m.error}",
                    where=m.session_id,
                    hint="leave it out of the sources",
                )
        if objective == "cost" and default_result.cost_usd is None:
            raise ConfigError(
                "no price is known for the model of some of these sessions, so cost cannot "
                "be the objective",
                where="--objective cost",
                hint="use --objective tokens, or --model with a priced model",
            )
        final, partial = _search(run, chosen_search, settings, objective, seed)
    if default_setting not in {s for s, _ in final}:
        final.append((default_setting, default_result))
        # Dropped by halving, it is listed with its figures on every session instead.
        partial = [r for r in partial if not r.default]
    results = tuple(r for _, r in final)
    ok = [i for i, r in enumerate(results) if r.ok]
    points = [(results[i].objective(objective), results[i].quality) for i in ok]
    front = sorted((ok[j] for j in pareto_front(points)), key=lambda i: points[ok.index(i)])
    pick = choose(results, objective, min_quality)
    toml = ""
    if pick is not None:
        toml = dump_config(setting_config(base, Setting(tuple(results[pick].setting.items()))))
    return TuneResult(
        objective=objective,
        search=chosen_search,
        seed=seed,
        budget=budget,
        provider=provider,
        model=model,
        sessions=sessions,
        params=tuple(ParamInfo(key=p.key, values=p.values, default=p.default) for p in parsed),
        results=results,
        partial=tuple(partial),
        frontier=tuple(front),
        chosen=pick,
        toml=toml,
        measured=run.measured,
        reused=run.reused,
        replayed_sessions=run.replayed_sessions,
        replayed_requests=run.replayed_requests,
        version=__version__,
        skipped=inputs.skipped,
        excluded=inputs.excluded,
    )


def _planned(search: str, settings: int, sessions: int) -> int:
    """How many measurements the search makes (before the cache answers any)."""
    if search != "halving":
        return settings
    total = 0
    for _ in halving_rounds(settings, sessions):
        total += settings
        settings = (settings + 1) // 2
    return total


def _search(
    run: _Run, search: str, settings: list[Setting], objective: str, seed: int
) -> tuple[list[tuple[Setting, SettingResult]], list[SettingResult]]:
    every = run.sessions
    if search != "halving":
        return [(s, run.measure(s, every)) for s in settings], []
    rounds: list[tuple[int, Any]] = halving(
        settings,
        every,
        lambda s, subset: (s, run.measure(s, subset)),
        lambda pairs: ranked([r for _, r in pairs], objective),
        seed,
    )
    last = max(r for r, _ in rounds)
    final = [pair for r, pair in rounds if r == last]
    survivors = {s for s, _ in final}
    latest: dict[Setting, SettingResult] = {}
    for _, (s, res) in rounds:
        if s not in survivors:
            latest[s] = res
    return final, list(latest.values())


class _Run:
    """One sweep's measuring: the cache first, else one batch call per setting."""

    def __init__(
        self,
        *,
        sources: list[str],
        sessions: tuple[str, ...],
        base: PipelineConfig,
        provider: str | None,
        model: str | None,
        jobs: int | None,
        default: Setting,
        cache: ResultCache | None,
        inputs_hash: str,
        progress: Progress | None,
    ):
        self.sources = sources
        self.sessions = sessions
        self.jobs = jobs
        self.base = base
        self.provider = provider
        self.model = model
        self.default = default
        self.cache = cache
        self.inputs_hash = inputs_hash
        self.progress = progress
        self.planned = 0
        self.measured = 0
        self.reused = 0
        self.replayed_sessions = 0
        self.replayed_requests = 0
        # The default point is also a grid setting (or a halving survivor): measure each
        # setting on each set of sessions once.
        self.seen: dict[tuple[Setting, tuple[str, ...]], SettingResult] = {}

    def measure(self, setting: Setting, sessions: Sequence[str]) -> SettingResult:
        """The setting's figures on ``sessions`` (in session id order): from this run,
        the cache or the batch engine (one call)."""
        sessions = tuple(sorted(sessions))
        known = self.seen.get((setting, sessions))
        if known is not None:
            return known
        config = setting_config(self.base, setting)
        key = ""
        metrics = None
        if self.cache is not None:
            key = ResultCache.key(
                setting=[[k, v] for k, v in setting.items],
                rules_version=Pipeline.from_config(config).version,
                inputs=self.inputs_hash,
                sessions=list(sessions),
                provider=self.provider,
                model=self.model,
                version=__version__,
            )
            metrics = self.cache.get(key)
        cached = metrics is not None
        if metrics is None:
            metrics = _batch.measure(
                self.sources,
                config,
                provider=self.provider,
                model=self.model,
                sessions=sessions,
                jobs=self.jobs,
            )
            if self.cache is not None:
                self.cache.put(key, metrics)
            self.measured += 1
            self.replayed_sessions += len(metrics)
            self.replayed_requests += sum(m.requests for m in metrics)
        else:
            self.reused += 1
        result = aggregate(
            setting.as_dict(),
            setting.label,
            metrics,
            default=setting == self.default,
            cached=cached,
        )
        self.seen[(setting, sessions)] = result
        if self.progress is not None:
            self.progress(self.measured + self.reused, self.planned, setting.label)
        return result
