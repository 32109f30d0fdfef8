"""The rule author's test kit: check a rule against the commit invariants in a few lines.

::

    from ctxrules.testing import check_rule

    def test_my_rule_keeps_the_invariants():
        check_rule(MyRule(some_param=3))            # alone and inside the built-in pipeline

``check_rule`` generates sessions with hypothesis (tool calls of protected and ordinary
tools, huge and failing results, branches, attach pointers, merges, locked and pinned
nodes, system nodes, lines that are not the task, time gaps, compaction boundaries in
full and around a pivot), derives commits turn by turn through the pipeline (summary
requests answered by the registered summarizers) and asserts invariants 1–8
(docs/rules.md)
plus the consistency a renderer relies on (tool pairing, token totals, attach blocks
folded whole), the promise of every rule in the pipeline (``Rule.check_promise``) and
the pipeline's own promise (``PIPELINE_PROMISE``: system items and the task anchor —
the first real instruction, as ``ctxrules.commit.anchor.task_anchor`` picks it — are
never folded, aged or cleared).  ``check_commits`` runs the same checks on commits you
produced yourself, e.g. from a real transcript; ``check_promises`` only the promises;
``tool_turn`` + ``commit_of`` (``ctxrules.testing.scripts``) build one hand-written
case in two lines.  A failure raises ``InvariantViolation`` naming the invariant or
promise, the rule set and the item.

Installed as a pytest plugin (entry point ``pytest11: ctxrules``, the light module
``ctxrules.testing.pytest_plugin``): the fixture ``ctxrules_kit`` is this module.
hypothesis is imported only when a check runs; nothing here imports pytest.  The
checks themselves live beside the commit layer (``ctxrules.commit.invariants``).
"""

from __future__ import annotations

from ..commit.invariants import PIPELINE_PROMISE, InvariantViolation, check_promises
from .kit import check_commits, check_rule, pipelines_with
from .scripts import NOT_TASK, Script, Step, commit_of, drive, drive_branch, scripts, tool_turn

__all__ = [
    "NOT_TASK",
    "PIPELINE_PROMISE",
    "InvariantViolation",
    "Script",
    "Step",
    "check_commits",
    "check_promises",
    "check_rule",
    "commit_of",
    "drive",
    "drive_branch",
    "pipelines_with",
    "scripts",
    "tool_turn",
]
