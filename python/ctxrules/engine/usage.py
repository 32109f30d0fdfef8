"""Usage statistics: one number, two readers (a gauge and a ``/context``-style breakdown).

``UsageRecord`` is the record both readers show::

    {"window": int, "total_used": int, "basis": "measured" | "estimated",
     "estimated": int, "calibration": float}   # calibration only when measured

* ``measured`` right after a real request: ``total_used`` is what the provider billed
  as that request's prompt (input + cache reads + cache writes), ``estimated`` our
  local estimate of the same request, ``calibration`` their ratio.  A measurement
  belongs to the head it measured (the answer it produced): answers that came back
  without usage keep it, anything else that changes what the next request carries
  (new input, a compaction, a model switch, a checkout) ends it.
* ``estimated`` otherwise: ``total_used`` = ``estimated`` = the local estimate of what
  the next request at HEAD carries.

``Breakdown`` splits the window into categories — system prompt, instruction files,
other context sources, skills, memory, tool declarations, messages by item state,
output reserve, compaction buffer, free — that add up to the window exactly: the used
categories are their local estimates scaled to ``total_used`` (largest remainders, so
the integers add up; a bill far above our count of the request shows the excess as
``unaccounted``: text the provider read that the session does not hold, such as an
imported agent's own system prompt), and the compaction buffer (the room between the
automatic compaction threshold and the usable window) is shown as a buffer, never as
used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

__all__ = ["Breakdown", "Category", "UsageRecord", "breakdown", "scale_to"]

Basis = Literal["measured", "estimated"]

#: Billed ÷ estimated above which the difference is shown as ``unaccounted`` rather than
#: spread over the categories (our estimates are within a few per cent of the bill).
UNACCOUNTED_RATIO = 1.25


class UsageRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The occupancy of a session's window now (see the module docstring).

    ``calibration`` is set only when ``basis`` is ``"measured"``; ``as_dict`` gives the
    record with exactly the documented keys.
    """

    window: int
    total_used: int
    basis: Basis
    estimated: int
    calibration: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The record as a plain dict: the five keys, ``calibration`` only when measured."""
        out: dict[str, Any] = {
            "window": self.window,
            "total_used": self.total_used,
            "basis": self.basis,
            "estimated": self.estimated,
        }
        if self.basis == "measured" and self.calibration is not None:
            out["calibration"] = self.calibration
        return out

    @classmethod
    def measured(
        cls, window: int, billed: int, estimated: int, *, sent: int | None = None
    ) -> UsageRecord:
        """A measured record: ``billed`` by the provider, ``estimated`` locally.

        ``sent`` is the provider's count of the request as it was sent when the vendor
        compacted it on its side (``Usage.compaction``): ``billed`` is then the
        compacted prompt (what the next request carries), and the calibration pairs
        ``sent`` with our estimate of the same request.
        """
        pair = billed if sent is None else sent
        return cls(
            window=window,
            total_used=billed,
            basis="measured",
            estimated=estimated,
            calibration=round(pair / estimated, 4) if estimated else None,
        )

    @classmethod
    def estimate(cls, window: int, estimated: int) -> UsageRecord:
        """An estimated record: the local estimate is the figure."""
        return cls(window=window, total_used=estimated, basis="estimated", estimated=estimated)


class Category(msgspec.Struct, frozen=True):
    """One line of the breakdown: its name, its tokens and what kind of room it is
    (``"used"`` by the prompt, ``"reserve"`` for the answer, ``"buffer"`` before the
    window is full, ``"free"``)."""

    name: str
    tokens: int
    kind: Literal["used", "reserve", "buffer", "free"]


class Breakdown(msgspec.Struct, frozen=True, kw_only=True):
    """The window split into categories that add up to it exactly.

    ``over`` is how far the prompt exceeds the window (0 normally); then the reserve,
    buffer and free room are 0 and the used categories add up to ``window + over``.
    """

    window: int
    total_used: int
    categories: tuple[Category, ...]
    over: int = 0

    def as_dict(self) -> dict[str, Any]:
        """``{"window", "total_used", "over", "categories": [{"name", "tokens", "kind"}]}``."""
        return {
            "window": self.window,
            "total_used": self.total_used,
            "over": self.over,
            "categories": [
                {"name": c.name, "tokens": c.tokens, "kind": c.kind} for c in self.categories
            ],
        }


def scale_to(parts: Mapping[str, float], total: int) -> dict[str, int]:
    """Integers proportional to ``parts`` that add up to ``total`` exactly (largest
    remainders; ties by order).  All-zero parts put ``total`` on the last key."""
    if not parts:
        return {}
    raw = sum(max(0.0, v) for v in parts.values())
    keys = list(parts)
    if raw <= 0:
        return {k: (total if k == keys[-1] else 0) for k in keys}
    exact = {k: max(0.0, parts[k]) * total / raw for k in keys}
    out = {k: int(exact[k]) for k in keys}
    short = total - sum(out.values())
    order = sorted(keys, key=lambda k: (-(exact[k] - out[k]), keys.index(k)))
    for k in order[:short]:
        out[k] += 1
    return out


def breakdown(
    *,
    window: int,
    total_used: int,
    used_parts: Mapping[str, float],
    output_reserve: int,
    compact_tokens: int,
    estimated: int | None = None,
) -> Breakdown:
    """The ``Breakdown`` of a window: ``used_parts`` (category → local estimate) scaled to
    ``total_used``, then the output reserve, the compaction buffer (from the automatic
    compaction threshold ``compact_tokens`` to the usable window) and the free room,
    each cut so that the whole is exactly ``window``.

    When the provider billed more than ``UNACCOUNTED_RATIO`` × our ``estimated`` size of
    the same request, the parts are scaled to ``estimated`` and the difference is the
    category ``unaccounted`` (text the provider read that the session does not hold)."""
    used = scale_to(dict(used_parts), total_used)
    if estimated is not None and estimated > 0 and total_used > estimated * UNACCOUNTED_RATIO:
        # Far more was billed than the request holds by our count (an imported
        # transcript whose harness sent a system prompt and tools it did not record):
        # the parts keep their own size and the rest is named for what it is.
        used = scale_to(dict(used_parts), estimated)
        used["unaccounted"] = total_used - estimated
    over = max(0, total_used - window)
    room = window - total_used  # what is left for reserve, buffer and free (may be < 0)
    reserve = max(0, min(output_reserve, room))
    usable = window - output_reserve
    buffer = max(0, min(usable - compact_tokens, room - reserve, usable - total_used))
    free = max(0, room - reserve - buffer)
    cats = [Category(name, n, "used") for name, n in used.items()]
    cats += [
        Category("output_reserve", reserve, "reserve"),
        Category("compaction_buffer", buffer, "buffer"),
        Category("free", free, "free"),
    ]
    return Breakdown(window=window, total_used=total_used, categories=tuple(cats), over=over)
