"""The one resolver of ``"provider:model"`` → everything ctxrules knows about a model.

``resolve_model(spec)`` returns a ``ModelProfile``: context window, output limit, the
tokenizer that counts the model and its calibration, the minimum cacheable prompt, and
prices where known.  The facts come from ``ModelInfo`` entries registered through the
``register_models`` hook (built-ins in ``ctxrules.providers._plugin``), each an
``fnmatch`` pattern over ``"provider:model"`` stating some of the fields.

One precedence rule, applied field by field: the most specific matching pattern that
states the field wins (specificity = characters the pattern pins down: a literal
character or a ``[...]`` set counts one, ``*`` and ``?`` nothing); on equal specificity
a plugin's entry beats a built-in one, whatever the load order; between plugins (or
between built-ins) the first registered wins.  ``tokenizer`` and the two calibrations
travel together (a calibration corrects the tokenizer it is stated with), and so do the
two tool prompts and the four prices.  ``openai-chat`` and ``openai-responses`` share
the ``openai*`` entries.

The estimator's per-model rules (``estimator``: framing tokens, the image rule, which
thinking is kept, the thought-signature line, the structured-output overhead …) merge
key by key instead: each key comes from the most specific entry that states it, so a
model's entry states only where it differs from its wire's.  ``basis`` says, key by
key (and for the grouped fields by their first field's name), where a value is from:
``"doc: …"`` (the vendor's published rule), ``"fit: …"`` (fitted on the corpus's fit
set, benches/README.md "Fidelity"), ``"calibrated: …"`` (``ctxrules calibrate``).
"""

from __future__ import annotations

import fnmatch
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import tomllib

from ..errors import ProviderError, ValidationError
from ..plugins import Registry, registry
from ..tokenizers import count_batch
from .usage import Usage

__all__ = [
    "PROFILE_ENV",
    "ModelInfo",
    "ModelProfile",
    "Prices",
    "load_profile",
    "model_entries",
    "model_families",
    "model_in_family",
    "read_profile",
    "resolve_model",
]

#: An environment variable naming profile files (``read_profile``; several joined by
#: the path separator) loaded whenever the model table is built.
PROFILE_ENV = "CTXRULES_MODEL_PROFILE"


