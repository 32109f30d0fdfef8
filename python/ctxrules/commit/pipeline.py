"""A built pipeline: the rules in order plus the options of generation, and its version."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import PipelineConfig, find_config
from ..rules.base import Rule

__all__ = ["Pipeline", "rules_version"]


def rules_version(rules: Sequence[Rule], *, encoding: str, anchor_task: bool) -> str:
    """The id of a rule set: a hash of every rule's name, version and parameters, in order."""
    text = "\n".join(
        [f"encoding={encoding}", f"anchor_task={anchor_task}"] + [r.signature() for r in rules]
    )
    return "rv_" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Pipeline:
    """Built rules in order plus the options of generation; ``version`` is its ``rules_version``."""

    rules: tuple[Rule, ...]
    encoding: str = "o200k_base"
    anchor_task: bool = True
    version: str = ""

    @classmethod
    def from_config(cls, config: PipelineConfig | None = None) -> Pipeline:
        """Build the pipeline of ``config`` (default: ``find_config()`` from the cwd)."""
        cfg = config if config is not None else find_config()
        rules = tuple(cfg.build())
        return cls(
            rules,
            cfg.encoding,
            cfg.anchor_task,
            rules_version(rules, encoding=cfg.encoding, anchor_task=cfg.anchor_task),
        )

    @classmethod
    def of(
        cls, rules: Sequence[Rule], *, encoding: str = "o200k_base", anchor_task: bool = True
    ) -> Pipeline:
        """A pipeline of already built rules (what the test kit and plugins use)."""
        rules = tuple(rules)
        version = rules_version(rules, encoding=encoding, anchor_task=anchor_task)
        return cls(rules, encoding, anchor_task, version)
