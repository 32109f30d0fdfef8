"""ContextCommits: the immutable snapshot of the model input at a head (docs/items.md).

``make_commit(session, head, now=…)`` finds the nearest commit on the head's ancestor
chain (``plan``: an indexed lookup per node walked back, so the cost is the number of
nodes since that commit, not the history length).  If it is for this head it is
returned; otherwise a new one is derived from it (``derive``) and stored.

The rule author's API (``RuleContext``, the delta format) lives below this layer, in
``ctxrules.ruleapi``: this package builds a context and runs the rules through it.

The package's modules: ``pipeline`` (the built rules and their version), ``items`` (a
node → its item), ``derive`` (the pure derivation, and ``derive_with_summaries``, which
answers its summary requests), ``persist`` (a commit ↔ its stored row, through
``ctxrules.store.CommitStore``), ``plan`` (what to derive, from the store),
``generate`` (plan, derive, save), ``answers`` (summary answers kept in the store),
``boundary`` (the compaction boundary node and the fold it makes when derived),
``diff`` (two commits compared, in Rust), ``savings`` (the tokens each rule saved)
and ``invariants`` (the checks every derived commit must pass: the test kit and the
batch replay run them).
No module here speaks SQL: the store does.
"""

from __future__ import annotations

from typing import Any

from .._deprecated import moved
from .answers import Answer, stored_answers
from .boundary import Compaction, boundary_of, is_boundary
from .derive import Generated, derive_commit, derive_with_summaries
from .diff import CommitDiff, diff_commits
from .generate import load_commit, make_commit
from .pipeline import Pipeline, rules_version
from .savings import reason_rules, rule_savings

__all__ = [
    "Answer",
    "CommitDiff",
    "Compaction",
    "Generated",
    "Pipeline",
    "boundary_of",
    "derive_commit",
    "derive_with_summaries",
    "diff_commits",
    "is_boundary",
    "load_commit",
    "make_commit",
    "reason_rules",
    "rule_savings",
    "rules_version",
    "stored_answers",
]

#: Old names of this package: the two commit makers ``make_commit`` replaced, and the
#: rule API, which moved below the commit layer (``ctxrules.ruleapi``).
_MOVED: dict[str, str | tuple[str, str]] = {
    "ensure_latest_commit": (
        "ctxrules.commit._aliases:ensure_latest_commit",
        "use ctxrules.commit.make_commit",
    ),
    "generate_commit": (
        "ctxrules.commit._aliases:generate_commit",
        "use ctxrules.commit.make_commit(..., rerun=True)",
    ),
    "RuleContext": "ctxrules.ruleapi:RuleContext",
    "Delta": "ctxrules.ruleapi:Delta",
    "folded_item": "ctxrules.ruleapi:folded_item",
    "item_text_for_tokens": "ctxrules.ruleapi:item_text_for_tokens",
    "replay": "ctxrules.ruleapi.delta:replay",
}


def __getattr__(name: str) -> Any:
    return moved(__name__, _MOVED, name)
