"""A built pipeline: the rules in order, the options of generation, its version, and the
tokenizer it counts with (resolved once, when the pipeline is built, so deriving a
commit looks up nothing)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..config import PipelineConfig, find_config
from ..ruleapi import Rule
from ..ruleapi.cache import DEFAULT_PRICING, CachePricing
from ..tokenizers import Tokenizer, get_tokenizer
from .anchor import SKIP_KINDS, AnchorSkip

__all__ = ["Pipeline", "rules_version"]


def rules_version(
    rules: Sequence[Rule],
    *,
    encoding: str,
    anchor_task: bool,
    lock_system: bool = True,
    anchor_skip: AnchorSkip | None = None,
    cache: CachePricing = DEFAULT_PRICING,
) -> str:
    """The id of a rule set: a hash of every rule's name, version and parameters, in
    order, and of the options that decide what a rule may touch (which item is the task
    anchor, whether system items are locked): a commit made under other options is
    never a parent, and never reused.

    ``cache`` — the model's cache prices — is part of it when a rule decides by them
    (``Rule.reads_cache``): a cache-aware rule that waits under one model's prices acts
    under another's, so a commit made for one model is not the other's.  The default
    prices (Anthropic's) add nothing: those versions are what they were before."""
    skip = anchor_skip if anchor_skip is not None else AnchorSkip()
    priced = cache.signature() if any(r.reads_cache() for r in rules) else ""
    text = "\n".join(
        [
            f"encoding={encoding}",
            f"anchor_task={anchor_task}",
            f"lock_system={lock_system}",
            f"anchor_skip={skip.signature()}",
        ]
        + ([priced] if priced else [])
        + [r.signature() for r in rules]
    )
    return "rv_" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Pipeline:
    """Built rules in order plus the options of generation; ``version`` is its ``rules_version``.

    ``anchor_task``: the first real instruction is the task anchor, chosen under
    ``anchor_skip`` (``ctxrules.commit.anchor``); ``lock_system``: system items are
    locked.  ``tokenizer`` is the counter of ``encoding``, looked up when the pipeline
    is built (pass one to count with something else: its ``name`` should then be
    ``encoding``).  ``position_cursors`` is the union of the rules' position cursors:
    the cursor keys that ``RuleContext.insert`` shifts.  ``cache`` is how the cache
    ledger prices a rewrite of the provider's cached prompt (``CachePricing``; default
    Anthropic's): the engine sets its model's (``priced``).  It is part of the version
    when a rule decides by it (``rules_version``): a commit made at one model's prices
    is not reused at another's.  ``model`` names the model the commits are made for
    (``""``: not known); not part of the version — models of one price share their
    commits — but the cache ledger records it (``cache.model``), so the request after a
    switch of model, which finds nothing cached, changes cached items for free.
    """

    rules: tuple[Rule, ...]
    encoding: str = "o200k_base"
    anchor_task: bool = True
    version: str = ""
    tokenizer: Tokenizer = field(default=None, compare=False, repr=False)  # type: ignore[assignment]
    lock_system: bool = True
    anchor_skip: AnchorSkip = field(default_factory=AnchorSkip)
    position_cursors: frozenset[str] = field(init=False, compare=False, repr=False)
    cache: CachePricing = field(default=DEFAULT_PRICING, compare=False)
    model: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.tokenizer is None:
            object.__setattr__(self, "tokenizer", get_tokenizer(self.encoding))
        keys = frozenset(k for r in self.rules for k in r.position_cursors)
        object.__setattr__(self, "position_cursors", keys)

    @classmethod
    def from_config(cls, config: PipelineConfig | None = None) -> Pipeline:
        """Build the pipeline of ``config`` (default: ``find_config()`` from the cwd)."""
        cfg = config if config is not None else find_config()
        rules = tuple(cfg.build())
        skip = AnchorSkip(
            tuple(SKIP_KINDS) if cfg.anchor_skip is None else cfg.anchor_skip,
            cfg.anchor_skip_patterns,
            where=cfg.source,
        )
        return cls.of(
            rules,
            encoding=cfg.encoding,
            anchor_task=cfg.anchor_task,
            lock_system=cfg.lock_system,
            anchor_skip=skip,
        )

    def priced(self, cache: CachePricing, model: str | None = None) -> Pipeline:
        """This pipeline with the cache ledger pricing rewrites as ``cache`` says (and
        the version of those prices), for the requests to ``model`` (``None``: the
        model this pipeline names)."""
        if model is not None and model != self.model:
            return dataclasses.replace(self, model=model).priced(cache)
        if cache == self.cache:
            return self
        version = rules_version(
            self.rules,
            encoding=self.encoding,
            anchor_task=self.anchor_task,
            lock_system=self.lock_system,
            anchor_skip=self.anchor_skip,
            cache=cache,
        )
        return dataclasses.replace(self, cache=cache, version=version)

    def with_rules(self, rules: Sequence[Rule]) -> Pipeline:
        """This pipeline's options (encoding, anchor, locks, cache prices) with other
        ``rules``."""
        return Pipeline.of(
            rules,
            encoding=self.encoding,
            anchor_task=self.anchor_task,
            lock_system=self.lock_system,
            anchor_skip=self.anchor_skip,
        ).priced(self.cache, self.model)

    @classmethod
    def of(
        cls,
        rules: Sequence[Rule],
        *,
        encoding: str = "o200k_base",
        anchor_task: bool = True,
        lock_system: bool = True,
        anchor_skip: AnchorSkip | None = None,
    ) -> Pipeline:
        """A pipeline of already built rules (what the test kit and plugins use)."""
        rules = tuple(rules)
        skip = anchor_skip if anchor_skip is not None else AnchorSkip()
        version = rules_version(
            rules,
            encoding=encoding,
            anchor_task=anchor_task,
            lock_system=lock_system,
            anchor_skip=skip,
        )
        return cls(
            rules,
            encoding,
            anchor_task,
            version,
            lock_system=lock_system,
            anchor_skip=skip,
        )
