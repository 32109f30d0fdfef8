"""The delta format: how a commit is stored against its parent (encode, replay, the
folded item).  The one owner of that format: the rule context records changes in it,
the stores keep its bytes, loading replays them.

A delta lists, in the child's final positions: the inserted positions, ``(position,
item)`` for every new or replaced item, and the folds of parent items that changed
nothing but their state, as ``(summary id, reason, changed_at, positions)`` — a fold
stores the positions it absorbed, not the absorbed items again.
"""

from __future__ import annotations

import msgspec

from ..model import ContextItem

__all__ = ["Delta", "decode", "encode", "folded_item", "replay"]

#: A commit's change against its parent (see the module docstring).
Delta = tuple[list[int], list[tuple[int, ContextItem]], list[tuple[str, str, float, list[int]]]]

_encoder = msgspec.msgpack.Encoder(order="sorted")
_decoder = msgspec.msgpack.Decoder(Delta)
# Rows written before folds were stored compactly: (inserted, changed).
_old_decoder = msgspec.msgpack.Decoder(tuple[list[int], list[tuple[int, ContextItem]]])


def folded_item(item: ContextItem, sm_id: str, reason: str, now: float) -> ContextItem:
    """``item`` folded into the summary ``sm_id`` (what a fold makes and a replay rebuilds)."""
    return msgspec.structs.replace(
        item, state="summarized", merged_into=sm_id, reason=reason, changed_at=now
    )


def encode(delta: Delta) -> bytes:
    """The stored bytes of a delta (MessagePack, keys sorted: the same delta, the same bytes)."""
    return _encoder.encode(delta)


def decode(data: bytes) -> Delta:
    """A delta from its stored bytes (rows of the older two-part form too)."""
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError:
        inserted, changed = _old_decoder.decode(data)
        return inserted, changed, []


def replay(items: list[ContextItem], delta: bytes) -> str | None:
    """Turn the parent's item list ``items`` into the child's by applying ``delta``;
    returns the text of the summary item the delta wrote, if any (the commit's new
    running summary)."""
    inserted, changed, folds = decode(delta)
    for p in inserted:
        items.insert(p, None)  # type: ignore[arg-type]
    summary = None
    for p, it in changed:
        items[p] = it
        if it.state == "summary":
            summary = it.rendered
    for sm_id, reason, changed_at, positions in folds:
        for p in positions:
            items[p] = folded_item(items[p], sm_id, reason, changed_at)
    return summary
