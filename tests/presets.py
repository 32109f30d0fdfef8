"""Rule configurations the tests use by name.

``EVERY_RULE`` is the ``aggressive`` preset's budgets without the cache ledger: every
rule fires as soon as its budget says, whatever the provider has cached.  The shipped
``aggressive`` is cache-aware (a change to a cached item waits until it pays), so a test
that needs every rule to fire on a short session says so by taking this one."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ctxrules.config import PipelineConfig, dump_config


def every_rule(**options: Any) -> PipelineConfig:
    """``aggressive``'s budgets, none of its rules cache-aware; ``options`` are the
    preset's top-level options (``lock_system``, ``anchor_skip`` …)."""
    config = PipelineConfig.preset("aggressive", **options)
    # The budgets alone: the rules' own defaults (not cache-aware) for the rest, so the
    # rules are those the preset had before it became cache-aware.
    rules = {
        name: {k: v for k, v in params.items() if k not in ("cache_aware", "payback")}
        for name, params in config.rules.items()
    }
    return dataclasses.replace(config, rules=rules)


EVERY_RULE = every_rule()


def every_rule_file(folder: Path, **options: Any) -> str:
    """``every_rule(**options)`` written as a configuration file in ``folder`` (for the
    CLI's ``--config``); returns its path."""
    path = Path(folder) / "every-rule.toml"
    path.write_text(dump_config(every_rule(**options)))
    return str(path)
