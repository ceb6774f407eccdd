"""Accuracy curves of grouped runs: one figure per setting, one line (mean over seeds) per method, a band.

Figures are drawn with matplotlib's Agg backend (no display needed) at 7 × 4.5 inches and 100 dpi, a size
that reads at 100 % zoom (taller when long method labels need a legend under the axes). The line is the
mean over seeds of the accuracy, the band its min–max range (:func:`raysfl.report.runs.mean_curve`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from raysfl.report.runs import Group, mean_curve
from raysfl.safe_write import replace_file

AXIS_TITLES = {
    "emulated": "emulated time (s)",
    "iteration": "global iteration",
    "bytes": "data transferred, up + down (MiB)",
    "wall": "wall-clock time (s)",
}
FIGSIZE = (7.0, 4.5)
DPI = 100
INSIDE_LABEL = 40  # characters: longer legend labels go under the axes, wrapped at LABEL_WIDTH
LABEL_WIDTH = 110
LEGEND_ROW = 0.3  # inches of figure height per legend entry under the axes
TITLE_WIDTH = 90


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
        curves = [c for c in (run.curve(x, metric) for run in group.runs) if len(c[0])]
        grid, mean, low, high = mean_curve(curves)
        if not len(grid):
            continue
        (line,) = ax.plot(grid, 100 * mean, label=f"{name} ({_seeds(len(curves), len(group.runs))})")
        line.set_linewidth(1.8)
        ax.fill_between(grid, 100 * low, 100 * high, color=line.get_color(), alpha=0.18, linewidth=0)
    ax.set_xlabel(AXIS_TITLES[x])
    ax.set_ylabel(f"test {metric} (%)")
    ax.set_title(textwrap.fill(title, TITLE_WIDTH), fontsize=10)
    ax.grid(True, alpha=0.3)
    fig.set_layout_engine("constrained")
    lines = ax.get_lines()
    if any(len(str(line.get_label())) > INSIDE_LABEL for line in lines):
        # long labels (a sweep's bound keys) would cover the curves: a legend of its own under the axes
        fig.set_figheight(FIGSIZE[1] + LEGEND_ROW * len(lines))
        wrapped = [textwrap.fill(str(line.get_label()), LABEL_WIDTH) for line in lines]
        fig.legend(lines, wrapped, fontsize=7, loc="outside lower center")
    elif lines:
        ax.legend(fontsize=8, loc="lower right")
    return fig


def _seeds(drawn: int, runs: int) -> str:
    """``n=3``, or ``n=2 of 3`` when some runs have no evaluation of the metric on this axis."""
    return f"n={drawn}" if drawn == runs else f"n={drawn} of {runs}"


def save(fig, path: Path) -> Path:  # noqa: ANN001 - a matplotlib Figure
    """Write ``fig`` as PNG to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, lambda tmp: fig.savefig(tmp, dpi=DPI))
    return path
