"""TEMPORARY ADAPTER — stands in for the batch re-render engine until it lands.

``ctxrules rerender`` (its library, ``ctxrules.batch``) replays sessions request by
request under a configuration and reports per-session metrics.  Until it is merged,
this module gives tune the same shape of call through a deliberately thin replay made
of existing pieces (``replay.request_for`` / ``explain_request`` per recorded answer,
``quality.check_quality`` at HEAD, each rule's ``check_promise`` on every request's
commit).  It does not run the turn engine, so it reports no compactions (0).
Replace the body of ``measure`` (and ``open_inputs``) by the batch call; nothing else
in ``ctxrules.tune`` knows how sessions are replayed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..commit import Pipeline
from ..config import PipelineConfig
from ..providers import get_provider, resolve_model
from ..quality import check_quality
from ..replay import explain_request, render_defaults, request_for, session_tool_names
from ..store import CommitStore, open_store
from ..store.copy import copy_store
from .results import SessionMetrics

__all__ = ["Inputs", "measure", "open_inputs"]


@dataclass
class Inputs:
    """The sessions of the sources, imported once into an in-memory store."""

    store: CommitStore
    sessions: tuple[str, ...]

    def close(self) -> None:
        """Release the in-memory store."""
        self.store.close()


def is_store(source: str) -> bool:
    """Whether ``source`` names a store rather than transcript files."""
    if source.startswith(("postgresql://", "postgres://", "memory:")):
        return True
    p = Path(source)
    return p.suffix == ".db" or (p / "ctxrules.db").is_file()


def open_inputs(sources: Sequence[str]) -> Inputs:
    """Import ``sources`` (transcripts, folders, or stores copied whole) into a private
    in-memory store; sessions in the store's order."""
    from ..importers import import_paths

    store = open_store("memory:")
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
    return Inputs(store, tuple(info.id for info in store.list_sessions()))


def measure(
    inputs: Inputs,
    config: PipelineConfig,
    *,
    provider: str,
    model: str | None,
    sessions: Sequence[str],
) -> list[SessionMetrics]:
    """Replay ``sessions`` of ``inputs`` under ``config``: one ``SessionMetrics`` each."""
    pipeline = Pipeline.from_config(config)
    prov = get_provider(provider)
    out = []
    for sid in sessions:
        store = inputs.store
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
            prices = resolve_model(f"{prov.name}:{ex['model']}").prices
            if prices is None or cost is None:
                cost = None
            else:
                r, w = ex["cache_read_tokens"], ex["cache_write_tokens"]
                fresh = ex["input_tokens"] - r - w
                cost += (
                    fresh * prices.input + r * prices.cache_read + w * prices.cache_write
                ) / 1e6
            for rule in pipeline.rules:
                violations += [
                    f"{sid}: {rule.name}: {m}" for m in rule.check_promise(request.commit)
                ]
        report = check_quality(
            sid, None, now=last, store=store, config=pipeline, provider=provider, model=model
        )
        out.append(
            SessionMetrics(
                session_id=sid,
                requests=requests,
                prompt_tokens=prompt,
                cache_read_tokens=read,
                cost_usd=cost,
                compactions=0,
                quality=report.found / report.total if report.total else None,
                violations=tuple(violations),
            )
        )
    return out
