"""Per-model constants fitted on recorded requests with usage (``ctxrules calibrate``).

The estimator is the wire's own (``Provider.estimate_prompt``); what is fitted are the
numbers of the model's profile it reads: the prose and structured calibrations, the
tool prompt, and the wire's framing rules.  The estimate is linear in each of them,
so each one's effect on every request is measured by estimating again with that
number nudged (no rule is written a second time here), and the changes are found by
least squares on the relative errors, pulled towards the current values (a ridge) so
that few requests cannot move a constant they say little about.

A number is fitted only where enough requests are about it (``MIN_REQUESTS_PER_NUMBER``
exercising it, as many more in the fit for each number fitted, and
``MIN_CALIBRATION_REQUESTS`` for the calibration); otherwise it is kept, and the
report says so with the count that fell short.  The ridge alone let three to six
requests move every constant: the held-out error grew from 5 % to 95 % (Claude Sonnet
4) while the fitted one shrank.

Only amounts are fitted, never a rule's on/off word (Gemini's ``response_schema_text``,
``thinking``, …): a number whose 0 meant "not counted" would make the estimate jump at
the first nudge, and the fit would switch the rule on (``tests/calibration`` checks that
every fitted number moves the estimate in proportion on the corpus).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from ..errors import ValidationError
from ..providers import resolve_model
from ..providers.models import ModelProfile
from .observe import Observation, estimate_observation, sources_of

__all__ = ["ModelFit", "Parameter", "calibrate", "errors_summary", "to_toml"]


class Parameter(msgspec.Struct, frozen=True):
    """One fitted number: where it lives in the profile (``field``, or ``rule`` for an
    estimator rule), the step it is nudged by and the scale of the ridge's pull."""

    name: str
    step: float
    scale: float
    rule: bool = False


#: What is fitted, per wire (a parameter no request exercises is left as it is).
PARAMETERS: dict[str, tuple[Parameter, ...]] = {
    "anthropic": (
        Parameter("calibration", 0.01, 0.15),
        Parameter("structured_calibration", 0.01, 0.15),
        Parameter("tool_prompt_tokens", 10, 150),
        Parameter("tool_block", 1, 15, rule=True),
        Parameter("request", 1, 10, rule=True),
        Parameter("message", 1, 5, rule=True),
        Parameter("output_format", 1, 100, rule=True),
        Parameter("thinking_prompt", 1, 50, rule=True),
    ),
    # Chat reads a call's tokens from ``chat_tool_call`` where the request declares
    # tools (the GPT-4 models' differs from ``tool_call``); Responses from ``tool_call``
    # (GPT-4.1 where the request declares tools: ``responses_tool_call``, kept as it is).
    "openai-chat": (
        Parameter("calibration", 0.01, 0.05),
        Parameter("tool_prompt_tokens", 10, 60),
        Parameter("message", 1, 2, rule=True),
        Parameter("chat_tool_call", 1, 6, rule=True),
        Parameter("response_format", 1, 30, rule=True),
    ),
    "openai-responses": (
        Parameter("calibration", 0.01, 0.05),
        Parameter("tool_prompt_tokens", 10, 60),
        Parameter("message", 1, 2, rule=True),
        Parameter("tool_call", 1, 6, rule=True),
        Parameter("response_format", 1, 30, rule=True),
    ),
    "gemini": (
        Parameter("calibration", 0.01, 0.15),
        Parameter("structured_calibration", 0.01, 0.15),
        Parameter("tool_prompt_tokens", 10, 60),
        Parameter("function_part", 1, 6, rule=True),
        # Per content (Gemini 3: 1.6; 0 before it, whose contents bill nothing more).
        Parameter("message", 1, 2, rule=True),
        # The amount only: whether a schema is billed at all is the profile's word
        # ``response_schema_text``, never fitted, so this column is empty (and the
        # number left as it is) for a model that does not bill schemas.
        Parameter("response_schema", 1, 30, rule=True),
    ),
}
#: Fewer requests than this exercising a number (its column is not 0 on them), and the
#: number is kept as the profile has it; likewise for the per-model ``calibration``
#: (which every request exercises) under ``MIN_CALIBRATION_REQUESTS``.  Chosen on the
#: corpus's fit set alone, split by repository into two halves, each fitted and
#: measured on the other: the smallest values that do not leave the held-out half worse
#: than the profile did (docs/model-profiles.md).  With fewer, a fit of 3–6 requests
#: took Claude Sonnet 4's held-out error from 5 % to 95 %.
MIN_REQUESTS_PER_NUMBER = 4
MIN_CALIBRATION_REQUESTS = 4
#: The ridge's weight: moving a parameter by its ``scale`` costs as much as a 1 %
#: error on one request.
RIDGE = 1e-4
#: A request the first fit leaves further off than this (and than 3 x the median) is
#: left out of the second.
OUTLIER = 0.25