class Prices(msgspec.Struct, frozen=True, kw_only=True):
    """USD per million tokens: uncached input, output, cache read, cache write.

    ``cache_write`` is what a token written to the prompt cache costs; for vendors that
    charge no premium for writing (OpenAI) it equals ``input``.
    """

    input: float
    output: float
    cache_read: float
    cache_write: float


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Facts about the models whose ``"provider:model"`` matches ``pattern``.

    What a ``register_models`` hook registers.  ``name`` is the registry key; a field
    left ``None`` is stated by a less specific entry (see the module docstring).
    ``tokenizer`` names a registered tokenizer; ``calibration`` multiplies its counts
    of prose (system text, messages, thinking) into an estimate for a vendor whose
    tokenizer is not public, and ``structured_calibration`` its counts of structured
    payloads (tool definitions, tool inputs and results: JSON, code, data; ``None``:
    the same as ``calibration``); both are only valid with ``tokenizer``.
    ``cache_min_tokens`` is the shortest prompt prefix the vendor caches.
    ``tool_prompt_tokens`` is what the vendor adds to a request that declares tools
    (Anthropic's tool-use system prompt for ``tool_choice`` auto / none, OpenAI's tool
    section), ``tool_prompt_tokens_forced`` the same for a forced choice (Anthropic
    ``any`` / ``tool``; ``None``: as ``tool_prompt_tokens``).
    """

    name: str
    pattern: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    tokenizer: str | None = None
    calibration: float = 1.0
    structured_calibration: float | None = None
    cache_min_tokens: int | None = None
    tool_prompt_tokens: int | None = None
    tool_prompt_tokens_forced: int | None = None
    prices: Prices | None = None
    estimator: dict[str, Any] | None = None
    basis: dict[str, str] | None = None

    def __post_init__(self) -> None:
        where = f"ModelInfo {self.name!r}"
        for key, value in (self.estimator or {}).items():
            _check_rule(key, value, where)
        for key, value in (self.basis or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ValidationError(
                    f"basis must map names to strings, got {key!r}: {value!r}", where=where
                )
        if ":" not in self.pattern:
            raise ValidationError(
                f"pattern {self.pattern!r} is not of the form provider:model",
                where=where,
                hint="e.g. 'anthropic:claude-sonnet-4*' or 'openai*:gpt-4o*'",
            )
        for field in ("context_window", "max_output_tokens", "cache_min_tokens"):
            value = getattr(self, field)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value <= 0
            ):
                raise ValidationError(f"{field} must be a positive int, got {value!r}", where=where)
        for field in ("tool_prompt_tokens", "tool_prompt_tokens_forced"):
            value = getattr(self, field)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                raise ValidationError(f"{field} must be an int >= 0, got {value!r}", where=where)
        for field in ("calibration", "structured_calibration"):
            c = getattr(self, field)
            if c is None and field == "structured_calibration":
                continue
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < math.inf:
                raise ValidationError(
                    f"{field} must be a finite number > 0, got {c!r}",
                    where=where,
                    hint="use 1.0 for an exact tokenizer",
                )
        if self.tokenizer is None and (
            self.calibration != 1.0 or self.structured_calibration is not None
        ):
            raise ValidationError(
                "calibration without tokenizer: a calibration corrects the tokenizer it "
                "is stated with",
                where=where,
                hint="set tokenizer too",
            )


def _check_rule(key: Any, value: Any, where: str) -> None:
    """An estimator rule is a finite number >= 0, a word, or a mapping of those."""
    if not isinstance(key, str) or not key:
        raise ValidationError(f"estimator key {key!r} is not a name", where=where)
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(v, Mapping):
                raise ValidationError(f"estimator rule {key!r}.{k!r} nests too deep", where=where)
            _check_rule(k, v, where)
        return
    if isinstance(value, str):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ValidationError(
            f"estimator rule {key!r} must be a finite number >= 0, a word or a mapping, "
            f"got {value!r}",
            where=where,
        )


# Field groups resolved together, in ModelProfile order.
_GROUPS: tuple[tuple[str, ...], ...] = (
    ("context_window",),
    ("max_output_tokens",),
    ("tokenizer", "calibration", "structured_calibration"),
    ("cache_min_tokens",),
    ("tool_prompt_tokens", "tool_prompt_tokens_forced"),
    ("prices",),
)
_REQUIRED = ("context_window", "max_output_tokens", "tokenizer")


class ModelProfile(msgspec.Struct, frozen=True, kw_only=True):
    """Everything known about one ``"provider:model"`` (see ``resolve_model``).

    ``cache_min_tokens`` and ``prices`` are ``None`` where no entry states them;
    ``structured_calibration`` falls back to ``calibration`` and the tool prompts to 0
    (``tool_prompt_tokens_forced`` to ``tool_prompt_tokens``).
    ``estimator`` holds the per-model rules of the wire estimator (merged key by key;
    ``rule(key, default)`` reads one) and ``basis`` where each rule and field is from.
    ``sources`` names, per field, the ``ModelInfo`` entry that supplied it (an
    estimator rule as ``"estimator.KEY"``).  Profiles
    are shared between callers (each spec is resolved once per registry): read them,
    do not modify ``sources``.
    """

    model: str
    context_window: int
    max_output_tokens: int
    tokenizer: str
    calibration: float
    structured_calibration: float
    cache_min_tokens: int | None
    tool_prompt_tokens: int
    tool_prompt_tokens_forced: int
    prices: Prices | None
    sources: dict[str, str]
    estimator: dict[str, Any] = {}
    basis: dict[str, str] = {}

    def rule(self, key: str, default: Any = None) -> Any:
        """The estimator rule ``key`` of this model (``default`` when no entry states it)."""
        return self.estimator.get(key, default)

    def estimate_tokens(self, texts: Sequence[str]) -> int:
        """Tokens of ``texts`` for this model: the tokenizer's counts (one batch) times the
        calibration, rounded."""
        if not texts:
            return 0
        return round(sum(count_batch(texts, self.tokenizer)) * self.calibration)

    def cost(self, usage: Usage) -> float | None:
        """What ``usage`` costs in USD at this model's prices; ``None`` when unknown."""
        p = self.prices
        if p is None:
            return None
        return (
            usage.input_tokens * p.input
            + usage.cache_read_tokens * p.cache_read
            + usage.cache_write_tokens * p.cache_write
            + usage.output_tokens * p.output
        ) / 1_000_000


