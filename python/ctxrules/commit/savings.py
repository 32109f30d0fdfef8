"""Tokens saved per rule: what each rule took out of a commit, against the same branch
with no rules.

A rule changes items through ``RuleContext.replace`` / ``fold`` with a *reason*; the
derive records which rule wrote each reason (``Generated.reasons``) and the store keeps
that map beside the commit row (``persist.row_reasons``; it is not part of the commit,
so commit ids do not depend on it).  ``reason_rules`` gathers the maps of a session's
commits, ``rule_savings`` splits one commit's saving among the rules:

* an item shown in a changed form saves its tokens with no rules minus its tokens now,
  credited to the rule that wrote its reason: the rule that decided its current form
  (an item capped and later aged counts for tool aging alone);
* a folded (``summarized``) item saves all its tokens, credited to the folding rule,
  and each summary item costs its own tokens to that rule (less what the plain branch
  shows of it: a recorded compaction's summary is in both);
* an item the plain branch does not have (a compaction's restore message) costs its
  tokens to the rule that wrote its reason, else to ``OTHER``.

Items whose reason no rule wrote save nothing unless their tokens differ from the
plain branch's (then ``OTHER``).  The savings add up to the plain commit's tokens
minus this commit's, in the pipeline's encoding (item tokens, not the billed estimate).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model import ContextCommit
from ..store import CommitStore
from .persist import row_reasons

__all__ = ["OTHER", "reason_rules", "rule_savings"]

#: Where tokens no rule's reason accounts for go.
OTHER = "other"


def reason_rules(store: CommitStore, session_id: str) -> dict[str, str]:
    """Which rule wrote each item reason in the commits ``store`` holds for ``session_id``
    (the first rule to write a reason keeps it)."""
    out: dict[str, str] = {}
    for row in store.session_commits(session_id):
        for reason, rule in row_reasons(row).items():
            out.setdefault(reason, rule)
    return out


def rule_savings(
    commit: ContextCommit, plain: Mapping[str, int], rules: Mapping[str, str]
) -> dict[str, int]:
    """Tokens each rule saved in ``commit`` (negative: it added more than it removed),
    by rule name, sorted; rules that saved nothing are left out.

    ``plain`` maps each node id to what its item shows with no rules (the items of the
    plain commit of the same branch: with no rules an item never changes, except what
    a recorded compaction folded, 0, and the summary it added);
    ``rules`` maps item reasons to rule names (``reason_rules``).  See the module
    docstring for how tokens are attributed.
    """
    out: dict[str, int] = {}

    def add(reason: str, tokens: int) -> None:
        if tokens:
            rule = rules.get(reason, OTHER)
            out[rule] = out.get(rule, 0) + tokens

    for it in commit.items:
        shown = 0 if it.state == "summarized" else it.tokens
        before = plain.get(it.source_node_id)
        if it.state == "summary":
            # A summary the plain branch shows too (a recorded compaction's) costs
            # nothing more; any other costs its tokens to the rule that made it.
            add(it.reason, (before or 0) - shown)
            continue
        if before is None:
            add(it.reason, -shown)
        else:
            add(it.reason, before - shown)
    return {k: v for k, v in sorted(out.items()) if v}
