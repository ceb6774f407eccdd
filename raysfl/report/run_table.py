"""``runs.csv``: one row per run a report counted, every value at full precision.

``report.md`` rounds each run's numbers to 0.01 points; a reading that later combines them with more seeds
(a paired interval over 15 + 6 seeds, say) would inherit that rounding. The run folders themselves are
seldom kept beside a report (generated runs are not committed), so the report writes the values it read
from them as a table any tool can load (``pandas.read_csv``), written with Python's shortest round-trip
float text: reading it back gives the same floats the report computed with.

Columns, in order (accuracies as fractions in [0, 1], as the runs log them, not in %):

    setting, method, algorithm   the report's setting and method labels, and ``algorithm.name``
    seed, run                    the scenario seed and the run folder as found
    final_<m>, best_<m>          the run's last and highest evaluation of the metric ``<m>``
    last<K>_<m>                  with ``--last K``: the mean over its last K evaluations
    <x>_to_<target>              with ``--target``: the x (``emulated`` s by default) of its first
                                 evaluation at or above the target, a fraction (``emulated_to_0.7``);
                                 empty: never reached
    evaluations                  how many finite evaluations of ``<m>`` the run logged
    bytes_up, bytes_down         bytes sent clients → server and back (empty: the summary records none)
    wall_s                       the run's wall-clock seconds (empty: not recorded)
    diverged_at                  the iteration its test loss turned NaN or infinite (empty: never)
    processors                   the processor models that computed it, ``; ``-separated
                                 (:func:`raysfl.report.paired.computed_on`; empty: none recorded), so a
                                 later reading can tell which seeds crossed machines
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from raysfl.report.paired import computed_on
from raysfl.report.runs import Group, diverged_at, first_reaching
from raysfl.safe_write import replace_text

RUNS_FILE = "runs.csv"


def _cell(value: Any) -> str:
    """A CSV cell: ``""`` for a missing value, ``repr`` for a float (shortest text that reads back exact)."""
    if value is None:
        return ""
    return repr(float(value)) if isinstance(value, float) else str(value)


def run_table(
    settings: Mapping[str, Sequence[Group]],
    names: Mapping[int, str],
    *,
    metric: str = "accuracy",
    last: int = 0,
    target: float | None = None,
    x: str = "emulated",
) -> tuple[list[str], list[list[str]]]:
    """The header and rows of ``runs.csv`` (module docstring), settings and methods in the report's order.

    ``settings`` maps each setting label to its groups; ``names`` maps ``id(group)`` to its method label.
    Within a group the rows go by seed.
    """
    header = ["setting", "method", "algorithm", "seed", "run", f"final_{metric}", f"best_{metric}"]
    header += [f"last{last}_{metric}"] if last > 0 else []
    header += [f"{x}_to_{float(target)!r}"] if target is not None else []
    header += ["evaluations", "bytes_up", "bytes_down", "wall_s", "diverged_at", "processors"]
    rows: list[list[str]] = []
    for setting, groups in settings.items():
        for group in groups:
            for run in sorted(group.runs, key=lambda r: r.seed):
                xs, ys = run.curve(x, metric)
                values: list[Any] = [setting, names[id(group)], group.method.get("name", ""), run.seed]
                values += [run.path, run.final(metric), run.best(metric)]
                values += [run.end(metric, last)] if last > 0 else []
                values += [first_reaching(xs, ys, target)] if target is not None else []
                sent = [run.recorded(key) for key in ("bytes_up", "bytes_down")]
                values += [len(ys), *(None if b is None else int(b) for b in sent)]
                values += [run.recorded("wall_s"), diverged_at(run)]
                values += ["; ".join(sorted(computed_on(run)))]
                rows.append([_cell(v) for v in values])
    return header, rows


def write_run_table(path: Path, header: Sequence[str], rows: Sequence[Sequence[str]]) -> Path:
    """Write ``header`` and ``rows`` to ``path`` as CSV (never through a link, :mod:`raysfl.safe_write`)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    replace_text(path, text.getvalue())
    return path