def _value(profile: ModelProfile, p: Parameter) -> float:
    if p.rule:
        return float(profile.rule(p.name, 0) or 0)
    return float(getattr(profile, p.name))


def _with(profile: ModelProfile, values: dict[str, float], params: Sequence[Parameter]) -> Any:
    fields: dict[str, Any] = {}
    rules = dict(profile.estimator)
    for p in params:
        v = values[p.name]
        if p.rule:
            rules[p.name] = v
        elif p.name == "tool_prompt_tokens":
            delta = round(v) - profile.tool_prompt_tokens
            fields["tool_prompt_tokens"] = max(0, round(v))
            fields["tool_prompt_tokens_forced"] = max(0, profile.tool_prompt_tokens_forced + delta)
        else:
            fields[p.name] = v
    return msgspec.structs.replace(profile, estimator=rules, **fields)


def _flagged(o: Observation) -> bool:
    """Whether the request's estimate is flagged: it holds content of unknown size,
    and states a range instead of a figure (docs/model-profiles.md)."""
    return "input_tokens_range" in estimate_observation(o).rules


def _estimates(
    obs: Sequence[Observation],
    values: dict[str, float] | None = None,
    params: Sequence[Parameter] = (),
) -> list[float]:
    """Each request's estimate with its own model's profile, ``values`` set in it."""
    out = []
    for o in obs:
        profile = resolve_model(o.spec)
        if values is not None:
            profile = _with(profile, values, params)
        out.append(float(estimate_observation(o, profile).input_tokens))
    return out


def _least_squares(
    fit: Sequence[Observation],
    e0: Sequence[float],
    columns: Sequence[tuple[Parameter, list[float]]],
    rows: Iterable[int],
) -> list[float]:
    """The parameter changes that minimise the squared relative errors of ``rows``
    plus the ridge's pull towards no change."""
    k = len(columns)
    ata = [[0.0] * k for _ in range(k)]
    atb = [0.0] * k
    for i in rows:
        w = 1.0 / fit[i].billed
        r = (fit[i].billed - e0[i]) * w
        for x, (_, cx) in enumerate(columns):
            atb[x] += cx[i] * w * r
            for y, (_, cy) in enumerate(columns):
                ata[x][y] += cx[i] * w * cy[i] * w
    for x, (p, _) in enumerate(columns):
        ata[x][x] += RIDGE / (p.scale * p.scale)
    return _solve(ata, atb) if k else []


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Solve the square system ``a x = b`` (Gaussian elimination, partial pivoting)."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for c in range(n):
        pivot = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[pivot][c]) < 1e-12:
            continue
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(n):
            if r != c and m[r][c]:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] if abs(m[i][i]) >= 1e-12 else 0.0 for i in range(n)]


def errors_summary(errors: Sequence[float]) -> dict[str, float]:
    """n, median and p90 of the absolute errors, and the worst with its sign."""
    if not errors:
        return {"n": 0}
    absolute = sorted(abs(e) for e in errors)
    return {
        "n": len(errors),
        "median": statistics.median(absolute),
        "p90": absolute[round(0.9 * (len(absolute) - 1))],
        "worst": max(errors, key=abs),
    }


class ModelFit(msgspec.Struct, kw_only=True):
    """The fit of one model: the pattern the profile entry will match, what changed
    (``before`` / ``after`` per parameter), and the errors (estimate ÷ billed − 1) on
    the fit requests and on the held-out ones, before and after."""

    wire: str
    model: str
    pattern: str
    fit_requests: int
    validation_requests: int
    before: dict[str, float]
    after: dict[str, float]
    fit_before: dict[str, float]
    fit_after: dict[str, float]
    validation_before: dict[str, float]
    validation_after: dict[str, float]
    profile: ModelProfile
    #: The numbers left as the profile has them because too few of the fitted
    #: requests exercise them, each with how many do (``MIN_REQUESTS_PER_NUMBER``).
    kept: dict[str, int] = {}


