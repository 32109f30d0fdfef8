"""Commit diff: what changed between two commits, computed in Rust in one crossing."""

from __future__ import annotations

import msgspec

from .. import _core
from ..errors import ValidationError
from ..model import ContextCommit

__all__ = ["CommitDiff", "diff_commits"]


class CommitDiff(msgspec.Struct, frozen=True, kw_only=True):
    """What changed from commit ``a`` to ``b``.

    Items are matched by ``source_node_id`` (and ``attached_from``).  ``changed`` lists
    ``(id, state in a, state in b)``; ``rewritten`` items kept their state but render
    differently.  ``prefix_items`` / ``prefix_tokens`` measure the leading rendered
    items ``a`` and ``b`` share exactly: what a provider's prompt cache can reuse.
    """

    a: str
    b: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[tuple[str, str, str], ...]
    rewritten: tuple[str, ...]
    prefix_items: int
    prefix_tokens: int
    tokens_a: int
    tokens_b: int


def diff_commits(a: ContextCommit, b: ContextCommit) -> CommitDiff:
    """Diff two commits in Rust: one boundary crossing with both item tuples (the core
    reads items it has not seen before with the same reader as rendering)."""

    try:
        added, removed, changed, rewritten, prefix_items, prefix_tokens = _core.diff_items(
            a.items, b.items
        )
    except (ValueError, TypeError) as exc:
        raise ValidationError(
            str(exc),
            where=f"diff of commits {a.id} and {b.id}",
            hint="diff ContextCommits whose items are ContextItems",
        ) from None
    return CommitDiff(
        a=a.id,
        b=b.id,
        added=tuple(added),
        removed=tuple(removed),
        changed=tuple((k, x, y) for k, x, y in changed),
        rewritten=tuple(rewritten),
        prefix_items=prefix_items,
        prefix_tokens=prefix_tokens,
        tokens_a=a.total_tokens,
        tokens_b=b.total_tokens,
    )
