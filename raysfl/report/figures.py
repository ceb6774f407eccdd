"""Accuracy curves of grouped runs: one figure per setting, one line (mean over seeds) per method, a band.

Figures are drawn with matplotlib's Agg backend (no display needed) at 7 × 4.5 inches and 100 dpi, a size
that reads at 100 % zoom. The line is the mean over seeds of the accuracy, the band its min–max range
(:func:`raysfl.report.runs.mean_curve`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from raysfl.report.runs import Group, mean_curve

AXIS_TITLES = {
    "emulated": "emulated time (s)",
    "iteration": "global iteration",
    "bytes": "data transferred, up + down (MiB)",
    "wall": "wall-clock time (s)",
}
FIGSIZE = (7.0, 4.5)
DPI = 100


def accuracy_figure(  # noqa: ANN201
    groups: Sequence[Group], labels: Sequence[str], x: str, title: str, metric: str = "accuracy"
):
    """A matplotlib ``Figure``: ``metric`` (%) against ``x``, one mean line and one min–max band per group."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    ax = fig.add_subplot()
    for group, name in zip(groups, labels, strict=True):
        grid, mean, low, high = mean_curve([run.curve(x, metric) for run in group.runs])
        if not len(grid):
            continue
        n = len(group.runs)
        (line,) = ax.plot(grid, 100 * mean, label=f"{name} (n={n})", linewidth=1.8)
        ax.fill_between(grid, 100 * low, 100 * high, color=line.get_color(), alpha=0.18, linewidth=0)
    ax.set_xlabel(AXIS_TITLES[x])
    ax.set_ylabel(f"test {metric} (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    if ax.get_lines():
        ax.legend(fontsize=8, loc="lower right")
    fig.set_layout_engine("constrained")
    return fig


def save(fig, path: Path) -> Path:  # noqa: ANN001 - a matplotlib Figure
    """Write ``fig`` as PNG to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return path
