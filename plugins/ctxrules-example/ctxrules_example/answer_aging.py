"""Answer aging: a long assistant answer older than the last ``keep_turns`` turns keeps
its first ``max_chars`` characters and becomes ``aged``.

The model's own old answers (a code listing, a long explanation) are often the largest
items of a chat after the tool results, and the model rarely needs them word for word
once the conversation has moved on.  The DAG keeps every original, so nothing is lost.

The rule is incremental, like tool aging: it walks the items once, as the boundary of
the kept turns moves forward, and keeps three cursors between commits — the boundary
(an item position, so it is declared in ``position_cursors`` and moves when a summary
is inserted before it) and two turn counts (plain values, never moved).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ctxrules.hookspecs import RegisterRules, hookimpl
from ctxrules.ruleapi import ContextCommit, ContextItem, Rule, RuleContext

__all__ = ["AnswerAging", "register_rules"]

POS = "answer_aging.pos"  # first item not passed yet: a position
TURN = "answer_aging.turn"  # turns before POS: a value
TURNS = "answer_aging.turns"  # turns in the commit: a value
REASON = "answer_aging"


def is_turn(item: ContextItem) -> bool:
    """Whether ``item`` is an assistant turn (summaries, folded or not, have ``sm_`` ids)."""
    return item.role == "assistant" and not item.source_node_id.startswith("sm_")


class AnswerAging(Rule):
    """Shorten assistant answers older than the last ``keep_turns`` turns to ``max_chars``."""

    name = "answer_aging"
    params: ClassVar[Mapping[str, Any]] = {"keep_turns": 4, "max_chars": 600}
    position_cursors = frozenset({POS})
    promise = (
        "no answer of the last keep_turns turns is shortened; every older full, unlocked "
        "answer that is not an anchor shows at most max_chars characters besides its marker"
    )

    def check(self) -> None:
        if self.keep_turns < 0:
            raise self.bad("keep_turns", "must be >= 0")
        if self.max_chars < 20:
            raise self.bad("max_chars", "must be at least 20")

    def marker(self, item: ContextItem) -> str:
        """What replaces the end of a shortened answer."""
        cut = len(item.rendered) - self.max_chars
        return f" [… {cut:,} more characters of this earlier answer omitted]"

    def too_long(self, item: ContextItem) -> bool:
        """Whether ``item`` is an answer this rule may and should shorten."""
        return (
            item.state == "full"
            and not item.locked
            and not item.is_anchor
            and len(item.rendered) > self.max_chars
        )

    def apply(self, ctx: RuleContext) -> None:
        cur = ctx.cursors
        pos, turn, turns = cur.get(POS, 0), cur.get(TURN, 0), cur.get(TURNS, 0)
        for p in ctx.scan_positions():  # new items, or all of them after a rule change
            if is_turn(ctx.items[p]):
                turns += 1
        target = turns - self.keep_turns  # how many turns are old enough
        shortened = 0
        while pos < len(ctx.items):
            it = ctx.items[pos]
            if is_turn(it):
                if turn >= target:
                    break  # the kept turns start here
                turn += 1
                if self.too_long(it):
                    text = it.rendered[: self.max_chars] + self.marker(it)
                    ctx.replace(pos, state="aged", rendered=text, reason=REASON)
                    shortened += 1
            pos += 1
        cur[POS], cur[TURN], cur[TURNS] = pos, turn, turns
        if shortened:
            ctx.note(f"shortened {shortened} earlier answer(s) to {self.max_chars} characters")

    def check_promise(self, commit: ContextCommit) -> list[str]:
        items = commit.items
        turns = [p for p, it in enumerate(items) if is_turn(it)]
        if self.keep_turns == 0:
            kept_from = len(items)
        else:
            kept_from = turns[-self.keep_turns] if len(turns) >= self.keep_turns else 0
        broken = []
        for p in turns:
            it = items[p]
            if p >= kept_from and it.reason == REASON:
                broken.append(f"answer {it.source_node_id} is in the kept turns but shortened")
            elif p < kept_from and self.too_long(it):
                broken.append(f"answer {it.source_node_id} is older and still long")
        return broken


@hookimpl
def register_rules(register: RegisterRules) -> None:
    register(AnswerAging)