def _errors(est: Sequence[float], obs: Sequence[Observation]) -> list[float]:
    return [e / o.billed - 1 for e, o in zip(est, obs)]


def _pattern(wire: str, model: str) -> str:
    family = "openai*" if wire.startswith("openai") else wire
    return f"{family}:{model}"


def _supported(
    columns: Sequence[tuple[Parameter, list[float]]], rows: Sequence[int]
) -> tuple[list[tuple[Parameter, list[float]]], dict[str, int]]:
    """The columns to fit, and the numbers kept for want of requests (each with the
    count that fell short: the requests exercising it, or all of them where they do
    not support one more number).  Each fitted number needs ``MIN_REQUESTS_PER_NUMBER``
    requests exercising it and as many more in the fit; the calibration needs
    ``MIN_CALIBRATION_REQUESTS``.  The numbers most requests exercise go first (the
    wire's order among equals).  A fit of more numbers than the requests support
    follows their noise: the held-out error then grows while the fitted one shrinks."""
    support = [sum(1 for i in rows if abs(col[i]) > 1e-9) for _, col in columns]
    order = sorted(range(len(columns)), key=lambda x: -support[x])
    chosen: set[int] = set()
    kept: dict[str, int] = {}
    for x in order:
        p = columns[x][0]
        if support[x] == 0:
            continue  # no fitted request is about it: left as it is, nothing to say
        need = MIN_CALIBRATION_REQUESTS if p.name == "calibration" else MIN_REQUESTS_PER_NUMBER
        if support[x] < need:
            kept[p.name] = support[x]
        elif (len(chosen) + 1) * MIN_REQUESTS_PER_NUMBER > len(rows):
            kept[p.name] = len(rows)
        else:
            chosen.add(x)
    return [c for x, c in enumerate(columns) if x in chosen], kept


def fit_model(
    fit: Sequence[Observation],
    held_out: Sequence[Observation],
    params: Sequence[Parameter] | None = None,
) -> ModelFit:
    """Fit the parameters (``params``, default the wire's ``PARAMETERS``) on ``fit``
    and measure them on ``held_out``.  The requests may be of several models of one
    wire (a pooled fit of rules they share): each is estimated with its own profile,
    the fitted numbers set in it."""
    o0 = fit[0]
    base = resolve_model(o0.spec)
    params = PARAMETERS.get(o0.wire, ()) if params is None else params
    values = {p.name: _value(base, p) for p in params}
    at = _estimates(fit, values, params)
    columns: list[tuple[Parameter, list[float]]] = []
    for p in params:
        nudged = _estimates(fit, {**values, p.name: values[p.name] + p.step}, params)
        col = [(n - e) / p.step for n, e in zip(nudged, at)]
        if any(abs(c) > 1e-9 for c in col):
            columns.append((p, col))
    e0 = at
    # A request whose estimate is flagged (content the body does not hold: a server
    # tool's results, a stored conversation, an image by URL) and is off by more than
    # ``OUTLIER`` was billed for what no constant describes: it is measured, not fitted
    # on (such requests pulled a calibration to 0 where they were most of a model's).
    rows = [i for i, o in enumerate(fit) if abs(e0[i] / o.billed - 1) <= OUTLIER or not _flagged(o)]
    columns, unfitted = _supported(columns, rows)
    delta = _least_squares(fit, e0, columns, rows) if rows else [0.0] * len(columns)
    # Robust: requests the first fit leaves far off (content the body holds but the
    # estimator does not read) are left out of the second.
    first = {
        i: abs((e0[i] + sum(d * c[i] for d, (_, c) in zip(delta, columns))) / fit[i].billed - 1)
        for i in rows
    }
    cut = max(OUTLIER, 3 * statistics.median(first.values())) if first else OUTLIER
    kept = [i for i, e in first.items() if e <= cut]
    if len(kept) >= max(1, len(columns)) and len(kept) < len(rows):
        delta = _least_squares(fit, e0, columns, kept)
    after = dict(values)
    for (p, _), d in zip(columns, delta):
        v = values[p.name] + d
        if p.name in _FACTORS and v <= 0:
            # A calibration is a factor > 0 (a profile with 0 is refused): the fit
            # says nothing it can use, and the number is left as it is.
            v = values[p.name]
        v = max(0.0, v)
        after[p.name] = round(v, 3) if v < 10 else round(v, 1)
    before_fit = _estimates(fit)
    return ModelFit(
        wire=o0.wire,
        model=o0.model if len({o.model for o in fit}) == 1 else "*",
        pattern=_pattern(o0.wire, o0.model),
        fit_requests=len(fit),
        validation_requests=len(held_out),
        before=values,
        after={p.name: after[p.name] for p, _ in columns},
        kept=unfitted,
        fit_before=errors_summary(_errors(before_fit, fit)),
        fit_after=errors_summary(_errors(_estimates(fit, after, params), fit)),
        validation_before=errors_summary(_errors(_estimates(held_out), held_out)),
        validation_after=errors_summary(_errors(_estimates(held_out, after, params), held_out)),
        profile=_with(base, after, params),
    )


