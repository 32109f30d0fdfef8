"""``check_step`` along a chain of commits, doing per commit the work of what it changed.

A batch replay checks every commit it derived against its parent; ``check_step`` reads
every item of both, so a session of n requests costs O(n²).  ``ChainChecker`` keeps, for
the last commit of a chain that passed, what the checks need of it (its items by node
id, its tool results by caller, its token total) and checks a child through the
positions its stored delta touched only.

It is a filter in front of ``check_step``, never a second judge: the fast path can
only say "passes".  Whenever it cannot prove that — a parent that was not checked here
or did not pass, attach blocks, duplicate item keys, a delta that does not rebuild the
commit, anything a touched item breaks — the commit goes through ``check_step`` itself,
which raises exactly what it raises today.  Why an untouched item cannot break
anything: the delta rebuilds the commit from the parent (checked first), so every
untouched item is the parent's, which passed with the same nodes; only a touched one
or its tool pairing partner can differ.  tests/commit/test_chain_check.py compares the
two on generated sessions with broken rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from ..model import STATE_RANK, ContextCommit, ContextItem, Node
from ..ruleapi.delta import decode, replay
from .derive import Generated
from .invariants import InvariantViolation, check_counts, check_step
from .items import merge_parents
from .pipeline import Pipeline

__all__ = ["ChainChecker"]


class _State:
    """What the checks need of a commit that passed: its items by node id (keys are
    unique and no item is attached, else there is no state) and its tool results'
    node ids by caller."""

    __slots__ = ("by_id", "tools_of")

    def __init__(self, items: tuple[ContextItem, ...]) -> None:
        self.by_id: dict[str, ContextItem] = {}
        self.tools_of: dict[str, list[str]] = {}
        for it in items:
            self.add(it)

    def add(self, it: ContextItem) -> None:
        self.by_id[it.source_node_id] = it
        if it.role == "tool" and it.caller:
            self.tools_of.setdefault(it.caller, []).append(it.source_node_id)


def _plain(items: tuple[ContextItem, ...]) -> _State | None:
    """The state of ``items``, or ``None`` where the fast path does not apply (an
    attached item, or two items of one node)."""
    if any(it.attached_from is not None for it in items):
        return None
    state = _State(items)
    return state if len(state.by_id) == len(items) else None


def _folded(it: ContextItem) -> bool:
    return it.state == "summarized"


class ChainChecker:
    """``check_step`` + nothing else, for commits handed over parent before child (see
    the module docstring); one checker per node set: ``nodes`` must be the same object
    for every commit (the checks of an untouched item depend on it)."""

    def __init__(self, pipeline: Pipeline, nodes: Set[str] | Mapping[str, Node], counter: Any):
        self.pipeline = pipeline
        self.nodes = nodes
        self.counter = counter
        #: The state of the newest commit of each chain that passed, by commit id.
        self._states: dict[str, _State] = {}
        #: How many commits the fast path passed (the rest went through check_step).
        self.fast = 0

    def check(self, parent: ContextCommit | None, gen: Generated) -> None:
        """Raise what ``check_step(parent, gen, …)`` raises (``InvariantViolation``)."""
        state = self._states.pop(parent.id, None) if parent is not None else None
        if parent is not None and state is not None and self._passes(parent, gen, state):
            self._states[gen.commit.id] = state
            self.fast += 1
            return
        check_step(
            parent,
            gen,
            pipeline=self.pipeline,
            node_ids=self.nodes,
            parent_bytes=None,
            counter=self.counter,
        )
        found = _plain(gen.commit.items)
        if found is not None:
            self._states[gen.commit.id] = found

    def _passes(self, parent: ContextCommit, gen: Generated, state: _State) -> bool:
        """Whether ``gen`` passes ``check_step`` against ``parent`` (which passed, with
        ``state``); updates ``state`` to the child's when it does.  ``False``: not
        proven here (``state`` is then dropped)."""
        c = gen.commit
        if gen.requests:
            return False
        rebuilt = list(parent.items)
        try:
            replay(rebuilt, gen.delta)
            inserted, changed, folds = decode(gen.delta)
        except Exception:  # damaged or foreign bytes: check_step says what is wrong
            return False
        if tuple(rebuilt) != c.items:
            return False
        # Where each child position came from in the parent (-1: inserted).
        origin = list(range(len(parent.items)))
        for p in inserted:
            origin.insert(p, -1)
        new = set(inserted)
        touched = sorted(new | {p for p, _ in changed} | {p for *_, ps in folds for p in ps})
        nodes = self.nodes
        total = parent.total_tokens  # the parent passed: its items sum to it
        merged: list[str] = []
        updates: list[ContextItem] = []
        added: set[str] = set()
        for q in touched:
            after = c.items[q]
            if after.attached_from is not None:
                return False
            sid = after.source_node_id
            # invariant 5, as check_step's item loop
            if after.state == "summary" or sid.startswith("sm_"):
                if after.state not in ("summary", "summarized") or sid in nodes:
                    return False
            elif sid not in nodes:
                return False
            total += 0 if _folded(after) else after.tokens
            if q in new:
                if sid in state.by_id or sid in added:
                    return False  # a second item of one node
                added.add(sid)
                if isinstance(nodes, Mapping) and sid in nodes:
                    merged.extend(merge_parents(nodes[sid]))
            else:
                before = parent.items[origin[q]]
                if (before.source_node_id, before.role, before.caller) != (
                    sid,
                    after.role,
                    after.caller,
                ):
                    return False  # another node, or another pairing: check_step judges
                total -= 0 if _folded(before) else before.tokens
                # invariants 3 and 4, as check_step's comparison with the parent
                if before.locked and after != before:
                    return False
                if (
                    STATE_RANK[after.state] < STATE_RANK[before.state]
                    or (before.state == "summary" and after.state not in ("summary", "summarized"))
                    or (before.state == "summarized" and after != before)
                ):
                    return False
            updates.append(after)
        if total != c.total_tokens:
            return False
        # invariant 7, as _check_parents (only an inserted item names a new node)
        if c.parent_ids != tuple(dict.fromkeys((parent.id, *merged))):
            return False
        for it in updates:
            if it.source_node_id in added:
                state.add(it)
            else:
                state.by_id[it.source_node_id] = it  # the same role and caller
        # tool pairing, for every pair a touched item is part of
        for it in updates:
            if it.role == "tool" and it.caller:
                caller = state.by_id.get(it.caller)
                if caller is not None and _folded(caller) != _folded(it):
                    return False
            for tool in state.tools_of.get(it.source_node_id, ()):
                if _folded(state.by_id[tool]) != _folded(it):
                    return False
        try:
            check_counts(c, changed, self.counter, self.pipeline)
        except InvariantViolation:
            return False
        return True
