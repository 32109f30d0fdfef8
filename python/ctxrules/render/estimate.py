"""What a rendered request will cost: the billed-prompt estimate (``estimate_request``),
the session-constant layer's tokens (``header_tokens``) and the full breakdown with the
predicted prompt-cache use against the previous request (``explain``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..commit import diff_commits
from ..errors import ValidationError
from ..model import ContextCommit, ToolSpec
from ..providers.base import NativeForm, Provider, RenderedRequest
from ..providers.estimate import Estimate, RequestEstimate, prompt_estimate
from .native import explain_round_trip
from .options import SystemArg, layer_texts, provider_of, system_blocks, tool_tuple
from .single import render

__all__ = ["CacheHit", "estimate_request", "explain", "header_tokens"]


class CacheHit(msgspec.Struct, frozen=True, kw_only=True):
    """Predicted prompt-cache reuse between two consecutive requests of a session.

    ``shared_tokens`` is the number of leading tokens both requests carry unchanged
    (header + unchanged item prefix); ``total_tokens`` the current request's size.
    """

    shared_items: int
    shared_tokens: int
    total_tokens: int

    @property
    def ratio(self) -> float:
        """Shared fraction of the current request (0.0 when it is empty)."""
        return self.shared_tokens / self.total_tokens if self.total_tokens else 0.0


def header_tokens(
    provider: Provider | str,
    model: str | None = None,
    *,
    system: SystemArg = None,
    tools: Sequence[ToolSpec | Mapping[str, Any]] = (),
) -> int:
    """Tokens of the session-constant layer (system text + tool declarations), estimated
    with the model's tokenizer and calibration (``ModelProfile.estimate_tokens``, one
    batch count)."""
    prov = provider_of(provider)
    texts = [b.text for b in system_blocks(system, None)]
    texts += [msgspec.json.encode(t).decode() for t in tool_tuple(tools)]
    if not texts:
        return 0
    return prov.model_profile(model or prov.default_model).estimate_tokens(texts)


def _shared_items(previous: ContextCommit, current: ContextCommit) -> int:
    """Leading commit items both requests show unchanged (``diff_commits``); none when
    the commit's system items changed, since they precede every message."""

    def system_items(c: ContextCommit) -> list[str]:
        return [i.rendered for i in c.items if i.role == "system" and i.state != "summarized"]

    if system_items(previous) != system_items(current):
        return 0
    return diff_commits(previous, current).prefix_items


def estimate_request(
    rendered: RenderedRequest, provider: str | Provider, *, prefix_tokens: int = 0
) -> Estimate:
    """The billed prompt of a rendered request: input + cache writes + cache reads, in
    segments, led by ``prefix_tokens`` the body does not hold.  The estimate made with
    the body (``render(…, estimate=True)``) when it has one — nothing is estimated
    again —, else ``Provider.estimate_prompt`` on the body with its model's profile."""
    made = rendered.estimate
    if made is not None and made.prefix_tokens == prefix_tokens:
        return made
    if isinstance(made, RequestEstimate):
        if prefix_tokens < 0:
            raise ValidationError(
                f"prefix_tokens must be >= 0, got {prefix_tokens}",
                hint="the unrecorded prefix is what a harness sends before the body",
            )
        return made.with_prefix(prefix_tokens)  # the same segments, summed again
    prov = provider_of(provider)
    profile = prov.model_profile(rendered.model)
    return prov.estimate_prompt(
        msgspec.json.decode(rendered.body), profile, prefix_tokens=prefix_tokens
    )


