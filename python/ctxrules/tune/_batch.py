"""TEMPORARY ADAPTER — stands in for the batch re-render engine until it is merged.

The batch engine (``ctxrules.batch``: ``open_sources`` for the sessions of the
sources, ``rerender(sources, options, sessions=…)`` to replay them under one
configuration) is what tune measures with: one ``measure`` call per setting.  Until
it lands on main, this module gives tune the same two calls through a deliberately
thin replay made of existing pieces: the sources read once into an in-memory store
(``opened``), ``replay.request_for`` /
``explain_request`` per recorded answer, ``quality.check_quality`` at HEAD, each
rule's ``check_promise`` on every request's commit.  It does not run the turn
engine, so it reports no compactions (0), and ``jobs`` is ignored.

Replacing it means: ``opened`` keeps stores as they are (the batch engine replays
in fresh memory stores of its own, so it writes nothing to them) and takes the
session ids from ``batch.open_sources``; ``measure`` becomes one ``batch.rerender``
call and the mapping of its records.  Nothing else in ``ctxrules.tune`` knows how
sessions are replayed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..commit import Pipeline
from ..config import PipelineConfig
from ..errors import ConfigError
from ..providers import Provider, get_provider, resolve_model
from ..quality import check_quality
from ..render import check_model
from ..replay import explain_request, render_defaults, request_for, session_tool_names
from ..store import CommitStore, open_store
from ..store.copy import copy_store
from ..store.memory import forget
from .results import SessionMetrics

__all__ = ["Inputs", "check", "is_store", "measure", "opened"]

#: The provider requests are rendered for when none is named.
_DEFAULT_PROVIDER = "anthropic"


def is_store(source: str) -> bool:
    """Whether ``source`` names a store rather than transcript files."""
    if source.startswith(("postgresql://", "postgres://", "memory:")):
        return True
    p = Path(source)
    return p.suffix == ".db" or (p / "ctxrules.db").is_file()


def check(provider: str | None, model: str | None) -> None:
    """Refuse an unknown provider, or a model of another provider's family, before any
    work starts (custom model names pass, as ``render`` lets them)."""
    prov = get_provider(provider or _DEFAULT_PROVIDER)
    if model is not None:
        check_model(prov, model)


@dataclass(frozen=True)
class Inputs:
    """The sources of a sweep, read once: ``sources`` is what every ``measure`` call
    takes (transcripts imported into one in-memory store, so a sweep does not import
    them again for every setting), ``session_ids`` their sessions sorted by id."""

    sources: tuple[str, ...]
    session_ids: tuple[str, ...]


@contextmanager
def opened(sources: Sequence[str]) -> Iterator[Inputs]:
    """Read ``sources`` once for a sweep (see ``Inputs``); released when the block ends.

    A source that does not exist is a ``ConfigError`` naming it.  Stores are copied
    into the same memory store: this replay stores the commits it makes, and the
    user's store must not get them.
    """
    from ..importers import import_paths

    for s in sources:
        if not is_store(s) and not Path(s).exists():
            raise ConfigError("no such file, folder or store", where=s)
    name = f"tune-{uuid.uuid4().hex}"
    store = open_store(f"memory:{name}")
    try:
        files = [s for s in sources if not is_store(s)]
        if files:
            import_paths(store, files)
        for s in sources:
            if is_store(s):
                src = open_store(s, create=False)
                try:
                    copy_store(src, store)
                finally:
                    src.close()
        ids = tuple(sorted(info.id for info in store.list_sessions()))
        yield Inputs(sources=(f"memory:{name}",), session_ids=ids)
    finally:
        store.close()
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
    """Replay ``sessions`` of ``sources`` under ``config``: one ``SessionMetrics`` each,
    in the order given."""
    pipeline = Pipeline.from_config(config)
    prov = get_provider(provider or _DEFAULT_PROVIDER)
    (location,) = sources
    store = open_store(location, create=False)
    try:
        return [_session(store, sid, pipeline, prov, model) for sid in sessions]
    finally:
        store.close()


def _session(
    store: CommitStore, sid: str, pipeline: Pipeline, prov: Provider, model: str | None
) -> SessionMetrics:
    used = session_tool_names(store, sid)
    requests = prompt = read = 0
    cost: float | None = 0.0
    violations: list[str] = []
    last = 0.0
    for node in store.nodes(sid):
        last = max(last, node.created_at)
        if node.role != "assistant" or node.caller is not None or node.predecessor is None:
            continue
        request = request_for(store, sid, node.id, config=pipeline)
        defaults = render_defaults(store, request, prov, used_tools=used, model=model)
        ex = explain_request(store, request, prov, config=pipeline, defaults=defaults)
        requests += 1
        prompt += ex["input_tokens"]
        read += ex["cache_read_tokens"]
        prices = resolve_model(f"{ex['provider']}:{ex['model']}").prices
        if prices is None or cost is None:
            cost = None
        else:
            r, w = ex["cache_read_tokens"], ex["cache_write_tokens"]
            fresh = ex["input_tokens"] - r - w
            cost += (fresh * prices.input + r * prices.cache_read + w * prices.cache_write) / 1e6
        for rule in pipeline.rules:
            violations += [f"{sid}: {rule.name}: {m}" for m in rule.check_promise(request.commit)]
    report = check_quality(
        sid,
        None,
        now=last,
        store=store,
        config=pipeline,
        provider=prov.name,
        model=model,
    )
    return SessionMetrics(
        session_id=sid,
        requests=requests,
        prompt_tokens=prompt,
        cache_read_tokens=read,
        cost_usd=cost,
        compactions=0,
        facts_found=report.found,
        facts_total=report.total,
        violations=tuple(violations),
    )
