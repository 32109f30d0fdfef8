"""What a sweep measures: per session, and per setting over its sessions.

``SessionMetrics`` is one session replayed under one setting (what the batch engine
reports for it); ``SettingResult`` sums them for a setting.  Sums are plain sums
(requests, tokens, cost, compactions); the quality score is the older-fact recall
pooled over the sessions' requests (``ctxrules.quality.needed``: of the identifiers
each answer used that an earlier message held and its request's newest input did not,
the share the request still showed; 1 when nothing was needed, as nothing was lost).
A setting is usable only with no violations (a session it could not replay counts as
one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

__all__ = ["OBJECTIVES", "SessionMetrics", "SettingResult", "aggregate"]

#: What ``--objective`` may minimise, and the ``SettingResult`` field it reads.
OBJECTIVES: dict[str, str] = {"cost": "cost_usd", "tokens": "prompt_tokens"}


class SessionMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """One session replayed under one configuration.

    ``prompt_tokens`` is the billed prompt of every request summed (input + cache
    reads + cache writes); ``cache_read_tokens`` the part predicted to be read from
    the provider's prompt cache; ``cost_usd`` the replay's cost at the model profile's
    prices (prompts with their cache reads and writes, and the answers' output, which
    no rule changes; ``None``: the model has no price), ``input_cost_usd`` its prompts'
    part; ``compactions`` those the engine made; ``kept`` of ``needed`` facts the
    answers used were in their requests, ``older_kept`` of ``older_needed`` of those
    not in the requests' newest input (``ctxrules.quality.needed``);
    ``violations`` one message per broken invariant or promise; ``error`` why the
    session could not be replayed (its figures are then zeros).
    """

    session_id: str
    requests: int
    prompt_tokens: int
    cache_read_tokens: int
    cost_usd: float | None
    compactions: int
    older_kept: int
    older_needed: int
    kept: int = 0
    needed: int = 0
    input_cost_usd: float | None = None
    violations: tuple[str, ...] = ()
    error: str | None = None


class SettingResult(msgspec.Struct, frozen=True, kw_only=True):
    """A setting measured over ``sessions`` sessions (the sums of their metrics).

    ``setting`` maps ``rule.param`` to the swept value; ``label`` names it in tables
    and plots; ``default`` marks the tuned configuration itself (no value changed);
    ``cached`` says the figures came from the cache of an earlier run.
    ``violations`` holds the first few messages, ``violation_count`` all of them.
    """

    setting: dict[str, Any]
    label: str
    sessions: int
    requests: int
    prompt_tokens: int
    cache_read_tokens: int
    cost_usd: float | None
    compactions: int
    quality: float
    violation_count: int
    violations: tuple[str, ...]
    per_session: tuple[SessionMetrics, ...]
    default: bool = False
    cached: bool = False

    @property
    def ok(self) -> bool:
        """Whether the setting broke nothing (only such settings can be chosen)."""
        return self.violation_count == 0

    def objective(self, name: str) -> float:
        """The value ``--objective name`` minimises (an unpriced cost is infinite)."""
        value = getattr(self, OBJECTIVES[name])
        return float("inf") if value is None else float(value)


#: How many violation messages a ``SettingResult`` keeps (the count is complete).
KEPT_VIOLATIONS = 5


def aggregate(
    setting: Mapping[str, Any],
    label: str,
    metrics: Sequence[SessionMetrics],
    *,
    default: bool = False,
    cached: bool = False,
) -> SettingResult:
    """Sum the sessions' metrics of one setting (see the module docstring)."""
    costs = [m.cost_usd for m in metrics]
    # A session the setting could not replay makes the setting as unusable as a
    # broken invariant does.
    violations = [v for m in metrics for v in m.violations] + [
        f"{m.session_id}: not replayed: {m.error}" for m in metrics if m.error is not None
    ]
    found = sum(m.older_kept for m in metrics)
    total = sum(m.older_needed for m in metrics)
    return SettingResult(
        setting=dict(setting),
        label=label,
        sessions=len(metrics),
        requests=sum(m.requests for m in metrics),
        prompt_tokens=sum(m.prompt_tokens for m in metrics),
        cache_read_tokens=sum(m.cache_read_tokens for m in metrics),
        cost_usd=None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
        compactions=sum(m.compactions for m in metrics),
        quality=found / total if total else 1.0,
        violation_count=len(violations),
        violations=tuple(violations[:KEPT_VIOLATIONS]),
        per_session=tuple(metrics),
        default=default,
        cached=cached,
    )
