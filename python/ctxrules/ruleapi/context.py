"""The ``RuleContext`` a rule works through: the working item list of one commit being
derived.

A rule never touches a commit directly.  It receives a ``RuleContext`` and changes
items only through ``ctx.replace`` / ``ctx.fold``.  Those two calls enforce the
invariants (locked items are refused, states only tighten, summary items only come
from folding), record each change for the commit delta, and mark the item for the one
token-count batch.

Rules are incremental: ``ctx.new_positions()`` lists the items added by this commit,
and ``ctx.cursors`` is a small dict of ints carried from commit to commit, so a rule can
resume where it stopped instead of re-reading the whole history.  A cursor is either an
item position or a plain value, as the rule that writes it declares
(``Rule.position_cursors``): ``ctx.insert`` shifts positions so they keep naming the
same item and never touches values (counts, flags, the generator's own marks).

A rule that needs a summary asks ``ctx.summary(...)``: it gets the caller's answer, or
``None`` while the request is recorded for the caller (``ctx.requests``), so deriving
never runs a summarizer (see ``ctxrules.summarizers.request``).  docs/rules.md is the
guide for rule authors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import msgspec

from ..errors import RuleError
from ..model import STATE_RANK, CompactionBlock, ContextItem, provider_compaction_start
from ..summarizers.request import SummaryRequest, SummaryResult, request_key
from .cache import DEFAULT_PRICING, CacheLedger, CachePricing
from .delta import Delta, folded_item

#: What answers a summary request during a derive (``derive_with_summaries`` hands one
#: in): a ``SummaryResult``, or ``None`` for no answer yet.
InlineAnswer = Callable[[SummaryRequest], SummaryResult | None]

__all__ = ["COMPACTION_BLOCKS", "SUMMARY_TOKENS", "RuleContext", "item_text_for_tokens"]

#: The generator's cursor saying whether any item of a commit holds a
#: ``CompactionBlock`` (1) or none does (0): a commit without one needs no scan for a
#: provider's compaction (``RuleContext.provider_compaction_start``).
COMPACTION_BLOCKS = "compaction.blocks"
#: The generator's cursor holding the tokens of a commit's ``summary`` items
#: (``RuleContext.summary_tokens``), kept up to date change by change.
SUMMARY_TOKENS = "summary.tokens"


def _holds_compaction(item: ContextItem) -> bool:
    blocks = item.blocks
    return bool(blocks) and CompactionBlock in map(type, blocks)


def item_text_for_tokens(item: ContextItem) -> list[str]:
    """The texts whose token counts make ``item.tokens``: rendered text, then tool input,
    then the summary of each effective Anthropic compaction block (text its vendor reads
    in place of what came before; OpenAI's compaction state is opaque, not counted)."""
    texts = [item.rendered, item.tool_input] if item.tool_input else [item.rendered]
    for b in item.blocks:
        if isinstance(b, CompactionBlock) and b.vendor == "" and b.content:
            texts.append(b.content)
    return texts


class RuleContext:
    """The working item list of one commit being generated.

    Read ``items`` (a list in conversation order: do not mutate it directly),
    ``now``, ``cursors``; change items with ``replace`` / ``fold``; report with
    ``note``; ask for summaries with ``summary``.  ``tokens()`` / ``total_tokens()``
    give exact counts, counting every pending changed item in one batch first.
    ``positions`` are the cursor keys that name item positions (the pipeline's
    ``Rule.position_cursors``); ``summaries`` the caller's answers to summary requests,
    ``answer`` (optional) a function that answers the others as they are asked.
    ``cache`` is the commit's cache ledger (``ctxrules.ruleapi.cache``): whether
    changing cached items now pays, at the model's cache prices (``pricing``), for the
    request to ``model`` (``""``: not known; another model than the previous commit's
    has nothing cached).
    """

    def __init__(
        self,
        items: list[ContextItem],
        *,
        now: float,
        cursors: dict[str, int],
        new_ids: set[str],
        first_new: int,
        counter: Any,
        total_tokens: int,
        full_pass: bool,
        positions: Collection[str] = (),
        summaries: Mapping[str, SummaryResult] | None = None,
        pricing: CachePricing = DEFAULT_PRICING,
        compaction_blocks: bool | None = None,
        answer: InlineAnswer | None = None,
        summary_tokens: int | None = None,
        model: str = "",
    ):
        self.items = items
        self.now = now
        self.cursors = cursors
        self.full_pass = full_pass
        self.notes: list[str] = []
        self.rule_name = ""
        #: Which rule wrote each item reason of this derive (reason → rule name): what
        #: ``ctxrules.commit.savings`` attributes a changed item's tokens by.
        self.reasons: dict[str, str] = {}
        #: Summary requests no answer was given for, in the order they were made.
        self.requests: list[SummaryRequest] = []
        self._positions = tuple(positions)
        self._summaries = dict(summaries) if summaries else {}
        self._answer = answer
        #: The exception ``answer`` raised (the derive raises it once the rules ran).
        self.answer_error: Exception | None = None
        self._new_ids = new_ids
        self._first_new = first_new
        self._inserted_inside = False  # whether an item was inserted before the parent's end
        self._counter = counter
        self._total = total_tokens
        # Tokens of the summary items (the parent's ``summary.tokens``), kept as
        # ``_total`` is; None until known (a parent made before the cursor).
        self._summary_total = summary_tokens
        self._pending: set[int] = set()
        self._changed: set[int] = set()
        self._inserted: set[int] = set()
        self._folded: dict[int, int] = {}  # position of an untouched parent item → fold no.
        self._folds: list[tuple[str, str]] = []  # (summary id, reason) of each fold
        self._counted_batches = 0
        self._marks: list[int] = []  # places between items the generator keeps track of
        # Whether an item the parent commit held (what the provider has cached) changed
        # its text or was folded: the request rewrites the cache.  (A new item placed
        # before the parent's end is not counted: a tool result lands beside its call,
        # which renders in the same place as at the end, so the ledger errs on waiting.)
        self._cached_changed = False
        self._parent_tokens = total_tokens
        self._cache: CacheLedger | None = None
        self._pricing = pricing
        self._model = model
        # Whether an item of the parent holds a compaction block (None: not known).
        self._parent_blocks = compaction_blocks

    # -- reading -----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.items)

    def new_positions(self) -> list[int]:
        """Positions of the items this commit added (ascending), wherever they were
        inserted (a late tool result lands beside its call, before the end)."""
        items, new = self.items, self._new_ids
        if not self._inserted_inside:  # the common case: every insert was at the end
            return [i for i in range(self._first_new, len(items)) if items[i].source_node_id in new]
        return sorted(p for p in self._inserted if items[p].source_node_id in new)

    def scan_positions(self) -> Sequence[int]:
        """What a rule that looks at each item once should scan: new items, or all of
        them when the rule set changed since the parent commit (``full_pass``)."""
        return range(len(self.items)) if self.full_pass else self.new_positions()

    def inserted_count(self) -> int:
        """How many items this commit inserted so far (new nodes and summaries)."""
        return len(self._inserted)

    def is_new(self, pos: int) -> bool:
        """Whether the item at ``pos`` was added by this commit."""
        return self.items[pos].source_node_id in self._new_ids

    def tokens(self, pos: int) -> int:
        """Exact token count of the item at ``pos`` as it is now."""
        if pos in self._pending:
            self.flush()
        return self.items[pos].tokens

    @property
    def cache(self) -> CacheLedger:
        """The cache ledger of this commit (made on first use, shared by every rule, so
        the edits of one commit are priced as one rewrite)."""
        if self._cache is None:
            self._cache = CacheLedger(
                now=self.now,
                cursors=self.cursors,
                cached_tokens=self._parent_tokens,
                has_parent=self._first_new > 0,
                rewritten=lambda: self._cached_changed,
                pricing=self._pricing,
                tokens_from=self._cached_from,
                model=self._model,
            )
        return self._cache

    def _cached_from(self, pos: int) -> int:
        """Tokens of the parent's items (what the provider cached) from ``pos`` on."""
        items = self.items
        return sum(
            items[p].tokens
            for p in range(max(0, pos), self._first_new)
            if items[p].state != "summarized"
        )

    def provider_compaction_start(self) -> int:
        """``ctxrules.model.provider_compaction_start`` of the items as they are now,
        without looking at every item when none can hold a compaction block: the
        parent held none (its ``compaction.blocks`` cursor) and no item this commit
        added or changed holds one (a fold keeps an item's blocks)."""
        if self._parent_blocks is False and not self._changed_hold_compaction():
            return -1
        return provider_compaction_start(self.items)

    def holds_compaction(self) -> bool:
        """Whether any item holds a ``CompactionBlock`` now (the ``compaction.blocks``
        cursor the generator writes)."""
        if self._parent_blocks is None:
            return any(_holds_compaction(it) for it in self.items)
        return self._parent_blocks or self._changed_hold_compaction()

    def _changed_hold_compaction(self) -> bool:
        items = self.items
        return any(_holds_compaction(items[p]) for p in self._changed | self._inserted)

    def count(self, text: str) -> int:
        """Tokens of a text with the commit's tokenizer (cached by content)."""
        return int(self._counter.count(text))

    def total_tokens(self) -> int:
        """Tokens of everything the model would see now (summarized items excluded)."""
        if self._pending:
            self.flush()
        return self._total

    def summary_tokens(self) -> int:
        """Tokens of the ``summary`` items now: the parent's figure (its
        ``summary.tokens`` cursor) kept up to date with each change, so no item is
        looked at (a parent made before the cursor is summed once)."""
        if self._pending:
            self.flush()
        if self._summary_total is None:
            self._summary_total = sum(it.tokens for it in self.items if it.state == "summary")
        return self._summary_total

    def _summaries_changed(self, tokens: int) -> None:
        if self._summary_total is not None:
            self._summary_total += tokens

    # -- changing ----------------------------------------------------------------

    def replace(self, pos: int, *, reason: str, **changes: Any) -> ContextItem:
        """Replace the item at ``pos`` by a copy with ``changes``; returns the new item.

        Refused (``RuleError``) for locked items, for a state that would loosen, for
        making a ``summary`` or ``summarized`` item or changing a summary's state (use
        ``fold``), and for changing the identity fields (``source_node_id``, ``role``,
        ``caller``, ``tool_use_id``).
        """
        old = self.items[pos]
        where = f"rule {self.rule_name!r} on item {old.source_node_id}"
        if old.locked:
            raise RuleError("locked items may not be changed by rules", where=where)
        for key in ("source_node_id", "role", "caller", "tool_use_id", "attached_from"):
            if key in changes and changes[key] != getattr(old, key):
                raise RuleError(f"rules may not change {key!r}", where=where)
        state = changes.get("state", old.state)
        if state in ("summary", "summarized") and state != old.state:
            raise RuleError(f"state {state!r} is only reached through fold()", where=where)
        if old.state in ("summarized",):
            raise RuleError("summarized items are final", where=where)
        if old.state == "summary" and state != "summary":
            # A summary never starts a turn; the rules that count turns (tool aging's
            # settled stretch) rely on that staying so.
            raise RuleError(
                f"a summary's state changes only through fold(), not to {state!r}", where=where
            )
        if STATE_RANK[state] < STATE_RANK[old.state]:
            raise RuleError(f"state may only tighten, not {old.state} → {state}", where=where)
        new = msgspec.structs.replace(old, reason=reason, changed_at=self.now, **changes)
        if pos < self._first_new and (
            new.rendered != old.rendered
            or new.tool_input != old.tool_input
            or new.state != old.state
            or new.blocks != old.blocks
        ):
            self._cached_changed = True
        self._swap(pos, new)
        self._wrote(reason)
        return new

    def fold(self, start: int, end: int, text: str, *, reason: str) -> int:
        """Fold items ``[start, end)`` into one new ``summary`` item inserted at ``end``.

        Folded items become ``summarized`` with ``merged_into`` set to the summary's
        ``sm_<hex>`` id; items already ``summarized`` in the range stay as they are.
        Returns the summary item's position.
        """
        return self.fold_positions(range(start, end), end, text, reason=reason)

    def fold_positions(self, positions: Sequence[int], at: int, text: str, *, reason: str) -> int:
        """Fold the items at ``positions`` (ascending) into one ``summary`` item inserted
        at ``at`` (after the last of them); returns the summary item's position.

        ``fold`` for a range; this form lets the items kept between the folded ones (a
        locked item, the task anchor) stay where they are, so a compaction that folds
        around them still makes one summary.  Items already ``summarized`` stay as they
        are; a locked item is refused.
        """
        positions = list(positions)
        if positions and (positions != sorted(set(positions)) or at <= positions[-1]):
            raise RuleError(
                "fold positions must ascend and the summary must follow the last of them",
                where=f"rule {self.rule_name!r}",
            )
        digest = hashlib.blake2b(digest_size=8)
        for pos in positions:
            digest.update(self.items[pos].source_node_id.encode("utf-8", "surrogatepass") + b"\0")
        digest.update(text.encode("utf-8", "surrogatepass"))
        sm_id = f"sm_{digest.hexdigest()}"
        fold_no = len(self._folds)
        self._wrote(reason)
        self._folds.append((sm_id, reason))
        for pos in positions:
            it = self.items[pos]
            if it.state == "summarized":
                continue
            if pos < self._first_new:
                self._cached_changed = True
            if it.locked:
                raise RuleError(
                    "locked items may not be folded",
                    where=f"rule {self.rule_name!r} on item {it.source_node_id}",
                )
            new = folded_item(it, sm_id, reason, self.now)
            if pos in self._changed or pos in self._inserted:
                self._swap(pos, new, recount=False)
            else:  # the parent's item: the delta records the fold, not the item
                self._total -= it.tokens
                if it.state == "summary":  # an earlier summary folded (a compaction)
                    self._summaries_changed(-it.tokens)
                self.items[pos] = new
                self._folded[pos] = fold_no
        summary = ContextItem(
            source_node_id=sm_id,
            role="assistant",
            state="summary",
            rendered=text,
            reason=reason,
            changed_at=self.now,
        )
        self.insert(at, summary)
        return at

    def mark(self) -> int:
        """Mark the place after the last item (where a compaction boundary stands, which
        has no item); returns a handle for ``marked``.  The generator's: a rule never
        calls it.  The place moves with the items before it: an insert before it, or a
        summary inserted right at it, moves it on; a new node's item appended at it does
        not."""
        self._marks.append(len(self.items))
        return len(self._marks) - 1

    def marked(self, handle: int) -> int:
        """The position now of the place ``mark`` returned ``handle`` for."""
        return self._marks[handle]

    def insert(self, pos: int, item: ContextItem) -> None:
        """Insert a new item at ``pos`` (the generator's new items and fold's summary);
        position cursors at or after ``pos`` shift by one so they keep naming the same
        item.  Value cursors are never touched."""
        if self._marks:
            summary = item.state == "summary"
            self._marks = [m + 1 if pos < m or (pos == m and summary) else m for m in self._marks]
        if pos >= len(self.items):
            self.items.append(item)  # the common case: nothing after it to shift
        else:
            self.items.insert(pos, item)
            cursors = self.cursors
            for key in self._positions:
                value = cursors.get(key)
                if value is not None and value >= pos:
                    cursors[key] = value + 1
            if pos < self._first_new:
                self._first_new += 1
                self._inserted_inside = True
            self._pending = {p + 1 if p >= pos else p for p in self._pending}
            self._changed = {p + 1 if p >= pos else p for p in self._changed}
            self._inserted = {p + 1 if p >= pos else p for p in self._inserted}
            self._folded = {p + 1 if p >= pos else p: k for p, k in self._folded.items()}
        self._pending.add(pos)
        self._inserted.add(pos)
        if item.state != "summarized":
            self._total += item.tokens  # corrected by flush() with the real count
        if item.state == "summary":
            self._summaries_changed(item.tokens)

    def summary(
        self,
        items: Sequence[ContextItem],
        *,
        summarizer: str,
        budget: int,
        timeout_seconds: float = 0.0,
        instructions: str = "",
    ) -> SummaryResult | None:
        """The caller's answer to a summary of ``items`` by ``summarizer``, or ``None``.

        ``None`` means no answer was handed in: the request is recorded in
        ``requests`` (the derive returns it) and the rule should change nothing it
        would base on the summary.  The caller answers and derives again; the same
        answer always gives the same commit.  ``timeout_seconds`` travels with the
        request: it is the caller's time limit for obtaining the answer.
        ``instructions`` (what the summary should keep or focus on) are part of the
        request and of its key.
        """
        run = tuple(items)
        key = request_key(summarizer, budget, run, instructions)
        answer = self._summaries.get(key)
        if answer is not None:
            return answer
        if any(r.key == key for r in self.requests):
            return None
        request = SummaryRequest(
            key=key,
            rule=self.rule_name,
            summarizer=summarizer,
            items=run,
            budget=budget,
            timeout_seconds=timeout_seconds,
            instructions=instructions,
        )
        # Answered here when the caller gave an answer function (derive_with_summaries):
        # the rule gets what a derive handed that answer would give it.  Once one
        # answer failed, none is asked for any more: the derive ends as one without
        # answers would and raises that failure (derive_commit).
        if self._answer is not None and self.answer_error is None:
            try:
                found = self._answer(request)
            except Exception as exc:
                self.answer_error = exc
            else:
                if found is not None:
                    self._summaries[key] = found
                    return found
        self.requests.append(request)
        return None

    def note(self, text: str) -> None:
        """Record what the current rule did or could not do (kept on the commit)."""
        self.notes.append(f"{self.rule_name}: {text}" if self.rule_name else text)

    # -- token accounting ----------------------------------------------------------

    def _wrote(self, reason: str) -> None:
        # The generator's own changes (a cited item made an anchor) run under no rule.
        if self.rule_name:
            self.reasons.setdefault(reason, self.rule_name)

    def _swap(self, pos: int, new: ContextItem, *, recount: bool = True) -> None:
        old = self.items[pos]
        if old.state != "summarized":
            self._total -= old.tokens
        if new.state != "summarized":
            self._total += new.tokens  # corrected by flush() with the real count
        if old.state == "summary":
            self._summaries_changed(-old.tokens)
        if new.state == "summary":
            self._summaries_changed(new.tokens)
        self.items[pos] = new
        self._changed.add(pos)
        if recount:
            self._pending.add(pos)

    def delta(self) -> Delta:
        """What this commit changed relative to its parent (see ``Delta``); replaying
        it onto the parent's list rebuilds this one."""
        self.flush()
        touched = sorted(self._changed | self._inserted)
        positions: list[list[int]] = [[] for _ in self._folds]
        for p in sorted(self._folded):
            positions[self._folded[p]].append(p)
        folds = [
            (sm_id, reason, self.now, ps)
            for (sm_id, reason), ps in zip(self._folds, positions)
            if ps
        ]
        return sorted(self._inserted), [(p, self.items[p]) for p in touched], folds

    def flush(self) -> None:
        """Count every pending item in one batch and fix ``tokens`` and the total."""
        if not self._pending:
            return
        positions = sorted(self._pending)
        self._pending.clear()
        texts: list[str] = []
        spans: list[int] = []
        for p in positions:
            parts = item_text_for_tokens(self.items[p])
            texts.extend(parts)
            spans.append(len(parts))
        counts = self._counter.count_batch(texts)
        self._counted_batches += 1
        k = 0
        for p, n in zip(positions, spans):
            tokens = sum(counts[k : k + n])
            k += n
            it = self.items[p]
            if it.state != "summarized":
                self._total += tokens - it.tokens
            if it.state == "summary":
                self._summaries_changed(tokens - it.tokens)
            if tokens != it.tokens:
                # Token counts are bookkeeping, not a change of content: no new op.
                self.items[p] = msgspec.structs.replace(it, tokens=tokens)
