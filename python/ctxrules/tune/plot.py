"""The plots of a sweep (matplotlib's Agg canvas: no display is needed or touched).

Figures are made with ``matplotlib.figure.Figure`` on a ``FigureCanvasAgg``, never
through ``pyplot``: no global backend is chosen and no figure is left registered, so
tune runs on a headless machine and inside a user's notebook alike.

* ``frontier.png`` — every setting measured on all sessions at (objective, quality):
  the Pareto frontier drawn as a step line with its settings named, the default
  marked, the chosen setting ringed, settings with violations crossed out in red.
* ``sweep.png`` — one panel per swept parameter: the objective of each setting
  against that parameter's value, frontier settings highlighted.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from .sweep import TuneResult

__all__ = ["MAX_TICKS", "PLOT_HINT", "SOFTWARE", "available", "plot_frontier", "plot_sweep"]

#: What to do when matplotlib is missing (``available()`` is False).
PLOT_HINT = "install the plots with: pip install 'ctxrules[plot]'"
#: The PNG metadata ``Software`` of our plots: how a later run knows a file is ours.
SOFTWARE = "ctxrules tune"
#: The most labelled ticks of a parameter's axis: beyond, every n-th value is labelled
#: (a label per value of a long range is unreadable and slow to draw).
MAX_TICKS = 24
#: The most settings annotated by name on the frontier plot.
MAX_NAMES = 40


def available() -> bool:
    """Whether matplotlib, the optional extra ``ctxrules[plot]``, can be imported."""
    try:
        # deferred: matplotlib is the optional extra ctxrules[plot]
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


_AXIS = {"cost": "cost (USD)", "tokens": "prompt tokens sent"}


def _figure(width: float, height: float) -> Any:
    # deferred: matplotlib is the optional extra ctxrules[plot]
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path | IO[bytes]) -> Path | IO[bytes]:
    fig.savefig(path, format="png", metadata={"Software": SOFTWARE})
    return Path(path) if isinstance(path, (str, Path)) else path


def plot_frontier(result: TuneResult, path: str | Path | IO[bytes]) -> Any:
    """Write the trade-off plot of ``result`` to ``path`` (PNG; a path or a binary
    file); returns it (a path as a ``Path``)."""
    objective = result.objective
    fig = _figure(9, 6)
    ax = fig.subplots()
    ok = [r for r in result.results if r.ok]
    bad = [r for r in result.results if not r.ok]
    ax.scatter(
        [r.objective(objective) for r in ok],
        [r.quality for r in ok],
        s=22,
        color="#9aa5b1",
        label="setting",
        zorder=2,
    )
    if bad:
        ax.scatter(
            [r.objective(objective) for r in bad],
            [r.quality for r in bad],
            marker="x",
            color="#c0392b",
            label="violations (excluded)",
            zorder=3,
        )
    front = [result.results[i] for i in result.frontier]
    if front:
        xs = [r.objective(objective) for r in front]
        ys = [r.quality for r in front]
        ax.step(xs, ys, where="post", color="#1f77b4", linewidth=1.5, zorder=3)
        ax.scatter(xs, ys, s=40, color="#1f77b4", label="Pareto-optimal", zorder=4)
        names: dict[tuple[float, float], list[str]] = {}
        for r, x, y in zip(front, xs, ys):
            names.setdefault((x, y), []).append(r.label)  # equal points share one note
        for (x, y), labels in list(names.items())[:MAX_NAMES]:
            ax.annotate(
                "\n".join(labels),
                (x, y),
                textcoords="offset points",
                xytext=(6, -10),
                va="top",
                fontsize=7,
                color="#1f3b57",
            )
    for r in result.results:
        if r.default:
            ax.scatter(
                [r.objective(objective)],
                [r.quality],
                marker="D",
                s=70,
                facecolor="none",
                edgecolor="#e67e22",
                linewidth=2,
                label=f"default ({r.label})",
                zorder=5,
            )
    if result.chosen is not None:
        c = result.results[result.chosen]
        ax.scatter(
            [c.objective(objective)],
            [c.quality],
            s=220,
            facecolor="none",
            edgecolor="#2ca02c",
            linewidth=2,
            label=f"chosen ({c.label})",
            zorder=6,
        )
    ax.set_xlabel(_AXIS[objective])
    ax.set_ylabel("context quality (share of key facts kept)")
    ax.set_title(
        f"{_AXIS[objective]} against quality: {len(result.results)} settings, "
        f"{len(result.sessions)} session(s)"
    )
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_sweep(result: TuneResult, path: str | Path | IO[bytes]) -> Any:
    """Write one panel per swept parameter: objective against the parameter's value
    (every value's tick, labels thinned to at most ``MAX_TICKS`` per panel)."""
    objective = result.objective
    n = max(1, len(result.params))
    fig = _figure(4.2 * n, 3.8)
    axes = fig.subplots(1, n, squeeze=False)
    front = {result.results[i].label for i in result.frontier}
    ok = [r for r in result.results if r.ok]
    for ax, p in zip(axes[0], result.params):
        order = {v: i for i, v in enumerate(p.values)}
        points: dict[bool, tuple[list[int], list[float]]] = {True: ([], []), False: ([], [])}
        for r in ok:
            x = order.get(_key(r.setting.get(p.key)), None)
            if x is None:  # the default's value, when not swept
                continue
            xs, ys = points[r.label in front]
            xs.append(x)
            ys.append(r.objective(objective))
        for on_front, (xs, ys) in points.items():  # one call per group, not per point
            ax.scatter(
                xs,
                ys,
                s=28 if on_front else 14,
                color="#1f77b4" if on_front else "#9aa5b1",
                zorder=3 if on_front else 2,
            )
        step = -(-len(p.values) // MAX_TICKS)  # ceil: at most MAX_TICKS labels
        shown = range(0, len(p.values), step)
        ax.set_xticks(list(shown))
        ax.set_xticklabels([_tick(p.values[i]) for i in shown], rotation=45, fontsize=7)
        ax.set_xlabel(p.key)
        ax.set_ylabel(_AXIS[objective])
        ax.grid(True, alpha=0.3)
    fig.suptitle("each setting's objective by parameter value (blue: Pareto-optimal)")
    fig.tight_layout()
    return _save(fig, path)


def _key(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _tick(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)