def calibrate(
    observations: Sequence[Observation],
    validation: Sequence[Observation] | None = None,
    *,
    min_requests: int = 3,
) -> list[ModelFit]:
    """Fit every model with at least ``min_requests`` requests in ``observations``.

    ``validation`` are the held-out requests the fit is measured on; without them every
    fourth source (file) is held out when there are two or more.
    """
    if min_requests < 1:
        raise ValidationError(f"min_requests must be >= 1, got {min_requests}")
    if validation is None:
        sources = sorted(sources_of(observations))
        held = set(sources[3::4]) if len(sources) >= 2 else set()
        if len(sources) >= 2 and not held:
            held = {sources[-1]}
        validation = [o for o in observations if o.source in held]
        observations = [o for o in observations if o.source not in held]
    by_model: dict[tuple[str, str], list[Observation]] = {}
    for o in observations:
        by_model.setdefault((o.wire, o.model), []).append(o)
    out = []
    for (wire, model), obs in sorted(by_model.items()):
        if len(obs) < min_requests:
            continue
        held_out = [o for o in validation if o.wire == wire and o.model == model]
        out.append(fit_model(obs, held_out))
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else "0.0"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_toml(fits: Sequence[ModelFit], *, sources: Sequence[str] = ()) -> str:
    """The fitted constants as a profile ``ctxrules.providers.load_profile`` reads: one
    ``[[model]]`` per model, each number with its basis."""
    when = datetime.now(UTC).strftime("%Y-%m-%d")
    lines = [
        f"# ctxrules calibrate, {when}: per-model constants fitted on recorded usage",
        f"# from {len(sources)} file(s).  Load with ctxrules.providers.load_profile(path)",
        "# or CTXRULES_MODEL_PROFILE=path.",
        "",
    ]
    for f in fits:
        if not f.after:
            continue  # every number kept: nothing to write for this model
        basis = (
            f"calibrated: {f.fit_requests} requests; fit p90 "
            f"{f.fit_after.get('p90', 0) * 100:.1f} %"
            + (
                f", validation p90 {f.validation_after['p90'] * 100:.1f} % "
                f"on {f.validation_requests}"
                if f.validation_after.get("n")
                else ", no held-out requests"
            )
        )
        fields = {k: v for k, v in f.after.items() if k in _FIELDS}
        rules = {k: v for k, v in f.after.items() if k not in _FIELDS}
        lines += ["[[model]]", f"pattern = {_toml_value(f.pattern)}"]
        if "calibration" in fields or "structured_calibration" in fields:
            lines.append(f"tokenizer = {_toml_value(f.profile.tokenizer)}")
            lines.append(f"calibration = {_toml_value(float(f.profile.calibration))}")
            lines.append(
                f"structured_calibration = {_toml_value(float(f.profile.structured_calibration))}"
            )
        if "tool_prompt_tokens" in fields:
            lines.append(f"tool_prompt_tokens = {f.profile.tool_prompt_tokens}")
            lines.append(f"tool_prompt_tokens_forced = {f.profile.tool_prompt_tokens_forced}")
        if rules:
            lines.append(f"estimator = {_toml_value(rules)}")
        named = sorted({*fields, *rules} - {"structured_calibration"})
        named = ["tokenizer" if n == "calibration" else n for n in named]
        lines.append(f"basis = {_toml_value(dict.fromkeys(named, basis))}")
        lines.append("")
    return "\n".join(lines)


_FIELDS = {"calibration", "structured_calibration", "tool_prompt_tokens"}
#: The fitted numbers that are factors, > 0 in every profile.
_FACTORS = {"calibration", "structured_calibration"}
