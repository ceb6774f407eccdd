"""Pool the ``runs.csv`` of several reports: mean ± std and paired differences over all their seeds.

A claim is often read over more seeds than one sweep ran: a sweep of seeds 1–3, then the same sweep with
``--seeds 4,5,6``, each with its own report. Their run folders are seldom kept (generated runs are not
committed), but each report wrote ``runs.csv`` (:mod:`raysfl.report.run_table`), every run's values at full
precision. This module reads several such files as one set of runs, so a six-seed reading is computed by a
command, from the committed tables, at the precision the runs had, instead of from the reports' rounded
cells:

    per method        n, the seeds, and mean ± sample std of each pooled column, in % (a time: its unit)
    paired            (method − baseline) per seed, in points (a time: its unit), with mean ± std (SE), a
                      Student's t interval
                      and ahead / behind (:mod:`raysfl.report.paired`, the same tables a report prints)
    processors        seeds whose two paired runs name different processors are stated, as a report does

Runs are matched by their ``setting`` and ``method`` labels, so the files pooled must come from reports that
label the same variants the same way (a rerun of one sweep with other seeds does). The pooled columns are
accuracy columns, ``final_<m>``, ``best_<m>`` and ``last<K>_<m>`` (fractions; differences in points), and
times to a target, ``<x>_to_<target>`` (in the x's unit; an empty cell is a run that never reached the
target and is left out, as a report leaves it out); by default every such column that all the files hold
except ``best_<m>``. A (setting, method, seed) found in two files is counted once when both rows agree on
every pooled column (one run read by two reports) and refused otherwise.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from raysfl.report.paired import (
    Pairing,
    mixed_processor_note,
    mixed_processor_seeds,
    paired_rows,
    parse_pairings,
    seed_differences,
)
from raysfl.report.runs import finite_values, mean_std

REQUIRED = ("setting", "method", "algorithm", "seed")
ACCURACY_COLUMN = re.compile(r"^(final|best|last[1-9][0-9]*)_\w*accuracy$")
TIME_COLUMN = re.compile(r"^(emulated|iteration|bytes|wall)_to_[0-9][0-9.e+-]*$")
TIME_UNITS = {"emulated": "s", "iteration": "iterations", "bytes": "MiB", "wall": "s"}  # runs.x_value's


@dataclass(frozen=True)
class ColumnKind:
    """How a pooled column is shown: its scale and unit, and what its positive / negative differences mean."""

    scale: float
    unit: str
    digits: int
    signs: tuple[str, str]


def column_kind(column: str) -> ColumnKind:
    """An accuracy column's values in % and differences in points; a time column's in its x's unit.

    Example:
        >>> column_kind("last5_accuracy").unit, column_kind("emulated_to_0.3").signs
        ('points', ('later', 'sooner'))
    """
    if ACCURACY_COLUMN.match(column):
        return ColumnKind(scale=100.0, unit="points", digits=2, signs=("ahead", "behind"))
    return ColumnKind(1.0, TIME_UNITS[column.split("_to_", 1)[0]], 1, ("later", "sooner"))


def poolable(column: str) -> bool:
    """An accuracy column or a time to a target (module docstring)."""
    return bool(ACCURACY_COLUMN.match(column) or TIME_COLUMN.match(column))


@dataclass(frozen=True)
class PooledRun:
    """One row of a ``runs.csv``: its labels, its seed and its pooled columns (accuracies as fractions)."""

    source: Path
    setting: str
    method: str
    algorithm: str
    seed: int
    values: Mapping[str, float | None]
    processors: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Pool:
    """The runs of several ``runs.csv`` files, the columns pooled, and the rows counted once (with why)."""

    sources: tuple[Path, ...]
    columns: tuple[str, ...]
    runs: tuple[PooledRun, ...]
    repeated: tuple[str, ...] = ()

    def settings(self) -> list[str]:
        """Setting labels in the order their first run appears."""
        return list(dict.fromkeys(r.setting for r in self.runs))

    def methods(self, setting: str) -> list[str]:
        """Method labels of ``setting`` in the order their first run appears."""
        return list(dict.fromkeys(r.method for r in self.runs if r.setting == setting))

    def of(self, setting: str, method: str) -> list[PooledRun]:
        """The runs of one method in one setting, by seed."""
        runs = [r for r in self.runs if r.setting == setting and r.method == method]
        return sorted(runs, key=lambda r: r.seed)


def _value(text: str | None, column: str, where: str) -> float | None:
    if text is None:  # csv.DictReader's filler for a line with fewer cells than the header
        raise ValueError(f"{where}: the line ends before column {column!r}")
    if text == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{where}: column {column!r} holds {text!r}, not a number") from None


def read_table(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of one ``runs.csv``; refuses a file without the report's label columns."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (give the runs.csv a report wrote)")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        rows = list(reader)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ValueError(
            f"{path}: not a report's runs.csv (no column {', '.join(map(repr, missing))}; it has "
            f"{', '.join(header) or 'no header'})"
        )
    return header, rows


def _default_columns(headers: Mapping[Path, Sequence[str]]) -> list[str]:
    common = [c for c in next(iter(headers.values())) if all(c in h for h in headers.values())]
    chosen = [c for c in common if poolable(c) and not c.startswith("best_")]
    if not chosen:
        held = "; ".join(f"{path}: {', '.join(header)}" for path, header in headers.items())
        raise ValueError(
            "the files share no final_*, last<K>_* or *_to_<target> column; name one with --column "
            f"(they hold: {held})"
        )
    return chosen


def _checked_columns(columns: Sequence[str], headers: Mapping[Path, Sequence[str]]) -> list[str]:
    for column in columns:
        if not poolable(column):
            raise ValueError(
                f"--column: {column!r} is not an accuracy column or a time to a target; allowed: "
                "final_<metric>, best_<metric>, last<K>_<metric>, <x>_to_<target> (e.g. final_accuracy, "
                "last5_accuracy, emulated_to_0.7)"
            )
        for path, header in headers.items():
            if column not in header:
                held = ", ".join(c for c in header if poolable(c)) or "none"
                raise ValueError(f"--column: {path} has no {column!r} (its columns to pool: {held})")
    return list(dict.fromkeys(columns))


def pool_tables(paths: Sequence[str | Path], columns: Sequence[str] = ()) -> Pool:
    """Read the ``runs.csv`` files at ``paths`` as one :class:`Pool` of ``columns`` (module docstring).

    Raises:
        FileNotFoundError: a path that is not a file.
        ValueError: a file that is not a report's runs.csv, a cell that is not a number, a column not held
            by every file or not an accuracy column, or one run in two files with different values.
    """
    if not paths:
        raise ValueError("give at least one runs.csv")
    tables = {Path(p): read_table(Path(p)) for p in paths}
    headers = {p: header for p, (header, _) in tables.items()}
    pooled = _checked_columns(columns, headers) if columns else _default_columns(headers)
    runs: dict[tuple[str, str, int], PooledRun] = {}
    repeated: list[str] = []
    for path, (_, rows) in tables.items():
        for line, row in enumerate(rows, start=2):
            where = f"{path} line {line}"
            try:
                seed = int(row["seed"])
            except (TypeError, ValueError):
                raise ValueError(f"{where}: seed {row['seed']!r} is not an integer") from None
            run = PooledRun(
                source=path,
                setting=row["setting"],
                method=row["method"],
                algorithm=row["algorithm"],
                seed=seed,
                values={c: _value(row[c], c, where) for c in pooled},
                processors=frozenset(p for p in (row.get("processors") or "").split("; ") if p),
            )
            key = (run.setting, run.method, run.seed)
            kept = runs.get(key)
            if kept is None:
                runs[key] = run
                continue
            name = f"seed {seed} of {run.method!r} ({run.setting})"
            if dict(kept.values) != dict(run.values):
                raise ValueError(
                    f"{name} is in {kept.source} and in {path} with different values "
                    f"({dict(kept.values)} against {dict(run.values)}): two runs of one seed; pool "
                    "files whose runs do not overlap"
                )
            repeated.append(f"{name} is in {kept.source} and {path} with equal values: counted once")
    return Pool(tuple(tables), tuple(pooled), tuple(runs.values()), tuple(repeated))


def _mean_std_cell(values: Sequence[float | None], kind: ColumnKind) -> str:
    mean, std = mean_std(values)
    counted = len(finite_values(values))
    if mean is None:
        text = "-"
    elif std is None:
        text = f"{kind.scale * mean:.{kind.digits}f}"
    else:
        text = f"{kind.scale * mean:.{kind.digits}f} ± {kind.scale * std:.{kind.digits}f}"
    return text + (f" ({counted}/{len(values)})" if counted < len(values) else "")


def _heading(column: str) -> str:
    kind = column_kind(column)
    return f"{column} %" if kind.unit == "points" else f"{column} ({kind.unit})"


def summary_lines(pool: Pool, setting: str) -> list[str]:
    """The per-method table of one setting: n, seeds, and mean ± std of each pooled column (% or its unit)."""
    heads = [_heading(c) for c in pool.columns]
    lines = [
        "| method | n | seeds | " + " | ".join(heads) + " | processors |",
        "|---|---|---|" + "---|" * (len(heads) + 1),
    ]
    for method in pool.methods(setting):
        runs = pool.of(setting, method)
        cells = [_mean_std_cell([r.values[c] for r in runs], column_kind(c)) for c in pool.columns]
        seeds = ", ".join(str(r.seed) for r in runs)
        processors = "; ".join(sorted(set().union(*(r.processors for r in runs)))) or "-"
        lines.append(f"| {method} | {len(runs)} | {seeds} | " + " | ".join(cells) + f" | {processors} |")
    return lines + [""]


def paired_lines(pool: Pool, setting: str, pairings: Sequence[Pairing]) -> list[str]:
    """One setting's paired tables, a table per pooled column for each of ``pairings``.

    A setting without a pairing's baseline, or without any of its methods, gets one line saying so, as a
    report's setting does.
    """
    names = pool.methods(setting)
    lines: list[str] = []
    for pairing in pairings:
        if pairing.baseline not in names:
            lines += [f"No `{pairing.baseline}` runs in this setting: nothing to pair with.", ""]
            continue
        base = pool.of(setting, pairing.baseline)
        everyone = [n for n in names if n != pairing.baseline]
        wanted = everyone if pairing.methods is None else [n for n in pairing.methods if n in names]
        if not wanted:
            listed = ", ".join(f"`{n}`" for n in pairing.methods or ())
            lines += [f"No {listed} runs in this setting to pair with `{pairing.baseline}`.", ""]
            continue
        seeds = sorted({r.seed for r in base})
        for column in pool.columns:
            kind = column_kind(column)
            theirs = {r.seed: r.values[column] for r in base}
            rows = []
            for name in wanted:
                mine = {r.seed: r.values[column] for r in pool.of(setting, name)}
                rows.append((name, seed_differences(mine, theirs, kind.scale)))
            lines += paired_rows(pairing.baseline, column, seeds, rows, kind.unit, kind.signs)
        for name in wanted:
            mine_on = {r.seed: r.processors for r in pool.of(setting, name)}
            mixed = mixed_processor_seeds(mine_on, {r.seed: r.processors for r in base})
            lines += mixed_processor_note(name, pairing.baseline, mixed)
    return lines


def pooled_markdown(pool: Pool, paired: Sequence[str] = (), command: str = "") -> str:
    """The pooled reading as markdown: the sources, then per setting the summary and paired tables.

    Raises:
        ValueError: a ``--paired`` value that names no method of the runs, or several
            (:func:`raysfl.report.paired.resolve_method`).
    """
    names = list(dict.fromkeys(r.method for r in pool.runs))
    algorithms = {r.method: r.algorithm for r in pool.runs}
    pairings = parse_pairings(paired, names, algorithms) if paired else []
    n = len(pool.runs)
    lines = [f"# Pooled: {n} runs from {len(pool.sources)} runs.csv files", ""]
    if command:
        lines += [f"Made by `{command}`.", ""]
    lines += ["Sources:", ""] + [f"- `{p}`" for p in pool.sources] + [""]
    lines += [f"Repeated: {r}." for r in pool.repeated] + ([""] if pool.repeated else [])
    lines += [
        "Mean ± sample standard deviation over seeds, from each run's value at full precision: accuracies "
        "in %, their differences in points, times in their x's unit; a cell with (k/n) is over the k seeds "
        "that hold a value (a time: that reached the target).",
        "",
    ]
    for setting in pool.settings():
        lines += [f"## {setting}", ""] + summary_lines(pool, setting)
        lines += paired_lines(pool, setting, pairings)
    return "\n".join(lines).rstrip("\n") + "\n"
