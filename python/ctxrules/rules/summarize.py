"""Summarize: when the commit is over ``threshold_tokens``, fold the oldest items into a
``summary`` item until it is back under ``target_ratio × threshold``.

Folding works on *units* (``ctxrules.summarizers.units``) so nothing the model needs to
stay consistent is split: an assistant turn with its tool calls and results, an attach
block (items sharing ``attached_from``), or a single user / system item.  A unit holding
a locked, anchor (task statement), pinned or cited item is kept full and ends the run.
The last ``keep_tail_turns`` turns are never folded.

Summaries are cache-stable: a later fold appends a new summary item after the previous
one and never rewrites it, so the request up to the end of the previous summary stays
byte for byte what the provider has cached.  (Folding the previous summary into the
new one would change the request from that point on, and every later fold would pay
for the whole prompt again.)  Only a full compaction (``ctxrules.compaction``) merges
earlier summaries into one; a commit whose summaries alone keep it over the threshold
says so in its notes.

The summarizer is a plugin (``summarizer``, checked when the rule is built) that the
rule never calls: it asks the context for the summary of the run (``ctx.summary``)
and the caller answers (``ctxrules.commit.derive_with_summaries`` runs the summarizer
within ``timeout_seconds``, in the same derive).  Until answered, nothing is folded and
the commit's notes say it is waiting.  If the summarizer raised, timed out or returned
nothing, nothing is folded and the reason is noted on the commit; a fold that cannot
get under the threshold says so too, and so does a fold whose summary leaves out the
oldest items (``SummaryResult.dropped``: the summarizer's model refused them as too
long).  Nothing here ever loses content: folded items stay in the commit as
``summarized`` and the DAG keeps every original.

Anti-thrash: a summary that is not shorter than the run it would replace, or a
summarizer that timed out, is not asked for again on every commit.  A run closed by a
kept unit cannot grow: when its summary is not shorter it is left as it is for good
and folding goes on after the kept unit.  Otherwise the failed run is remembered in
the cursors (``summarize.failed_start`` / ``summarize.failed_end``, item positions) and
the fold from that start is tried again only once the run has doubled in items; until
then each commit says so in its notes.

A provider's own compaction (an effective ``CompactionBlock`` on a shown assistant
item, see ``ctxrules.model.provider_compaction_start``) is a boundary: its vendor reads
nothing before it, so the items before it are already compacted — not folded again and
not counted against the threshold — and the item holding it is kept (folding it would
bring the history before it back into that vendor's request).

Folds are batched when the target is out of reach.  Once the earlier summaries, the
kept items and the protected tail alone hold more than the target, no fold can bring
the commit down to it: before, every turn that left the tail was then folded into a
summary of its own on the next commit (a summarizer call, a stored answer and a
rewritten cached suffix every turn, until a full compaction merged the summaries).
Now a run that ends at the protected tail (it can still grow) and cannot reach the
target is folded only once it holds ``min_run_share`` times what a fold that reaches
the target folds from a commit at the threshold (``threshold_tokens − target``: 40k
tokens at the defaults); until then the commit stays over the threshold and its notes
say it is waiting.  At the default 1 such a commit folds about as often as one that
can; 0 folds every run as soon as it is over the threshold (the behaviour before
version 5; the cache-aware ``lean`` and ``aggressive`` presets keep it: their cache
ledger already decides when a fold pays, and batches billed them more on the corpus).
A run closed by a kept unit or an earlier summary cannot grow and is folded as before.

With ``cache_aware`` a run is folded only when that pays for rewriting the cached
prompt (the commit's cache ledger, ``ctxrules.ruleapi.cache``: the cache went cold,
another rule rewrote it in this commit already, or the run less its summary saves more
over the next ``payback`` requests than the rewrite costs); until then the commit stays
over the threshold and its notes say why (the engine's compaction still bounds it).

Promise: no locked or anchor item is ever folded, nothing from the start of the last
``keep_tail_turns`` turns on (with the request that opened the first of them) is
folded, an earlier summary is never folded into a later one except by a full
compaction, and a commit left over ``threshold_tokens`` says why in its notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..errors import ConfigError
from ..model import provider_compaction_start
from ..plugins import registry
from ..ruleapi import (
    COMPACTION_REASON,
    FULL_COMPACTION_REASON,
    ContextCommit,
    ContextItem,
    Rule,
    RuleContext,
    SummaryResult,
)
from ..ruleapi.cache import min_saving
from ..summarizers.units import unit_end
from .tool_aging import is_turn

__all__ = ["Summarize"]

#: Cursors (item positions) of the last run whose summary was not shorter than it.
_FAILED_START = "summarize.failed_start"
_FAILED_END = "summarize.failed_end"


def _past(items: Sequence[ContextItem], p: int) -> int:
    """The position after the kept unit or earlier summary at ``p`` (where the next run
    starts when one stops there)."""
    return p + 1 if items[p].state == "summary" else unit_end(items, p)


class Summarize(Rule):
    """Fold the oldest contiguous run of foldable units into one summary item."""

    name = "summarize"
    # 5: a run that cannot reach the target waits for min_run_share; 4: a cache-aware
    # fold that can never pay before a kept unit is stepped over (3: cache_aware; 2: a
    # short run before a kept unit is stepped over)
    version = 5
    position_cursors = frozenset({"summarize.pos", _FAILED_START, _FAILED_END})
    promise = (
        "no locked or anchor item is folded; nothing in the last keep_tail_turns turns "
        "(and the request that opened them) is folded; an earlier summary is never folded "
        "into a later one except by a full compaction; a commit over threshold_tokens "
        "says why in its notes"
    )
    params: ClassVar[Mapping[str, Any]] = {
        "threshold_tokens": 100_000,
        "target_ratio": 0.6,
        "keep_tail_turns": 2,
        "summarizer": "extractive",
        "summary_budget_tokens": 2000,
        "timeout_seconds": 60.0,
        "cache_aware": False,
        "payback": 20,
        "min_run_share": 1.0,
    }

    def check(self) -> None:
        if self.threshold_tokens < 1:
            raise self.bad("threshold_tokens", "must be >= 1")
        if not 0.0 < self.target_ratio <= 1.0:
            raise self.bad("target_ratio", "must be in (0, 1]")
        if self.keep_tail_turns < 1:
            # The turn being answered must stay: its tool results may still arrive.
            raise self.bad("keep_tail_turns", "must be >= 1")
        if self.summary_budget_tokens < 16:
            raise self.bad("summary_budget_tokens", "must be >= 16")
        if self.timeout_seconds < 0:
            raise self.bad("timeout_seconds", "must be >= 0 (0: no time limit)")
        if self.payback < 1:
            raise self.bad("payback", "must be >= 1")
        if self.min_run_share < 0:
            raise self.bad("min_run_share", "must be >= 0 (0: fold every run)")

        known = registry("summarizers")
        if self.summarizer not in known:
            raise ConfigError(
                f"rule {self.name!r}: no summarizer named {self.summarizer!r}",
                where=f"{self._where}: rules.{self.name}.summarizer",
                hint=f"installed: {', '.join(known.names()) or 'none'}; install the "
                "plugin that provides it",
            )

    # -- structure -----------------------------------------------------------------

    def _tail_start(self, items: Sequence[ContextItem]) -> int:
        """First position of the protected tail (the last ``keep_tail_turns`` turns)."""
        seen = 0
        p = len(items)
        while p > 0:
            p -= 1
            if is_turn(items[p]):
                seen += 1
                if seen == self.keep_tail_turns:
                    break
        else:
            return 0
        while p > 0 and items[p - 1].role in ("user", "system") and not items[p - 1].attached_from:
            p -= 1  # the request that started the kept turn stays with it
        return p

    @staticmethod
    def _kept(item: ContextItem) -> bool:
        return item.locked or item.is_anchor

    # -- running -------------------------------------------------------------------

    def _never_pays(self, ctx: RuleContext, saved: int, at: int) -> bool:
        """Whether a fold saving ``saved`` tokens would not pay for rewriting the cached
        prompt even over the whole ``payback`` horizon."""
        rewrite = ctx.cache.rewrite_tokens(at)
        return saved < min_saving(rewrite, self.payback, ctx.cache.pricing)

    @staticmethod
    def _backing_off(ctx: RuleContext, start: int, end: int) -> bool:
        """Whether the run ``[start, end)`` is (a slightly grown) one whose summary did not
        shrink or timed out: retried only once it holds twice the items of the failed one."""
        failed_start = ctx.cursors.get(_FAILED_START)
        failed_end = ctx.cursors.get(_FAILED_END)
        if failed_start is None or failed_end is None or start != failed_start:
            return False
        if end - start >= 2 * (failed_end - failed_start):
            return False
        ctx.note(
            f"not retrying: folding items {failed_start}..{failed_end - 1} failed (the summary "
            f"did not shrink or the summarizer timed out); tried again once the run reaches "
            f"{2 * (failed_end - failed_start)} items (now {end - start})"
        )
        return True

    def _outcome(self, ctx: RuleContext, answer: SummaryResult) -> str | None:
        """The summary text of an answer, or None after noting why there is none."""
        problem = answer.problem(self.timeout_seconds)
        if problem:
            ctx.note(
                f"no folding: summarizer {self.summarizer!r} {problem}; all content kept"
                + ("; not retried until the run doubles" if answer.timed_out else "")
            )
            return None
        return answer.text

    @staticmethod
    def _provider_compacted(
        items: Sequence[ContextItem], start: int | None = None
    ) -> tuple[int, int]:
        """The position of the item holding a provider's compaction (-1: none; ``start``
        when the caller found it already) and the tokens of the shown items before it
        (already compacted by the provider)."""
        if start is None:
            start = provider_compaction_start(items)
        if start <= 0:
            return start, 0
        return start, sum(it.tokens for it in items[:start] if it.state != "summarized")

    def apply(self, ctx: RuleContext) -> None:
        total = ctx.total_tokens()  # counts pending items first: their tokens are read below
        items = ctx.items
        floor, compacted = self._provider_compacted(items, ctx.provider_compaction_start())
        total -= compacted
        if total <= self.threshold_tokens:
            return
        target = int(self.threshold_tokens * self.target_ratio)
        min_run = int((self.threshold_tokens - target) * self.min_run_share)
        tail = self._tail_start(items)
        p = ctx.cursors.get("summarize.pos", 0)
        if floor >= 0:
            # Nothing up to the provider's compaction (its item included) is folded.
            p = max(p, unit_end(items, floor))
        folded_any = False
        blocked_by = "the protected tail"
        while total > target and p < tail:
            # Collect one run of foldable units starting at p.  An earlier summary ends
            # the run: it stays as it is (cache-stable), the next run starts after it.
            run_start = p
            run_tokens = 0
            end = p
            before_kept = False  # the run ends at a kept unit or a summary (not the tail)
            while end < tail and total - run_tokens > target:
                it = items[end]
                if it.state == "summarized":
                    end += 1
                    continue
                if it.state == "summary" and it.attached_from is None:
                    before_kept = True
                    blocked_by = f"the earlier summary {it.source_node_id}"
                    break
                end_of_unit = unit_end(items, end)
                unit = items[end:end_of_unit]
                if end_of_unit > tail or any(self._kept(u) for u in unit):
                    before_kept = end_of_unit <= tail
                    blocked_by = (
                        f"kept item {unit[0].source_node_id}"
                        if before_kept
                        else "the protected tail"
                    )
                    break
                run_tokens += sum(u.tokens for u in unit if u.state != "summarized")
                end = end_of_unit
            run = tuple(u for u in items[run_start:end] if u.state != "summarized")
            if not run:
                # Nothing to fold before a kept unit or an earlier summary: step over it
                # and try the next run.
                if end >= tail:
                    break
                nxt = _past(items, end)
                ctx.cursors["summarize.pos"] = nxt  # everything before is folded or kept
                p = nxt
                continue
            if not before_kept and total - run_tokens > target and run_tokens < min_run:
                # The run reaches the tail and folding it cannot reach the target: fold
                # it once it is worth a batch, not one turn at a time.
                blocked_by = (
                    f"a run of {run_tokens} tokens that cannot reach the target, folded "
                    f"once it holds {min_run} (min_run_share)"
                )
                break
            if self._backing_off(ctx, run_start, end):
                blocked_by = "a fold that did not shrink (backing off)"
                break
            if self.cache_aware and ctx.cache.rewrite_tokens():
                # A summary is at most its budget: what folding saves at least.  (A free
                # rewrite folds whenever the summary comes out shorter, as without it.)
                saved = run_tokens - self.summary_budget_tokens
                why = ctx.cache.refusal(saved, payback=self.payback, at=run_start)
                if why and before_kept and self._never_pays(ctx, saved, run_start):
                    # A run closed by a kept unit or an earlier summary cannot grow, and
                    # the cached prompt only grows: while the cache is warm it never
                    # pays, so waiting for it would hold back every fold after it (a
                    # slash-command line before the task anchor stopped a session's
                    # folding until a pause).  Step over it; it is tried again as long as
                    # nothing after it is folded.
                    ctx.note(
                        f"stepped over {len(run)} item(s) ({run_tokens} tokens) before "
                        f"{blocked_by}: folding them would not pay within {self.payback} "
                        f"requests while the cache is warm"
                    )
                    p = _past(items, end)
                    continue
                if why:
                    blocked_by = f"a fold that {why}"
                    break
            answer = ctx.summary(
                run,
                summarizer=self.summarizer,
                budget=self.summary_budget_tokens,
                timeout_seconds=self.timeout_seconds,
            )
            if answer is None:
                ctx.note(
                    f"waiting for a summary of {len(run)} item(s) ({run_tokens} tokens) from "
                    f"{self.summarizer!r}: answer the request and derive again "
                    f"(derive_with_summaries does)"
                )
                return
            if answer.timed_out:  # a hung model would stall every commit: back off
                ctx.cursors[_FAILED_START] = run_start
                ctx.cursors[_FAILED_END] = end
            text = self._outcome(ctx, answer)
            if text is None:
                return
            summary_tokens = ctx.count(text)
            if summary_tokens >= run_tokens and before_kept:
                # A run closed by a kept unit (a slash-command line before the task
                # anchor, a turn before a locked system item) or by an earlier summary
                # cannot grow, so retrying it
                # later is pointless: it stays as it is, and folding goes on past the
                # kept unit instead of stopping for good at the first short run.
                ctx.note(
                    f"left {len(run)} item(s) ({run_tokens} tokens) before {blocked_by} "
                    f"as they are: their summary ({summary_tokens} tokens) is not shorter"
                )
                nxt = _past(items, end)
                ctx.cursors["summarize.pos"] = nxt
                p = nxt
                continue
            if summary_tokens >= run_tokens:
                ctx.note(
                    f"no folding: the summary ({summary_tokens} tokens) is not shorter than the "
                    f"{len(run)} items it would replace ({run_tokens} tokens); not retried "
                    f"until the run doubles"
                )
                ctx.cursors[_FAILED_START] = run_start
                ctx.cursors[_FAILED_END] = end
                blocked_by = "a summary that did not shrink"
                break
            ctx.cursors.pop(_FAILED_START, None)
            ctx.cursors.pop(_FAILED_END, None)
            sm_pos = ctx.fold(run_start, end, text, reason=f"summarized:{len(run)}_items")
            folded_any = True
            total = ctx.total_tokens() - compacted  # the part before p is unchanged
            ctx.note(
                f"folded {len(run)} item(s) ({run_tokens} tokens) into "
                f"{ctx.items[sm_pos].source_node_id} ({summary_tokens} tokens)"
                + (
                    f"; the summary leaves out the {answer.dropped} oldest of them (too "
                    f"long for the summarizer's model)"
                    if answer.dropped
                    else ""
                )
            )
            items = ctx.items
            tail += 1  # the summary item was inserted before the tail
            # The next run (now, if still over, or in a later commit) steps over this
            # summary: it is appended to, never rewritten.
            ctx.cursors["summarize.pos"] = sm_pos
            p = sm_pos + 1
        if total > self.threshold_tokens:
            summaries = ctx.summary_tokens()
            why = (
                f"; summaries hold {summaries} tokens (a full compaction merges them)"
                if summaries
                else ""
            )
            ctx.note(
                f"could not reach the threshold: {total} tokens > {self.threshold_tokens} "
                f"after {'folding' if folded_any else 'trying to fold'}; stopped at "
                f"{blocked_by}{why}"
            )

    # -- promise -----------------------------------------------------------------------

    def check_promise(self, commit: ContextCommit) -> list[str]:
        """Folded locked / anchor items, folded items of the kept tail, earlier summaries
        folded by anything but a full compaction, and a commit over the threshold without
        a note of this rule saying why."""
        items = commit.items
        out = [
            f"{it.source_node_id} is {'locked' if it.locked else 'an anchor'} and was folded"
            for it in items
            if it.state == "summarized" and (it.locked or it.is_anchor)
        ]
        out.extend(
            f"the summary {it.source_node_id} was folded into {it.merged_into} "
            f"({it.reason}), not appended to"
            for it in items
            if it.state == "summarized"
            and it.source_node_id.startswith("sm_")
            and it.attached_from is None  # an attach block folds whole, its summaries too
            and not it.reason.startswith(FULL_COMPACTION_REASON)
        )
        turns = [p for p, it in enumerate(items) if is_turn(it)]
        start = turns[-self.keep_tail_turns] if len(turns) >= self.keep_tail_turns else 0
        while start > 0 and items[start - 1].role in ("user", "system"):
            if items[start - 1].attached_from:
                break
            start -= 1  # the request that opened the first kept turn
        out.extend(
            f"{it.source_node_id} (position {p}) is in the last "
            f"{self.keep_tail_turns} turn(s) and was folded"
            for p, it in enumerate(items[start:], start)
            if it.state == "summarized" and not it.reason.startswith(COMPACTION_REASON)
        )
        counted = commit.total_tokens - self._provider_compacted(items)[1]
        # A compaction boundary folds after the rules ran: its note says why (its
        # summary is what the commit holds).
        if counted > self.threshold_tokens and not any(
            n.startswith((f"{self.name}: ", "compaction: ")) for n in commit.notes
        ):
            out.append(f"{counted} tokens > threshold {self.threshold_tokens} and no note says why")
        return out
