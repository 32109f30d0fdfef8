"""The trade-off frontier: settings no other setting beats on both cost and quality.

A point is ``(objective, quality)``: the objective (cost or tokens) is minimised, the
quality score maximised.  ``a`` dominates ``b`` when it is no worse on both and better
on one; the frontier (Pareto front) is the points nothing dominates.  Equal points do
not dominate each other, so both are on it.  Settings with violations never enter.
"""

from __future__ import annotations

from collections.abc import Sequence

from .results import SettingResult

__all__ = ["choose", "frontier_ranks", "pareto_front", "ranked"]

Point = tuple[float, float]


def pareto_front(points: Sequence[Point]) -> list[int]:
    """Indices of the non-dominated points, in input order (O(n log n)).

    Sorted by objective (then quality, best first), a point is dominated exactly when
    an earlier point has a higher quality, or the same quality at a lower objective.
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front: list[int] = []
    best_y = float("-inf")
    best_x = float("inf")  # the lowest objective reaching best_y
    for i in order:
        x, y = points[i]
        if y > best_y:
            best_y, best_x = y, x
            front.append(i)
        elif y == best_y and x == best_x:
            front.append(i)  # a duplicate of a frontier point
    return sorted(front)


def frontier_ranks(points: Sequence[Point]) -> list[int]:
    """Each point's frontier rank (non-dominated sorting): 0 for the frontier, 1 for
    the frontier of the rest, and so on."""
    ranks = [0] * len(points)
    left = list(range(len(points)))
    level = 0
    while left:
        front = pareto_front([points[i] for i in left])
        for j in front:
            ranks[left[j]] = level
        taken = set(front)
        left = [i for j, i in enumerate(left) if j not in taken]
        level += 1
    return ranks


def _point(r: SettingResult, objective: str) -> Point:
    return (r.objective(objective), r.quality)


def ranked(results: Sequence[SettingResult], objective: str) -> list[int]:
    """Indices of ``results`` best first: settings without violations by frontier rank,
    then objective, then quality; settings with violations last."""
    ok = [i for i, r in enumerate(results) if r.ok]
    ranks = frontier_ranks([_point(results[i], objective) for i in ok])
    rank_of = dict(zip(ok, ranks))

    def key(i: int) -> tuple[int, int, float, float, int]:
        r = results[i]
        return (0 if r.ok else 1, rank_of.get(i, 0), r.objective(objective), -r.quality, i)

    return sorted(range(len(results)), key=key)


def choose(
    results: Sequence[SettingResult], objective: str, min_quality: float | None = None
) -> int | None:
    """The setting to use: on the frontier, the lowest objective whose quality is at
    least ``min_quality`` (default: the default setting's quality, else none needed).
    If none reaches it, the frontier setting of the highest quality.  Between equal
    figures the default wins (nothing to change), then the earlier setting.  ``None``
    when every setting has violations."""
    ok = [i for i, r in enumerate(results) if r.ok]
    if not ok:
        return None
    front = [ok[j] for j in pareto_front([_point(results[i], objective) for i in ok])]
    if min_quality is None:
        defaults = [r.quality for r in results if r.default and r.ok]
        min_quality = defaults[0] if defaults else float("-inf")
    good = [i for i in front if results[i].quality >= min_quality]
    if good:
        return min(
            good,
            key=lambda i: (
                results[i].objective(objective),
                -results[i].quality,
                not results[i].default,
                i,
            ),
        )
    return min(
        front,
        key=lambda i: (
            -results[i].quality,
            results[i].objective(objective),
            not results[i].default,
            i,
        ),
    )