def explain(
    commit: ContextCommit,
    provider: str | Provider,
    model: str | None = None,
    *,
    previous: ContextCommit | None = None,
    previous_situation: SystemArg = None,
    previous_model: str | None = None,
    elapsed_seconds: float | None = None,
    prefix_tokens: int = 0,
    **options: Any,
) -> dict[str, Any]:
    """Render and break the request down: the billed-prompt estimate, tokens per layer and
    category, items per state, cache breakpoints, and the predicted cache use.

    ``input_tokens`` is the provider's billed prompt for this body (input + cache writes
    + cache reads), ``estimate`` the rules it applied; ``cache_read_tokens`` /
    ``cache_write_tokens`` follow the provider's cache rules against the previous
    request: ``previous`` (its commit) rendered with ``previous_situation`` as its L1
    text, ``previous_model`` (``None``: this request's) and the same other options,
    sent ``elapsed_seconds`` before this one (``None``: unknown, taken as within the
    cache's lifetime).  A vendor caches per model: after a model switch nothing is read
    (``cache.reason`` says so).  ``prefix_tokens`` are tokens the
    caller's harness sends before the body's content that the body does not hold (an
    agent's own system prompt and tool schemas).  The ``tokens`` block counts the
    commit's own items with its encoding, as ``ctxrules commit`` does.  Other options
    work as in ``render``.
    """
    prov = provider_of(provider)
    rendered = render(commit, prov, model, estimate=True, **options)
    profile = prov.model_profile(rendered.model)
    estimate = estimate_request(rendered, prov, prefix_tokens=prefix_tokens)
    before = None
    switched = False
    if previous is not None:
        earlier = render(
            previous,
            prov,
            previous_model or model,
            estimate=True,
            **{**options, "situation": previous_situation},
        )
        switched = earlier.model != rendered.model
        if not switched:  # a cache is per model: a switch leaves nothing to read
            before = estimate_request(earlier, prov, prefix_tokens=prefix_tokens)
    cache = prov.predict_cache(before, estimate, elapsed=elapsed_seconds, profile=profile)
    if switched:
        cache = msgspec.structs.replace(
            cache, reason=f"model switch from {earlier.model}: the cache is per model"
        )
    situation_arg = options.get("situation")
    header = header_tokens(
        prov, rendered.model, system=options.get("system"), tools=options.get("tools", ())
    )
    situation = header_tokens(prov, rendered.model, system=situation_arg)
    item_tokens = rendered.meta.get("item_tokens", {})
    states: dict[str, dict[str, int]] = {}
    for it in commit.items:
        s = states.setdefault(it.state, {"items": 0, "tokens": 0})
        s["items"] += 1
        s["tokens"] += it.tokens if it.state != "summarized" else 0
    same_frame = layer_texts(previous_situation) == layer_texts(situation_arg)
    shared_items = _shared_items(previous, commit) if previous is not None and same_frame else 0
    total = estimate.input_tokens
    native = options.get("native")
    extra: dict[str, Any] = {}
    if isinstance(native, NativeForm):
        # A replayed recording: what went out as recorded, and what a rule changed.
        extra["round_trip"] = explain_round_trip(rendered.meta, native, commit)
    return {
        "provider": prov.name,
        "model": rendered.model,
        "endpoint": rendered.endpoint,
        "commit": commit.id,
        "body_bytes": len(rendered.body),
        "messages": rendered.meta.get("messages"),
        "degraded_tool_items": rendered.meta.get("degraded", 0),
        "input_tokens": total,
        "estimate": prompt_estimate(estimate).rules,
        "cache_read_tokens": cache.read_tokens,
        "cache_write_tokens": cache.write_tokens,
        "cache": {
            "rule": cache.rule,
            "warm": cache.warm,
            "ttl_seconds": cache.ttl_seconds,
            "elapsed_seconds": cache.elapsed_seconds,
            "min_tokens": cache.min_tokens,
            "reason": cache.reason,
        },
        "tokens": {
            "L0_session": header,
            "L1_situation": situation,
            # System nodes of the history: L0 before the first message, L1 after it.
            "system_items": int(item_tokens.get("system", 0)),
            "L2_task": {k: int(v) for k, v in item_tokens.items() if k != "system"},
            "total": header + situation + sum(int(v) for v in item_tokens.values()),
        },
        "states": states,
        "breakpoints": rendered.meta.get("breakpoints", []),
        # The same prediction in the older shape: the prefix shared with the previous
        # request, of this request's billed tokens; ``ratio`` is the share read.
        "predicted_cache": {
            "previous_commit": previous.id if previous is not None else None,
            "shared_items": shared_items,
            "shared_tokens": cache.shared_tokens,
            "total_tokens": total,
            "ratio": round(cache.read_tokens / total, 4) if total else 0.0,
        },
        **extra,
    }