def _specificity(pattern: str) -> int:
    n, i = 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "[":
            end = pattern.find("]", i + 2)  # fnmatch: a ']' right after '[' is literal
            if end != -1:
                n, i = n + 1, end + 1
                continue
        if c not in "*?":
            n += 1
        i += 1
    return n


_PROFILE_FIELDS = {
    "pattern",
    "context_window",
    "max_output_tokens",
    "tokenizer",
    "calibration",
    "structured_calibration",
    "cache_min_tokens",
    "tool_prompt_tokens",
    "tool_prompt_tokens_forced",
    "estimator",
    "basis",
}


def read_profile(path: str | os.PathLike[str]) -> list[ModelInfo]:
    """The ``ModelInfo`` entries of a profile file (TOML, as ``ctxrules calibrate``
    writes it): a ``[[model]]`` table per entry with a ``pattern`` and the fields it
    states (``tokenizer`` with its calibrations, tool prompts, ``estimator`` rules,
    ``basis``).  A bad file is a ``ValidationError`` naming the entry."""
    where = os.fspath(path)
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise ValidationError(f"cannot read the profile: {exc}", where=where) from None
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(
            f"not TOML: {exc}", where=where, hint="write it with ctxrules calibrate"
        ) from None
    models = doc.get("model")
    if not isinstance(models, list) or not models:
        raise ValidationError("no [[model]] tables", where=where, hint="one per model pattern")
    out = []
    for i, m in enumerate(models):
        at = f"{where}: model {i + 1}"
        unknown = sorted(set(m) - _PROFILE_FIELDS) if isinstance(m, dict) else []
        if not isinstance(m, dict) or "pattern" not in m or unknown:
            raise ValidationError(
                f"a [[model]] needs a pattern and only known fields (unknown: {unknown})",
                where=at,
                hint=f"fields: {', '.join(sorted(_PROFILE_FIELDS))}",
            )
        try:
            out.append(ModelInfo(name=f"profile:{where}:{i + 1}:{m['pattern']}", **m))
        except (TypeError, ValueError) as exc:
            raise ValidationError(str(exc), where=at) from None
    return out


def load_profile(path: str | os.PathLike[str]) -> list[ModelInfo]:
    """Load a profile file (``read_profile``) into the model table: its entries beat
    the built-in ones of equal specificity, like a plugin's.  Returns them."""
    entries = read_profile(path)
    reg = registry("models")
    for info in entries:
        reg.items[info.name] = info
        reg.origin[info.name] = f"profile {os.fspath(path)}"
    reg.memo.clear()
    return entries


def _env_profiles(reg: Registry) -> None:
    """Load the profiles ``PROFILE_ENV`` names, once per registry."""
    if reg.memo.get("env-profiles"):
        return
    reg.memo["env-profiles"] = True
    for path in filter(None, os.environ.get(PROFILE_ENV, "").split(os.pathsep)):
        for info in read_profile(path):
            reg.items.setdefault(info.name, info)
            reg.origin.setdefault(info.name, f"profile {path}")


def _table(reg: Registry) -> list[ModelInfo]:
    """Registered entries in precedence order (computed once per registry)."""
    table = reg.memo.get("precedence")
    if table is None:
        _env_profiles(reg)
        entries = [
            (-_specificity(obj.pattern), reg.is_builtin(name), order, obj)
            for order, (name, obj) in enumerate(reg.items.items())
            if isinstance(obj, ModelInfo)
        ]
        table = [e[3] for e in sorted(entries, key=lambda e: e[:3])]
        reg.memo["precedence"] = table
    return table


def model_entries() -> list[ModelInfo]:
    """Every registered ``ModelInfo``, in the order ``resolve_model`` consults them."""

    return list(_table(registry("models")))


# Profiles are immutable and so is a built registry, so each spec is resolved once.
_MEMO_SIZE = 1024


