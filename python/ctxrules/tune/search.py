"""Which settings a sweep measures: the whole grid, a random sample of it, or successive
halving over the sessions.

A *setting* gives each swept parameter one of its values.  The grid is the product
of the parameters' values in the order given (the last parameter varies fastest, as
``itertools.product``); ``setting_at`` finds the setting at a grid index without
building the grid, so a random sample of a huge grid costs only the sample.

Successive halving (``halving``) measures many settings on few sessions first: each
round measures the surviving settings on a longer prefix of one seeded shuffle of
the sessions, keeps the better half (``rank_key``: frontier rank first), and the last
round measures the survivors on every session.  Everything is deterministic given
the seed.

The work is bounded before anything is built: the grid is counted, not made, and a
search measures at most ``MAX_SETTINGS`` settings — ``grid`` refuses a larger grid
(naming ``random`` / ``halving``), and ``--budget`` may not exceed it.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError
from .params import Param

__all__ = [
    "DEFAULT_BUDGET",
    "MAX_SETTINGS",
    "SEARCHES",
    "Search",
    "Setting",
    "grid",
    "grid_size",
    "halving",
    "halving_rounds",
    "random_settings",
    "setting_at",
    "starting_settings",
]

Search = Literal["auto", "grid", "random", "halving"]
SEARCHES: tuple[str, ...] = ("auto", "grid", "random", "halving")

#: Settings measured in full when ``--budget`` is not given: ``auto`` sweeps a grid up
#: to this size and halves down from a sample of this many beyond it.
DEFAULT_BUDGET = 48
#: The most settings one search measures (each is a replay of every session): the
#: largest grid ``--search grid`` takes and the largest ``--budget``.
MAX_SETTINGS = 10_000


@dataclass(frozen=True)
class Setting:
    """One value per swept parameter: ``items`` pairs ``rule.param`` with its value,
    in the order the parameters were given."""

    items: tuple[tuple[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        """``{"rule.param": value}`` in parameter order."""
        return dict(self.items)

    @property
    def label(self) -> str:
        """``name=value`` pairs (the parameter's name without its rule, unless two
        swept parameters share a name): how tables and plots name the setting."""
        names = [k.partition(".")[2] for k, _ in self.items]
        short = len(set(names)) == len(names)
        return " ".join(f"{n if short else k}={_show(v)}" for n, (k, v) in zip(names, self.items))

    def by_rule(self) -> dict[str, dict[str, Any]]:
        """``{rule: {param: value}}``: what ``PipelineConfig.with_params`` takes."""
        out: dict[str, dict[str, Any]] = {}
        for key, value in self.items:
            rule, _, name = key.partition(".")
            out.setdefault(rule, {})[name] = value
        return out


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def grid_size(params: Sequence[Param]) -> int:
    """How many settings the grid of ``params`` holds."""
    return math.prod(len(p.values) for p in params)


def grid(params: Sequence[Param]) -> Iterator[Setting]:
    """Every setting, in ``itertools.product`` order."""
    keys = [p.key for p in params]
    for values in itertools.product(*(p.values for p in params)):
        yield Setting(tuple(zip(keys, values)))


def setting_at(params: Sequence[Param], index: int) -> Setting:
    """The setting at position ``index`` of ``grid(params)``."""
    picked: list[Any] = []
    for p in reversed(params):
        index, digit = divmod(index, len(p.values))
        picked.append(p.values[digit])
    return Setting(tuple(zip((p.key for p in params), reversed(picked))))


def random_settings(params: Sequence[Param], count: int, seed: int) -> list[Setting]:
    """``count`` distinct settings drawn from the grid with ``random.Random(seed)``, in
    grid order (all of them when the grid is no larger)."""
    size = grid_size(params)
    if count >= size:
        return list(grid(params))
    rng = random.Random(seed)
    if size <= 4 * count:
        picks = rng.sample(range(size), count)
    else:  # a huge grid: draw indices (few repeats), never a range longer than a C long
        chosen: set[int] = set()
        while len(chosen) < count:
            chosen.add(rng.randrange(size))
        picks = list(chosen)
    return [setting_at(params, i) for i in sorted(picks)]


def starting_settings(
    params: Sequence[Param], search: Search, budget: int, seed: int
) -> tuple[str, list[Setting]]:
    """The search ``auto`` stands for, and the settings the search starts from.

    ``grid``: every setting; ``random``: ``budget`` of them; ``halving``: ``budget`` of
    them to halve from; ``auto``: the grid when it holds at most ``budget``
    settings, else halving.
    """
    if budget < 1:
        raise ConfigError(f"--budget must be at least 1, got {budget}", where="--budget")
    if budget > MAX_SETTINGS:
        raise ConfigError(
            f"--budget {budget:,} is more settings than one search measures "
            f"(at most {MAX_SETTINGS:,}; each replays every session)",
            where="--budget",
        )
    size = grid_size(params)
    chosen = search if search != "auto" else ("grid" if size <= budget else "halving")
    if chosen == "grid":
        if size > MAX_SETTINGS:
            raise ConfigError(
                f"the grid holds {size:,} settings, more than one search measures "
                f"(at most {MAX_SETTINGS:,}; each replays every session)",
                where="--search grid",
                hint="use --search random or --search halving with --budget N, or fewer values",
            )
        return chosen, list(grid(params))
    return chosen, random_settings(params, budget, seed)


def halving_rounds(settings: int, sessions: int) -> list[int]:
    """How many sessions each round of halving measures, first round first.

    One halving per round until one setting is left, as long as the first round still
    gets a session: ``1 + min(ceil(log2 settings), floor(log2 sessions))`` rounds;
    round ``r`` of ``R`` measures ``ceil(sessions / 2**(R-1-r))`` sessions, the last
    all of them.
    """
    if settings < 1 or sessions < 1:
        raise ValueError("halving needs at least one setting and one session")
    rounds = 1 + min((settings - 1).bit_length(), sessions.bit_length() - 1)
    return [math.ceil(sessions / 2 ** (rounds - 1 - r)) for r in range(rounds)]


def halving(
    settings: Sequence[Setting],
    sessions: Sequence[str],
    measure: Callable[[Setting, tuple[str, ...]], Any],
    rank_key: Callable[[Sequence[Any]], list[int]],
    seed: int,
) -> list[tuple[int, Any]]:
    """Successive halving: every result measured, as ``(round, result)``.

    ``measure(setting, sessions)`` measures one setting on some sessions;
    ``rank_key(results)`` orders a round's results best first (indices into them).
    Each round keeps the better half; the last round measures on every session.
    """
    order = list(sessions)
    random.Random(seed).shuffle(order)
    counts = halving_rounds(len(settings), len(order))
    alive = list(settings)
    out: list[tuple[int, Any]] = []
    for r, count in enumerate(counts):
        subset = tuple(order[:count])
        results = [measure(s, subset) for s in alive]
        out += [(r, res) for res in results]
        if r == len(counts) - 1:
            break
        keep = max(1, (len(alive) + 1) // 2)
        best = rank_key(results)[:keep]
        alive = [alive[i] for i in sorted(best)]
    return out
