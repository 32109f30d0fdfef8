"""ContextCommits: the immutable snapshot of the model input at a head (docs/items.md).

``ensure_latest_commit(session, head)`` finds the nearest commit on the head's ancestor
chain (``plan``: an indexed lookup per node walked back, so the cost is the number of
nodes since that commit, not the history length).  If it is for this head it is
returned; otherwise ``generate_commit`` derives a new one from it (``derive``) and
stores it.

The package's modules: ``pipeline`` (the built rules and their version), ``context``
(the ``RuleContext`` rules work through), ``items`` (a node → its item), ``derive``
(the pure derivation, and ``derive_with_summaries``, which answers its summary
requests), ``delta`` (the stored format of a commit against its parent),
``persist`` (a commit ↔ its stored row, through ``ctxrules.store.CommitStore``),
``plan`` (what to derive, from the store), ``generate`` (plan, derive, save),
``answers`` (summary answers kept in the store), ``boundary`` (the compaction boundary
node and the fold it makes when derived), ``diff`` (two commits compared, in Rust) and
``savings`` (the tokens each rule saved).
No module here speaks SQL: the store does.
"""

from __future__ import annotations

from .answers import Answer, stored_answers
from .boundary import Compaction, boundary_of, is_boundary
from .context import RuleContext, item_text_for_tokens
from .delta import Delta, folded_item, replay
from .derive import Generated, derive_commit, derive_with_summaries
from .diff import CommitDiff, diff_commits
from .generate import ensure_latest_commit, generate_commit, load_commit
from .pipeline import Pipeline, rules_version
from .savings import reason_rules, rule_savings

__all__ = [
    "Answer",
    "CommitDiff",
    "Compaction",
    "Delta",
    "Generated",
    "Pipeline",
    "RuleContext",
    "boundary_of",
    "derive_commit",
    "derive_with_summaries",
    "diff_commits",
    "ensure_latest_commit",
    "folded_item",
    "generate_commit",
    "is_boundary",
    "item_text_for_tokens",
    "load_commit",
    "reason_rules",
    "replay",
    "rule_savings",
    "rules_version",
    "stored_answers",
]