def resolve_model(spec: str) -> ModelProfile:
    """Everything known about ``"provider:model"``; ``ProviderError`` when incomplete.

    ``spec`` may name a provider (``openai-chat:gpt-4o``) or a family
    (``openai:gpt-4o``).  Each field comes from the most specific matching entry that
    states it (see the module docstring); a spec for which no entry states the context
    window, output limit or tokenizer is an error naming what is missing.
    """

    if not isinstance(spec, str) or ":" not in spec:
        raise ProviderError(
            f"model {spec!r} is not of the form provider:model",
            hint="e.g. anthropic:claude-sonnet-4-5 or openai:gpt-4o",
        )
    reg = registry("models")
    resolved: dict[str, ModelProfile] = reg.memo.setdefault("resolved", {})
    profile = resolved.get(spec)
    if profile is None:
        profile = _resolve(reg, spec)
        if len(resolved) >= _MEMO_SIZE:  # bounded: model names may come from user input
            resolved.clear()
        resolved[spec] = profile
    return profile


def _naming_families(reg: Registry, model: str) -> tuple[str, ...]:
    """The family patterns (the part of a pattern before ``:``) of the entries that name
    ``model``: their model part matches it and pins at least one character."""
    memo: dict[str, tuple[str, ...]] = reg.memo.setdefault("families", {})
    found = memo.get(model)
    if found is None:
        patterns = []
        for info in _table(reg):
            family, _, model_pattern = info.pattern.partition(":")
            if (
                _specificity(model_pattern) > 0
                and fnmatch.fnmatchcase(model, model_pattern)
                and family not in patterns
            ):
                patterns.append(family)
        found = tuple(patterns)
        if len(memo) >= _MEMO_SIZE:  # bounded: model names may come from user input
            memo.clear()
        memo[model] = found
    return found


def model_families(model: str) -> tuple[str, ...]:
    """The provider families whose model table names ``model`` (``("anthropic",)`` for
    ``claude-sonnet-4-20250514``, ``("openai",)`` for ``gpt-4o``); empty for a name no
    table names (a custom or fine-tuned model).  A family pattern's wildcards are
    dropped (``openai*`` → ``openai``), in precedence order."""

    out: list[str] = []
    for pattern in _naming_families(registry("models"), model):
        name = "".join(c for c in pattern if c not in "*?[]") or pattern
        if name not in out:
            out.append(name)
    return tuple(out)


def model_in_family(model: str, family: str) -> bool | None:
    """Whether ``model`` belongs to the provider family ``family`` (``Provider.family``):
    ``True`` when that family's table names it, ``False`` when only other families'
    tables do, ``None`` when no table names it (a custom name: allowed anywhere)."""

    patterns = _naming_families(registry("models"), model)
    if not patterns:
        return None
    return any(fnmatch.fnmatchcase(family, p) for p in patterns)


def _resolve(reg: Registry, spec: str) -> ModelProfile:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    estimator: dict[str, Any] = {}
    basis: dict[str, str] = {}
    pending = list(_GROUPS)
    for info in _table(reg):
        if not fnmatch.fnmatchcase(spec, info.pattern):
            continue
        info_basis = info.basis or {}
        for group in list(pending):
            if getattr(info, group[0]) is None:
                continue
            for f in group:
                values[f] = getattr(info, f)
                sources[f] = info.name
            pending.remove(group)
        # A field's basis: the most specific entry that states one (the entry that
        # states a value without a basis leaves it to the wire's, e.g. a tokenizer).
        for f, why in info_basis.items():
            if f not in (info.estimator or {}):
                basis.setdefault(f, why)
        for key, value in (info.estimator or {}).items():
            if key not in estimator:
                estimator[key] = value
                sources[f"estimator.{key}"] = info.name
                if key in info_basis:
                    basis[key] = info_basis[key]
    missing = [f for f in _REQUIRED if f not in values]
    if missing:
        what = "context window" if "context_window" in missing else ", ".join(missing)
        raise ProviderError(
            f"no {what} known for {spec!r}",
            hint="register a ctxrules.providers.ModelInfo matching it through the "
            "register_models hook of a plugin",
        )
    values.setdefault("cache_min_tokens", None)
    values.setdefault("prices", None)
    if values.get("structured_calibration") is None:
        values["structured_calibration"] = values["calibration"]
    if values.get("tool_prompt_tokens") is None:
        values["tool_prompt_tokens"] = 0
    if values.get("tool_prompt_tokens_forced") is None:
        values["tool_prompt_tokens_forced"] = values["tool_prompt_tokens"]
    ordered = {f: sources[f] for group in _GROUPS for f in group if f in sources}
    ordered.update({k: v for k, v in sources.items() if k.startswith("estimator.")})
    return ModelProfile(model=spec, sources=ordered, estimator=estimator, basis=basis, **values)
